package replication

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/wal"
)

// heavyCTAS needs more memory than smallMemory allows, and fits in
// largeMemory: measured on DuckDB 2.0 with one thread.
const (
	heavyCTAS   = "CREATE TABLE heavy AS SELECT list(range ORDER BY range) AS l FROM range(3000000)"
	smallMemory = "64MB"
	largeMemory = "2GB"
)

func setMemory(t *testing.T, db *engine.DB, limit string) {
	t.Helper()
	c, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Exec(context.Background(), "SET GLOBAL memory_limit = '"+limit+"'"); err != nil {
		t.Fatal(err)
	}
}

// TestOutOfMemoryStallsAndRecovers applies an entry that runs out of
// memory. The FSM must not halt (before, it halted after three attempts
// and needed a restart with more memory): it retries with backoff, reports
// the stall, interrupts the clients' statements and holds new ones, and
// applies the entry once memory allows, by itself.
func TestOutOfMemoryStallsAndRecovers(t *testing.T) {
	db, err := engine.Open(filepath.Join(t.TempDir(), "duck.db"), engine.Options{Threads: 1, MemoryLimit: smallMemory})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f := openFSM(t, db)
	defer f.close()

	reader, err := db.ConnectClient()
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	readDone := make(chan error, 1)
	go func() {
		_, err := reader.Exec(context.Background(), "SELECT sum(hash(i)) FROM range(100000000000) r(i)")
		readDone <- err
	}()

	applied := make(chan []any, 1)
	go func() { applied <- f.ApplyBatch([]*raft.Log{logEntry(t, 1, stmt(heavyCTAS))}) }()

	waitFor(t, time.Minute, "the applier to stall", func() bool {
		st, ok := f.stalled()
		return ok && st.Attempts >= 2
	})
	st, _ := f.stalled()
	if st.First != 1 || engine.ExceptionType(st.Err) != "Out of Memory" {
		t.Fatalf("stall %+v, want entry 1 out of memory", st)
	}
	if err := f.haltErr(); err != nil {
		t.Fatalf("FSM halted: %v", err)
	}
	select {
	case err := <-readDone:
		if !errors.Is(err, ErrReadYielded) {
			t.Fatalf("the client's read ended with %v, want ErrReadYielded", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the client's read was not interrupted")
	}
	if _, err := reader.Exec(context.Background(), "SELECT 42"); !errors.Is(err, ErrReadYielded) {
		t.Fatalf("a client statement during the stall: %v, want ErrReadYielded", err)
	}

	setMemory(t, db, largeMemory)
	var resps []any
	select {
	case resps = <-applied:
	case <-time.After(2 * time.Minute):
		t.Fatal("the entry did not apply after memory was raised")
	}
	if r, ok := resps[0].(*entryResult); !ok || r.results[0].err != nil {
		t.Fatalf("apply: %v", resps[0])
	}
	if _, ok := f.stalled(); ok || f.Applied() != 1 {
		t.Fatalf("after recovery: stalled %v, applied %d", ok, f.Applied())
	}
	if _, err := reader.Exec(context.Background(), "SELECT 42"); err != nil {
		t.Fatalf("a client statement after the stall: %v", err)
	}
}

// TestOutcomeThroughAStall writes to a one-node cluster (no election can
// move leadership away mid-test on a loaded machine) while its applier is
// stalled: a write proposed before the stall is
// answered "outcome unknown" (it is in the log), not failed; new writes
// are refused before they enter the log; once the stall ends the first
// write applies, and its retry with the same key applies nothing more.
func TestOutcomeThroughAStall(t *testing.T) {
	nodes := startCluster(t, 1, func(c *Config) { c.OutcomeWait, c.StallHandover = 2*time.Second, -1 })
	leader := waitLeader(t, nodes)
	mustExec(t, leader.store, stmt("CREATE TABLE t(i INTEGER)"))
	setMemory(t, leader.db, smallMemory)

	heavy := stmt(heavyCTAS)
	heavy.Key = []byte("heavy-write-key")
	_, err := leader.store.Execute(context.Background(), heavy)
	if !errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("write that stalls the leader: %v, want ErrUnknownOutcome", err)
	}
	if _, ok := leader.store.Stalled(); !ok {
		t.Fatal("the leader does not report its stall")
	}
	_, err = leader.store.Execute(context.Background(), stmt("INSERT INTO t VALUES (1)"))
	if !errors.Is(err, ErrApplyStalled) {
		t.Fatalf("write during the stall: %v, want ErrApplyStalled", err)
	}

	setMemory(t, leader.db, largeMemory)
	waitFor(t, 2*time.Minute, "the stall to end", func() bool {
		_, ok := leader.store.Stalled()
		return !ok
	})
	res, err := leader.store.Execute(context.Background(), heavy)
	if err != nil || !res.Replayed {
		t.Fatalf("retry with the same key: %+v, %v; want the first result replayed", res, err)
	}
	mustExec(t, leader.store, stmt("INSERT INTO t VALUES (2)"))
	idx := leader.store.AppliedIndex()
	waitApplied(t, nodes, idx)
	for _, n := range nodes {
		if got := queryInt(t, n.db, "SELECT count(*) FROM heavy"); got != 1 {
			t.Errorf("%s: heavy has %d rows, want 1", n.id, got)
		}
		if got := queryInt(t, n.db, "SELECT count(*) FROM t"); got != 1 {
			t.Errorf("%s: t has %d rows, want 1 (the refused write never applies)", n.id, got)
		}
	}
}

// TestProveRefusesWhatCannotApply proves, on the leader, a write that
// needs more memory than the node has: it is refused before it enters the
// log, so no node stalls, and the cluster goes on. One node: an election
// on a loaded machine would only move the leader the test asks.
func TestProveRefusesWhatCannotApply(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	leader := waitLeader(t, nodes)
	for _, n := range nodes {
		setMemory(t, n.db, smallMemory)
	}
	// A new leader's first entries (its configuration, its no-op) commit
	// after it leads; ReadIndex waits for them, so that the commit index
	// stays put unless the proof reaches the log.
	if _, err := leader.store.ReadIndex(context.Background()); err != nil {
		t.Fatalf("read index: %v", err)
	}
	before := leader.store.CommitIndex()
	// Given as the leader lexed it, as routing gives it.
	err := leader.store.Prove(context.Background(), stmt(heavyCTAS), []sqltext.Statement{sqltext.Parse(heavyCTAS)})
	var refused *RefusedWriteError
	if !errors.As(err, &refused) || !errors.Is(err, ErrWriteResources) || refused.ExceptionType() != "Out of Memory" {
		t.Fatalf("prove: %v, want a RefusedWriteError for resources", err)
	}
	if got := leader.store.CommitIndex(); got != before {
		t.Fatalf("commit index moved from %d to %d: the proof reached the log", before, got)
	}
	if err := leader.store.Prove(context.Background(), stmt("CREATE TABLE small AS SELECT range AS i FROM range(10)"), nil); err != nil {
		t.Fatalf("prove a small write: %v", err)
	}
	if err := leader.store.Prove(context.Background(), stmt("INSERT INTO missing SELECT 1"), nil); err != nil {
		t.Fatalf("prove a write with an error of its own: %v (the log decides those)", err)
	}
	mustExec(t, leader.store, stmt("CREATE TABLE small AS SELECT range AS i FROM range(10)"))
	if got := queryInt(t, leader.db, "SELECT count(*) FROM small"); got != 10 {
		t.Fatalf("small has %d rows after a proof and an apply, want 10", got)
	}
}

// TestProveTimesOut proves a write that runs longer than the write
// timeout: it is refused, and was never proposed.
func TestProveTimesOut(t *testing.T) {
	nodes := startCluster(t, 1, func(c *Config) { c.WriteTimeout = 300 * time.Millisecond })
	leader := waitLeader(t, nodes)
	err := leader.store.Prove(context.Background(),
		stmt("CREATE TABLE slow AS SELECT sum(hash(i)) AS s FROM range(100000000000) r(i)"), nil)
	if !errors.Is(err, ErrWriteTimeout) {
		t.Fatalf("prove: %v, want ErrWriteTimeout", err)
	}
	if _, ok := leader.store.Stalled(); ok {
		t.Fatal("the proof stalled the applier")
	}
	mustExec(t, leader.store, wal.Command{Entry: wal.Statement{SQL: "CREATE TABLE after(i INTEGER)"}})
}

// TestStalledLeaderHandsOver stalls the leader's applier (its memory
// only): the leader hands leadership to a healthy voter, where writes go
// on, and applies the stalled entry once its memory allows.
func TestStalledLeaderHandsOver(t *testing.T) {
	nodes := startCluster(t, 3, func(c *Config) { c.StallHandover = time.Second })
	leader := waitLeader(t, nodes)
	setMemory(t, leader.db, smallMemory)
	if _, err := leader.store.Submit(context.Background(), stmt(heavyCTAS)); err != nil {
		t.Fatalf("write that stalls the leader: %v", err)
	}
	var next *testNode
	waitFor(t, time.Minute, "leadership to move off the stalled leader", func() bool {
		for _, n := range nodes {
			if n != leader && n.store.IsLeader() {
				next = n
				return true
			}
		}
		return false
	})
	mustExec(t, next.store, stmt("CREATE TABLE after(i INTEGER)"))
	setMemory(t, leader.db, largeMemory)
	waitApplied(t, nodes, next.store.AppliedIndex())
	if got := queryInt(t, leader.db, "SELECT count(*) FROM heavy"); got != 1 {
		t.Fatalf("the old leader's heavy has %d rows, want 1", got)
	}
}

// TestAwaitOutcomeWhileApplierProgresses: a write whose apply outlasts
// OutcomeWait (a COMMIT inserting millions of staged rows) gets its result
// as long as the applier makes progress; one the applier makes no progress
// on, or whose writer gives up, answers ErrUnknownOutcome.
func TestAwaitOutcomeWhileApplierProgresses(t *testing.T) {
	result := &wal.Result{RowsChanged: 20_000_000}
	for _, tc := range []struct {
		name     string
		steps    uint64 // progress calls that see a new step; the result comes after them
		cancel   bool
		wantRows int64
	}{
		{name: "progress until the result", steps: 5, wantRows: result.RowsChanged},
		{name: "no progress", steps: 0},
		{name: "writer gone", steps: 1000, cancel: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan cmdResult, 1)
			var calls uint64
			progress := func() uint64 {
				calls++
				// The first call reads the starting point.
				if tc.steps > 0 && calls == tc.steps+1 {
					done <- cmdResult{res: result}
				}
				return min(calls, tc.steps+1)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			res, err := awaitOutcome(ctx, done, time.Millisecond, progress, func() uint64 { return 7 })
			if tc.wantRows != 0 {
				if err != nil || res.RowsChanged != tc.wantRows {
					t.Fatalf("got %v, %v; want the result after %d steps", res, err, tc.steps)
				}
				return
			}
			if !errors.Is(err, ErrUnknownOutcome) {
				t.Fatalf("err = %v, want ErrUnknownOutcome", err)
			}
		})
	}
}
