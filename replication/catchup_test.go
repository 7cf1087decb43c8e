package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/wal"
)

// TestReplicaCatchesUpAfterLongAbsence stops a read replica, writes many log
// entries while it is down (enough for raft to snapshot and compact the log
// past the replica's position several times), restarts it, and checks that
// it catches up to the same state as the voters. The entry count is 400
// (make test, under the race detector: six compactions), 2000 with
// DUCKRAFT_LONG set (make test-long), or DUCKRAFT_CATCHUP_ENTRIES
// (docs/benchmarks.md records a 100,000-entry run).
func TestReplicaCatchesUpAfterLongAbsence(t *testing.T) {
	if testing.Short() {
		t.Skip("writes hundreds of entries")
	}
	entries := 400
	if os.Getenv("DUCKRAFT_LONG") != "" {
		entries = 2000
	}
	if v := os.Getenv("DUCKRAFT_CATCHUP_ENTRIES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("DUCKRAFT_CATCHUP_ENTRIES=%q", v)
		}
		entries = n
	}
	// Compaction well inside the absence, with the defaults' ratio.
	threshold := uint64(max(entries/8, 64))
	mod := func(c *Config) {
		c.SnapshotThreshold, c.TrailingLogs, c.SnapshotInterval = threshold, threshold/2, 200*time.Millisecond
	}
	nodes := startCluster(t, 3, mod)
	leader := waitLeader(t, nodes)
	replica := &testNode{id: "r1", dir: t.TempDir(), mod: mod}
	t.Cleanup(func() { replica.stop(t, true) })
	replica.start(t, false)
	if err := leader.store.Join(replica.id, replica.addr, false); err != nil {
		t.Fatal(err)
	}
	mustExec(t, leader.store, stmt("CREATE TABLE t(i INTEGER PRIMARY KEY, v VARCHAR)"))
	res := mustExec(t, leader.store, stmt("INSERT INTO t VALUES (-1, 'before')"))
	all := append(nodes, replica)
	waitApplied(t, all, res.Index)
	replica.stop(t, false)
	down := res.Index

	// One raft entry per write, proposed 64 at a time: the group commit of
	// Store.Execute would pack concurrent writes into fewer entries. The
	// machine may be loaded enough for an election; the writes are
	// idempotent, so a window that failed is proposed again to the leader.
	start := time.Now()
	const window = 64
	var last uint64
	for next := 0; next < entries; {
		leader = waitLeader(t, nodes)
		futures := make([]raft.ApplyFuture, 0, window)
		for i := next; i < min(next+window, entries); i++ {
			sql := fmt.Sprintf("INSERT INTO t VALUES (%d, 'row %d') ON CONFLICT DO NOTHING", i, i)
			data, err := wal.Batch{Commands: []wal.Command{stmt(sql)}}.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			futures = append(futures, leader.store.raft.Apply(data, 30*time.Second))
		}
		failed := false
		for _, f := range futures {
			if err := f.Error(); err != nil {
				t.Logf("entries %d..: %v; proposing them again", next, err)
				failed = true
				continue
			}
			if r, ok := f.Response().(*entryResult); !ok || r.results[0].err != nil {
				t.Fatalf("entry %d: %v", f.Index(), f.Response())
			}
			last = max(last, f.Index())
		}
		if !failed {
			next += len(futures)
		}
	}
	wrote := time.Since(start)
	waitApplied(t, nodes, last)
	if first, err := leader.store.logs.FirstIndex(); err != nil || first <= down {
		t.Fatalf("log starts at %d (err %v): not compacted past the replica's index %d", first, err, down)
	}

	start = time.Now()
	replica.start(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := replica.store.WaitForApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	caught := time.Since(start)
	t.Logf("%d entries written in %v (%.0f entries/s); the replica caught up from index %d to %d in %v",
		entries, wrote.Round(time.Millisecond), float64(entries)/wrote.Seconds(), down, last, caught.Round(time.Millisecond))

	want, err := leader.store.StateHash(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range all {
		if err := n.store.WaitForApplied(ctx, want.Index); err != nil {
			t.Fatal(err)
		}
		got, err := n.store.StateHash(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got.Index == want.Index && got.Hash != want.Hash {
			t.Errorf("%s: hash %s at %d, leader %s", n.id, got.Hash, got.Index, want.Hash)
		}
	}
	if got := queryInt(t, replica.db, "SELECT count(*) FROM t"); got != int64(entries)+1 {
		t.Fatalf("replica has %d rows, want %d", got, entries+1)
	}
}

// TestNoRepeatedSnapshotAfterInstall: a node that caught up from a snapshot
// of the leader's last entry holds no log entries, which raft's snapshot
// check reads as an unbounded backlog. Idle afterwards, it must not write
// the same snapshot again at every interval.
func TestNoRepeatedSnapshotAfterInstall(t *testing.T) {
	mod := func(c *Config) {
		c.SnapshotThreshold, c.TrailingLogs, c.SnapshotInterval = 16, 4, 50*time.Millisecond
	}
	nodes := startCluster(t, 3, mod)
	leader := waitLeader(t, nodes)
	declines := new(declineCounter)
	replica := &testNode{id: "r1", dir: t.TempDir(), mod: func(c *Config) {
		mod(c)
		c.Logger = slog.New(declines.wrap(c.Logger.Handler()))
	}}
	t.Cleanup(func() { replica.stop(t, true) })
	replica.start(t, false)
	if err := leader.store.Join(replica.id, replica.addr, false); err != nil {
		t.Fatal(err)
	}
	created := mustExec(t, leader.store, stmt("CREATE TABLE t(i INTEGER)")).Index
	waitApplied(t, []*testNode{replica}, created)

	// An election on the loaded machine appends an entry, and a replica
	// that receives one after the snapshot is no longer the case under
	// test: then the replica is stopped and the case built again.
	for attempt, i := 1, 0; ; attempt++ {
		down, err := replica.store.logs.LastIndex()
		if err != nil {
			t.Fatal(err)
		}
		replica.stop(t, false)
		last := snapshotLast(t, nodes, &i)
		leader = waitLeader(t, nodes)
		if first, err := leader.store.logs.FirstIndex(); err != nil || first <= down {
			t.Fatalf("log starts at %d (err %v): not compacted past the replica's index %d", first, err, down)
		}
		replica.start(t, false)
		// The FSM restores before raft records the snapshot as its own.
		waitFor(t, time.Minute, fmt.Sprintf("the replica to install the snapshot at %d", last), func() bool {
			return replica.store.raft.Stats()["last_snapshot_index"] == strconv.FormatUint(last, 10)
		})
		installed := replicaSnapshots(t, replica)
		// Each of raft's checks either finds the FSM declining or writes
		// a snapshot again: wait for a few checks rather than for a time,
		// which a loaded machine may fill with none.
		const checks = 5
		from, appended := declines.Load(), false
		waitFor(t, 5*time.Minute, fmt.Sprintf("%d declined snapshots on the idle replica", checks), func() bool {
			if got := replicaSnapshots(t, replica); !slices.Equal(got, installed) {
				t.Fatalf("idle replica wrote snapshots %v after installing %v", got, installed)
			}
			li, err := replica.store.logs.LastIndex()
			if err != nil {
				t.Fatal(err)
			}
			appended = li > last
			return appended || declines.Load()-from >= checks
		})
		if !appended {
			return
		}
		if attempt == 5 {
			t.Fatalf("an entry followed the snapshot to the replica in each of %d attempts", attempt)
		}
		t.Logf("attempt %d: an entry followed the snapshot at %d to the replica; again", attempt, last)
	}
}

// snapshotLast writes at least 32 rows (numbered on from *i) through the
// leader and returns its last entry once the leader's newest snapshot covers
// it. Raft's own snapshots come at the threshold, when the next write may
// already be in the log; one asked for with no write in flight covers the
// last entry, unless an election appended one meanwhile, and then another
// write and snapshot are tried.
func snapshotLast(t *testing.T, nodes []*testNode, i *int) uint64 {
	t.Helper()
	var last uint64
	for n, tries := 0, 0; ; n++ {
		last = execOnLeader(t, nodes, stmt(fmt.Sprintf("INSERT INTO t VALUES (%d)", *i))).Index
		*i++
		if n < 32 {
			continue
		}
		leader := waitLeader(t, nodes)
		if err := leader.store.Snapshot(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
			t.Fatal(err)
		}
		st := leader.store.raft.Stats()
		if st["last_snapshot_index"] == st["last_log_index"] && st["last_log_index"] == strconv.FormatUint(last, 10) {
			return last
		}
		if tries++; tries == 10 {
			t.Fatalf("the leader's snapshot does not cover its last entry %d after %d tries: %v", last, tries, st)
		}
	}
}

// replicaSnapshots lists the snapshots in n's snapshot store.
func replicaSnapshots(t *testing.T, n *testNode) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(n.dir, "raft", "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	return ids
}

// declineCounter counts, through a node's log, raft's snapshot checks that
// the FSM declined as covered by the newest snapshot (hclogAdapter logs them
// at debug level).
type declineCounter struct{ atomic.Int64 }

func (d *declineCounter) wrap(h slog.Handler) slog.Handler { return declineHandler{h, d} }

type declineHandler struct {
	slog.Handler
	d *declineCounter
}

func (h declineHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelDebug || h.Handler.Enabled(ctx, l)
}

func (h declineHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "failed to take snapshot" {
		r.Attrs(func(a slog.Attr) bool {
			err, ok := a.Value.Any().(error)
			if ok && errors.Is(err, raft.ErrNothingNewToSnapshot) {
				h.d.Add(1)
			}
			return !ok
		})
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h declineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return declineHandler{h.Handler.WithAttrs(as), h.d}
}

func (h declineHandler) WithGroup(name string) slog.Handler {
	return declineHandler{h.Handler.WithGroup(name), h.d}
}
