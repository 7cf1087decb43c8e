package replication

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/wal"
)

// TestReplicaCatchesUpAfterLongAbsence stops a read replica, writes many log
// entries while it is down (enough for raft to snapshot and compact the log
// past the replica's position several times), restarts it, and checks that
// it catches up to the same state as the voters. The entry count is 2000, or
// DUCKRAFT_CATCHUP_ENTRIES (docs/benchmarks.md records a 100,000-entry run).
func TestReplicaCatchesUpAfterLongAbsence(t *testing.T) {
	if testing.Short() {
		t.Skip("writes thousands of entries")
	}
	entries := 2000
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
	replica := &testNode{id: "r1", dir: t.TempDir(), mod: mod}
	t.Cleanup(func() { replica.stop(t, true) })
	replica.start(t, false)
	if err := leader.store.Join(replica.id, replica.addr, false); err != nil {
		t.Fatal(err)
	}
	mustExec(t, leader.store, stmt("CREATE TABLE t(i INTEGER)"))
	replica.stop(t, false)

	// Write until the leader's newest snapshot covers its last entry, so
	// that the replica gets that snapshot and nothing after it.
	var last uint64
	deadline := time.Now().Add(time.Minute)
	for i := 0; ; i++ {
		last = mustExec(t, leader.store, stmt(fmt.Sprintf("INSERT INTO t VALUES (%d)", i))).Index
		if i < 32 {
			continue
		}
		time.Sleep(200 * time.Millisecond)
		st := leader.store.raft.Stats()
		if st["last_snapshot_index"] == st["last_log_index"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leader's snapshots never caught up with its log: %v", st)
		}
	}
	replica.start(t, false)
	waitApplied(t, []*testNode{replica}, last)
	snaps := func() []string {
		entries, err := os.ReadDir(filepath.Join(replica.dir, "raft", "snapshots"))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range entries {
			ids = append(ids, e.Name())
		}
		return ids
	}
	installed := snaps()
	if len(installed) == 0 {
		t.Fatal("the replica caught up without a snapshot")
	}
	// Forty intervals: without the FSM declining, raft snapshots at each.
	time.Sleep(40 * 50 * time.Millisecond)
	if got := snaps(); !slices.Equal(got, installed) {
		t.Fatalf("idle replica wrote snapshots %v after installing %v", got, installed)
	}
}
