package cluster

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func voter(id string) Server    { return Server{ID: id, Address: "raft-" + id, Voter: true} }
func nonvoter(id string) Server { return Server{ID: id, Address: "raft-" + id} }

// member returns a gossip member with Raft address "raft-<id>" whose state last changed
// at t0+changed.
func member(id string, state State, role Role, applied uint64, changed time.Duration) Member {
	return Member{
		Meta:       Meta{ID: id, Role: role, RaftAddr: "raft-" + id, AppliedIndex: applied},
		State:      state,
		LastChange: t0.Add(changed),
	}
}

func alive(id string, applied uint64) Member { return member(id, StateAlive, RoleVoter, applied, 0) }
func replica(id string, applied uint64) Member {
	return member(id, StateAlive, RoleReplica, applied, 0)
}
func dead(id string, at time.Duration) Member { return member(id, StateDead, RoleVoter, 0, at) }

func at(m Member, raftAddr string) Member {
	m.Meta.RaftAddr = raftAddr
	return m
}

// step is one reconcile pass at t0+at, optionally with a new gossip view and leader
// applied index, and the configuration expected after it.
type step struct {
	at      time.Duration
	members []Member // nil keeps the previous view
	applied uint64   // 0 keeps the previous index
	want    []Server
}

func TestReconcile(t *testing.T) {
	tests := []struct {
		name     string
		voters   int
		follower bool
		servers  []Server
		members  []Member
		applied  uint64
		steps    []step
	}{
		{
			name:    "new member joins as non-voter and votes once caught up",
			servers: []Server{voter("n1")},
			members: []Member{alive("n1", 10), alive("n2", 10)},
			applied: 10,
			steps: []step{
				{at: 0, want: []Server{voter("n1"), nonvoter("n2")}},
				{at: time.Second, want: []Server{voter("n1"), nonvoter("n2")}},
				{at: 3 * time.Second, want: []Server{voter("n1"), nonvoter("n2")}},
				{at: 4 * time.Second, want: []Server{voter("n1"), voter("n2")}},
			},
		},
		{
			name:    "lagging non-voter waits until caught up",
			servers: []Server{voter("n1"), nonvoter("n2")},
			members: []Member{alive("n1", 5000), alive("n2", 100)},
			applied: 5000,
			steps: []step{
				{at: 0, want: []Server{voter("n1"), nonvoter("n2")}},
				{at: 10 * time.Second, want: []Server{voter("n1"), nonvoter("n2")}},
				{at: 11 * time.Second, members: []Member{alive("n1", 5000), alive("n2", 4900)},
					want: []Server{voter("n1"), nonvoter("n2")}},
				{at: 12 * time.Second, members: []Member{alive("n1", 5000), alive("n2", 1000)},
					want: []Server{voter("n1"), nonvoter("n2")}},
				{at: 14 * time.Second, members: []Member{alive("n1", 5000), alive("n2", 5000)},
					want: []Server{voter("n1"), nonvoter("n2")}},
				{at: 17 * time.Second, want: []Server{voter("n1"), voter("n2")}},
			},
		},
		{
			name:    "--replica node stays a non-voter",
			servers: []Server{voter("n1")},
			members: []Member{alive("n1", 10), replica("n2", 10)},
			applied: 10,
			steps: []step{
				{at: 0, want: []Server{voter("n1"), nonvoter("n2")}},
				{at: time.Minute, want: []Server{voter("n1"), nonvoter("n2")}},
			},
		},
		{
			name:    "voters capped at target",
			servers: []Server{voter("n1"), voter("n2"), voter("n3")},
			members: []Member{alive("n1", 10), alive("n2", 10), alive("n3", 10), alive("n4", 10)},
			applied: 10,
			steps: []step{
				{at: 0, want: []Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")}},
				{at: time.Minute, want: []Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")}},
			},
		},
		{
			name:    "target of five voters",
			voters:  5,
			servers: []Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4"), nonvoter("n5"), nonvoter("n6")},
			members: []Member{alive("n1", 10), alive("n2", 10), alive("n3", 10), alive("n4", 10), alive("n5", 10), alive("n6", 10)},
			applied: 10,
			steps: []step{
				{at: 0, want: []Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4"), nonvoter("n5"), nonvoter("n6")}},
				{at: 3 * time.Second, want: []Server{voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5"), nonvoter("n6")}},
			},
		},
		{
			name:    "dead voter reaped and a caught-up replica promoted, --replica skipped",
			servers: []Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4"), nonvoter("n5")},
			members: []Member{alive("n1", 10), alive("n2", 10), dead("n3", 0), replica("n4", 10), alive("n5", 10)},
			applied: 10,
			steps: []step{
				{at: 0, want: []Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4"), nonvoter("n5")}},
				{at: 29 * time.Second, want: []Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4"), nonvoter("n5")}},
				{at: 30 * time.Second, want: []Server{voter("n1"), voter("n2"), nonvoter("n4"), voter("n5")}},
			},
		},
		{
			name:    "dead non-voter reaped",
			servers: []Server{voter("n1"), nonvoter("n2")},
			members: []Member{alive("n1", 10), member("n2", StateLeft, RoleReplica, 10, 0)},
			applied: 10,
			steps: []step{
				{at: 10 * time.Second, want: []Server{voter("n1"), nonvoter("n2")}},
				{at: 31 * time.Second, want: []Server{voter("n1")}},
			},
		},
		{
			name:    "removal refused when live voters would not be a majority",
			servers: []Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")},
			members: []Member{alive("n1", 10), dead("n2", 0), dead("n3", 0), alive("n4", 10)},
			applied: 10,
			steps: []step{
				{at: time.Minute, want: []Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")}},
				// n2 comes back: n3 can go, and n4 takes its place.
				{at: 2 * time.Minute, members: []Member{alive("n1", 10), alive("n2", 10), dead("n3", 0), alive("n4", 10)},
					want: []Server{voter("n1"), voter("n2"), voter("n4")}},
			},
		},
		{
			name:    "two of five voters dead: both reaped one at a time",
			voters:  5,
			servers: []Server{voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")},
			members: []Member{alive("n1", 10), alive("n2", 10), alive("n3", 10), dead("n4", 0), dead("n5", 0)},
			applied: 10,
			steps: []step{
				{at: time.Minute, want: []Server{voter("n1"), voter("n2"), voter("n3")}},
			},
		},
		{
			name:    "voter back on a new address is re-added as a non-voter, then votes",
			servers: []Server{voter("n1"), voter("n2"), voter("n3")},
			members: []Member{alive("n1", 10), at(alive("n2", 10), "raft-n2-new"), alive("n3", 10)},
			applied: 10,
			steps: []step{
				{at: 0, want: []Server{voter("n1"), voter("n3"), {ID: "n2", Address: "raft-n2-new"}}},
				{at: time.Second, want: []Server{voter("n1"), voter("n3"), {ID: "n2", Address: "raft-n2-new"}}},
				{at: 4 * time.Second, want: []Server{voter("n1"), voter("n3"), {ID: "n2", Address: "raft-n2-new", Voter: true}}},
			},
		},
		{
			name:    "new address of a voter refused while it is needed for quorum",
			servers: []Server{voter("n1"), voter("n2"), voter("n3")},
			members: []Member{alive("n1", 10), at(alive("n2", 10), "raft-n2-new"), dead("n3", 0)},
			applied: 10,
			steps: []step{
				{at: time.Second, want: []Server{voter("n1"), voter("n2"), voter("n3")}},
			},
		},
		{
			name:    "server unknown to gossip reaped after reap-after",
			voters:  4,
			servers: []Server{voter("n1"), voter("n2"), voter("n3"), voter("n9")},
			members: []Member{alive("n1", 10), alive("n2", 10), alive("n3", 10)},
			applied: 10,
			steps: []step{
				{at: 0, want: []Server{voter("n1"), voter("n2"), voter("n3"), voter("n9")}},
				{at: 30 * time.Second, want: []Server{voter("n1"), voter("n2"), voter("n3")}},
			},
		},
		{
			name:    "voter restarted with --replica is demoted",
			servers: []Server{voter("n1"), voter("n2"), voter("n3")},
			members: []Member{alive("n1", 10), alive("n2", 10), replica("n3", 10)},
			applied: 10,
			steps: []step{
				{at: 0, want: []Server{voter("n1"), voter("n2"), nonvoter("n3")}},
			},
		},
		{
			name:    "voters above target demoted",
			servers: []Server{voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")},
			members: []Member{alive("n1", 10), alive("n2", 10), alive("n3", 10), alive("n4", 10), alive("n5", 10)},
			applied: 10,
			steps: []step{
				{at: 0, want: []Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4"), nonvoter("n5")}},
			},
		},
		{
			name:     "follower changes nothing",
			follower: true,
			servers:  []Server{voter("n1")},
			members:  []Member{alive("n1", 10), alive("n2", 10), dead("n3", 0)},
			applied:  10,
			steps: []step{
				{at: time.Minute, want: []Server{voter("n1")}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raft := newFakeRaft(tt.servers...)
			raft.applied = tt.applied
			raft.leader = !tt.follower
			ms := &fakeMembership{members: tt.members}
			now := t0
			r := newTestReconciler(t, raft, ms, tt.voters, func() time.Time { return now })
			for i, st := range tt.steps {
				now = t0.Add(st.at)
				if st.members != nil {
					ms.set(st.members)
				}
				if st.applied != 0 {
					raft.mu.Lock()
					raft.applied = st.applied
					raft.mu.Unlock()
				}
				if err := r.Reconcile(); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				got, _ := raft.Servers()
				if !sameServers(got, st.want) {
					t.Fatalf("step %d (t0+%s): servers\n got %v\nwant %v\nchanges %q", i, st.at, got, st.want, raft.changes)
				}
			}
		})
	}
}

func TestReconcileRegainsLeadership(t *testing.T) {
	raft := newFakeRaft(voter("n1"), nonvoter("n2"))
	raft.applied = 10
	ms := &fakeMembership{members: []Member{alive("n1", 10), alive("n2", 10)}}
	now := t0
	r := newTestReconciler(t, raft, ms, 3, func() time.Time { return now })
	mustReconcile(t, r)
	// Leadership lost and regained: the catch-up clock restarts.
	raft.leader = false
	now = t0.Add(2 * time.Second)
	mustReconcile(t, r)
	raft.leader = true
	now = t0.Add(4 * time.Second)
	mustReconcile(t, r)
	if got, _ := raft.Servers(); got[1].Voter {
		t.Fatalf("n2 promoted 0 s after leadership regained: %v", got)
	}
	now = t0.Add(7 * time.Second)
	mustReconcile(t, r)
	if got, _ := raft.Servers(); !got[1].Voter {
		t.Fatalf("n2 not promoted 3 s after leadership regained: %v", got)
	}
}

func TestReconcileReportsRaftErrors(t *testing.T) {
	raft := newFakeRaft(voter("n1"))
	ms := &fakeMembership{members: []Member{alive("n1", 0), alive("n2", 0)}}
	r := newTestReconciler(t, raft, ms, 3, nil)
	// Leadership lost between the check and the change.
	r.cfg.Raft = &losesLeadership{raft}
	err := r.Reconcile()
	if err == nil || !strings.Contains(err.Error(), "add non-voter n2") {
		t.Fatalf("Reconcile = %v, want an add non-voter error", err)
	}
}

type losesLeadership struct{ *fakeRaft }

func (l *losesLeadership) IsLeader() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ok := l.leader
	l.leader = false
	return ok
}

func newTestReconciler(t *testing.T, raft Raft, ms Membership, voters int, now func() time.Time) *Reconciler {
	t.Helper()
	r, err := NewReconciler(ReconcilerConfig{
		ID:         "n1",
		Raft:       raft,
		Membership: ms,
		Voters:     voters,
		Logger:     testLogger(t),
		Now:        now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustReconcile(t *testing.T, r *Reconciler) {
	t.Helper()
	if err := r.Reconcile(); err != nil {
		t.Fatal(err)
	}
}

func sameServers(a, b []Server) bool {
	cmp := func(x, y Server) int { return strings.Compare(x.ID, y.ID) }
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, cmp)
	slices.SortFunc(b, cmp)
	return slices.Equal(a, b)
}

// testLogger sends logs to t.Log so they show only for failing tests (or with -v). Lines
// logged by goroutines still running after the test are dropped.
func testLogger(t *testing.T) *slog.Logger {
	t.Helper()
	w := &testWriter{t: t}
	t.Cleanup(w.close) // registered first, so it runs after the cleanups that stop nodes
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	t      *testing.T
	mu     sync.Mutex
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}
