package cluster

import (
	"testing"
	"time"
)

// fakeHandoff records leadership transfers; last is the leader's last log index.
type fakeHandoff struct {
	last uint64
	to   []string
}

func (h *fakeHandoff) LastIndex() uint64 { return h.last }

func (h *fakeHandoff) TransferLeadership(to string) error {
	h.to = append(h.to, to)
	return nil
}

func TestReconcileHandsOffWhenBehind(t *testing.T) {
	servers := []Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("r1")}
	tests := []struct {
		name    string
		applied uint64 // the leader's (n1's)
		last    uint64
		members []Member
		want    string // who gets leadership, "" for nobody
	}{
		{"caught-up leader keeps leading", 1000, 1010,
			[]Member{alive("n1", 1000), alive("n2", 1010), alive("n3", 1010), alive("r1", 1010)}, ""},
		{"lagging leader hands to the voter that applied most", 500, 1000,
			[]Member{alive("n1", 500), alive("n2", 700), alive("n3", 990), alive("r1", 1000)}, "n3"},
		{"no voter far enough ahead", 500, 1000,
			[]Member{alive("n1", 500), alive("n2", 600), alive("n3", 520), alive("r1", 1000)}, ""},
		{"dead voters and replicas do not count", 500, 1000,
			[]Member{alive("n1", 500), dead("n2", 0), alive("n3", 510), alive("r1", 1000)}, ""},
		{"voter at another address does not count", 500, 1000,
			[]Member{alive("n1", 500), at(alive("n2", 990), "elsewhere"), alive("n3", 510)}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raft := newFakeRaft(servers...)
			raft.applied = tc.applied
			h := &fakeHandoff{last: tc.last}
			r, err := NewReconciler(ReconcilerConfig{
				ID:         "n1",
				Raft:       raft,
				Membership: &fakeMembership{members: tc.members},
				Handoff:    h,
				Logger:     testLogger(t),
				Now:        func() time.Time { return t0 },
			})
			if err != nil {
				t.Fatal(err)
			}
			mustReconcile(t, r)
			var got string
			if len(h.to) > 0 {
				got = h.to[0]
			}
			if len(h.to) > 1 || got != tc.want {
				t.Fatalf("transfers %v, want to %q", h.to, tc.want)
			}
		})
	}
}
