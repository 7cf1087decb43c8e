package replication

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/wal"
)

func TestSingleNode(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	s := nodes[0].store
	mustExec(t, s, stmt("CREATE TABLE t(id INTEGER PRIMARY KEY, name VARCHAR)"))
	res := mustExec(t, s, stmt("INSERT INTO t VALUES (?, ?), (?, ?)", 1, "a", 2, "b"))
	if res.RowsChanged != 2 {
		t.Fatalf("rows changed = %d, want 2", res.RowsChanged)
	}
	if s.AppliedIndex() < res.Index {
		t.Fatalf("applied %d < result index %d", s.AppliedIndex(), res.Index)
	}
	ret := mustExec(t, s, wal.Command{Entry: wal.Statement{SQL: "INSERT INTO t VALUES ($1, $2) RETURNING id, name",
		Params: []wal.Param{wal.Int64(3), wal.String("it's")}, Returning: true}})
	rows, err := ret.Rows()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0][0] != int32(3) || rows[0][1] != "it's" || ret.RowsChanged != 1 {
		t.Fatalf("returning rows = %v (changed %d)", rows, ret.RowsChanged)
	}
	if got := queryInt(t, nodes[0].db, "SELECT count(*) FROM t"); got != 3 {
		t.Fatalf("count = %d, want 3", got)
	}
	if _, err := s.Execute(context.Background(), stmt("COMMIT")); !errors.Is(err, ErrRefused) {
		t.Fatalf("COMMIT: err = %v, want ErrRefused", err)
	}
	if _, err := s.ReadIndex(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestCluster(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	mustExec(t, leader.store, stmt("CREATE TABLE t(id INTEGER PRIMARY KEY, v VARCHAR)"))
	res := mustExec(t, leader.store, stmt("INSERT INTO t VALUES (1, 'one')"))
	waitApplied(t, nodes, res.Index)
	for _, n := range nodes {
		if got := queryInt(t, n.db, "SELECT count(*) FROM t WHERE v = 'one'"); got != 1 {
			t.Errorf("%s: count = %d, want 1", n.id, got)
		}
	}

	t.Run("not leader", func(t *testing.T) {
		for _, n := range nodes {
			if n == leader {
				continue
			}
			_, err := n.store.Execute(context.Background(), stmt("INSERT INTO t VALUES (2, 'x')"))
			var nl *NotLeaderError
			if !errors.As(err, &nl) || !errors.Is(err, ErrNotLeader) {
				t.Fatalf("%s: err = %v, want NotLeaderError", n.id, err)
			}
			if nl.LeaderID != leader.id || nl.LeaderAddr != leader.addr {
				t.Fatalf("%s: leader = %s@%s, want %s@%s", n.id, nl.LeaderID, nl.LeaderAddr, leader.id, leader.addr)
			}
			if _, err := n.store.ReadIndex(context.Background()); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("%s: ReadIndex err = %v, want ErrNotLeader", n.id, err)
			}
		}
	})

	t.Run("failing command fails alone everywhere", func(t *testing.T) {
		// One raft entry, three commands; the middle one violates the key.
		key := func(k string) wal.Command { c := stmt("INSERT INTO t VALUES (?, ?)", 0, k); return c }
		c1, c2, c3 := key("a"), key("dup"), key("b")
		c1.Entry = wal.Statement{SQL: "INSERT INTO t VALUES (10, 'a')"}
		c2.Entry = wal.Statement{SQL: "INSERT INTO t VALUES (1, 'dup')"}
		c3.Entry = wal.Statement{SQL: "INSERT INTO t VALUES (11, 'b')"}
		c1.Key, c2.Key, c3.Key = []byte("k1"), []byte("k2"), []byte("k3")
		f := leader.store.raft.Apply(logEntry(t, 0, c1, c2, c3).Data, 0)
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		r := f.Response().(*entryResult).results
		if r[0].err != nil || r[2].err != nil || r[1].err == nil {
			t.Fatalf("results = %+v, want ok, error, ok", r)
		}
		waitApplied(t, nodes, f.Index())
		for _, n := range nodes {
			if got := queryInt(t, n.db, "SELECT count(*) FROM t WHERE id IN (10, 11)"); got != 2 {
				t.Errorf("%s: rows around the failure = %d, want 2", n.id, got)
			}
			if got := queryInt(t, n.db, "SELECT count(*) FROM t WHERE v = 'dup'"); got != 0 {
				t.Errorf("%s: failed row applied", n.id)
			}
			// Every node recorded the same failure under the key.
			if got := queryInt(t, n.db, "SELECT count(*) FROM _duckraft.keys WHERE key = '6b32' AND err_type = 'Constraint'"); got != 1 {
				t.Errorf("%s: recorded failure = %d, want 1", n.id, got)
			}
		}
	})

	t.Run("idempotency key", func(t *testing.T) {
		cmd := wal.Command{Key: []byte("retry-1"), Entry: wal.Statement{
			SQL: "INSERT INTO t VALUES (?, ?) RETURNING id", Params: []wal.Param{wal.Int64(20), wal.String("once")}, Returning: true}}
		first := mustExec(t, leader.store, cmd)
		second := mustExec(t, leader.store, cmd)
		if first.Replayed || !second.Replayed || second.Index != first.Index || second.RowsChanged != 1 {
			t.Fatalf("first %+v, second %+v", first, second)
		}
		rows, err := second.Rows()
		if err != nil || len(rows) != 1 || rows[0][0] != int32(20) {
			t.Fatalf("replayed rows = %v, %v", rows, err)
		}
		// A failed command replays its failure.
		bad := wal.Command{Key: []byte("retry-2"), Entry: wal.Statement{SQL: "INSERT INTO t VALUES (20, 'again')"}}
		_, err1 := leader.store.Execute(context.Background(), bad)
		_, err2 := leader.store.Execute(context.Background(), bad)
		if err1 == nil || err2 == nil || err2.Error() != err1.Error() {
			t.Fatalf("failed command: first %v, replay %v", err1, err2)
		}
		last := mustExec(t, leader.store, stmt("SELECT 1"))
		waitApplied(t, nodes, last.Index)
		for _, n := range nodes {
			if got := queryInt(t, n.db, "SELECT count(*) FROM t WHERE id = 20"); got != 1 {
				t.Errorf("%s: count = %d, want 1", n.id, got)
			}
		}
	})

	t.Run("txn is atomic", func(t *testing.T) {
		_, err := leader.store.Execute(context.Background(), wal.Command{Entry: wal.Txn{Entries: []wal.Entry{
			wal.Statement{SQL: "INSERT INTO t VALUES (30, 'txn')"},
			wal.Statement{SQL: "INSERT INTO t VALUES (1, 'dup')"},
		}}})
		if err == nil {
			t.Fatal("txn with a failing statement succeeded")
		}
		res := mustExec(t, leader.store, wal.Command{Entry: wal.Txn{Entries: []wal.Entry{
			wal.Statement{SQL: "INSERT INTO t VALUES (31, 'txn')"},
			wal.Statement{SQL: "UPDATE t SET v = 'txn2' WHERE id = 31"},
		}}})
		if res.RowsChanged != 2 {
			t.Fatalf("rows changed = %d, want 2", res.RowsChanged)
		}
		waitApplied(t, nodes, res.Index)
		for _, n := range nodes {
			if got := queryInt(t, n.db, "SELECT count(*) FROM t WHERE id IN (30, 31) AND v <> 'txn'"); got != 1 {
				t.Errorf("%s: txn rows = %d, want 1", n.id, got)
			}
		}
	})
}

// Concurrent closed-loop writers share log entries: the leader holds a
// write while the others' next writes arrive (group commit). The gather's
// timers are far longer than any write here, so every gather ends on the
// count of writers it expects back, never on a timer, however slowly the
// machine runs.
func TestConcurrentWritesShareEntries(t *testing.T) {
	const wait = 10 * time.Second
	nodes := startCluster(t, 1, func(c *Config) { c.GatherMax, c.GatherIdle = wait, wait })
	s := nodes[0].store
	mustExec(t, s, stmt("CREATE TABLE t(w INTEGER, i INTEGER)"))
	const writers, writes = 8, 160
	idx := closedLoop(t, s, writers, func(n int) bool { return n >= writes })
	if got := queryInt(t, nodes[0].db, "SELECT count(*) FROM t"); got < int64(len(idx)) {
		t.Fatalf("%d rows, want at least the %d writes answered", got, len(idx))
	}
	sizes := entrySizes(idx)
	// Without the gather the writers split into two alternating groups
	// of about writers/2.
	if perEntry := float64(len(idx)) / float64(len(sizes)); perEntry < writers*3/4 {
		t.Fatalf("%d writes took %d entries (%.1f per entry: %v), want at least %d per entry",
			len(idx), len(sizes), perEntry, sizes, writers*3/4)
	}
	// Once every writer has joined, each entry carries all of them: the
	// gather waits for the last entry's writers and adds those that
	// missed it. The last entry seen may have been cut short by the stop.
	full := false
	for i, n := range sizes[:len(sizes)-1] {
		full = full || n == writers
		if full && n != writers {
			t.Fatalf("entry %d of %v carries %d writes after one carried all %d writers", i, sizes, n, writers)
		}
	}
	if !full {
		t.Fatalf("no entry carried all %d writers: %v", writers, sizes)
	}
	t.Logf("%d writes in %d entries: %v", len(idx), len(sizes), sizes)
}

// A lone writer is never held for company: no gather starts for it. (A
// held write would wait out the timers; mustExec gives up after 10 s.)
func TestLoneWriterIsNotHeld(t *testing.T) {
	const wait = 5 * time.Second
	nodes := startCluster(t, 1, func(c *Config) { c.GatherMax, c.GatherIdle = wait, wait })
	s := nodes[0].store
	mustExec(t, s, stmt("CREATE TABLE t(i INTEGER)"))
	for i := range 100 {
		mustExec(t, s, stmt("INSERT INTO t VALUES (?)", i))
		if n := s.gathers.Load(); n > 0 {
			t.Fatalf("write %d: the lone writer was held for company (%d gathers)", i, n)
		}
	}
}

// A gather ends as soon as the writers it waits for are back: the last
// entry's and those that queued behind it, each counted once. The timers
// are far longer than any write, so a gather that ran them out while every
// writer was still writing waited for a writer that did not exist. (Once
// a writer stops, the next gather does wait it out, so the count is read
// while all of them write.) A writer of the last entry that came back
// before the proposer released the in-flight slot used to be counted
// twice, as one of the entry's and as one that had queued behind it.
func TestGatherEndsWhenWritersAreBack(t *testing.T) {
	const wait = 10 * time.Second
	nodes := startCluster(t, 1, func(c *Config) { c.GatherMax, c.GatherIdle = wait, wait })
	s := nodes[0].store
	mustExec(t, s, stmt("CREATE TABLE t(w INTEGER, i INTEGER)"))
	const writers, writes = 4, 400
	var timedOut int64
	idx := closedLoop(t, s, writers, func(n int) bool {
		timedOut = s.gatherTimeouts.Load()
		return n >= writes || timedOut > 0
	})
	if timedOut > 0 {
		t.Fatalf("%d gathers ran out their timer while all %d writers were writing (%d writes in)", timedOut, writers, len(idx))
	}
	if s.gathers.Load() == 0 {
		t.Fatalf("no gather held an entry in %d writes: nothing was tested", len(idx))
	}
}

// A node restarted with no write since has the new term's no-op as its
// last committed entry, which the FSM never sees: waiting for the commit
// index (what a new session reads after) must still return, or every new
// session's first read is refused.
func TestWaitForCommitAfterElection(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	nd := nodes[0]
	mustExec(t, nd.store, stmt("CREATE TABLE t(i INTEGER)"))
	nd.stop(t, true)
	nd.start(t, false)
	waitLeader(t, nodes)
	// The new term's no-op commits shortly after the election.
	waitFor(t, 10*time.Second, "the new term's no-op to commit", func() bool {
		return nd.store.CommitIndex() > nd.store.AppliedIndex()
	})
	commit := nd.store.CommitIndex()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := nd.store.WaitForApplied(ctx, commit); err != nil {
		t.Fatalf("wait for the commit index %d after an election (applied %d): %v", commit, nd.store.AppliedIndex(), err)
	}
	// An index no entry has reached yet is still waited for.
	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if err := nd.store.WaitForApplied(short, commit+1); err == nil {
		t.Fatalf("index %d, beyond the log, counted as applied", commit+1)
	}
}

// Close ends a gather that holds writes: they fail with ErrClosed rather
// than go to a raft that is shutting down. With BatchApplyCh raft drops an
// entry still in its apply queue when it stops (hashicorp/raft#498), so
// its future never resolves and Close, which waits for every answer,
// hung.
func TestCloseEndsHeldGather(t *testing.T) {
	logs := &gatedLogs{held: make(chan struct{})}
	nodes := startCluster(t, 1, func(c *Config) {
		c.GatherMax, c.GatherIdle = time.Minute, time.Minute
		c.WrapLogStore = func(l raft.LogStore) raft.LogStore { logs.LogStore = l; return logs }
	})
	s := nodes[0].store
	mustExec(t, s, stmt("CREATE TABLE t(i INTEGER)"))
	exec := func(i int) chan error {
		errc := make(chan error, 1)
		go func() {
			_, err := s.Execute(context.Background(), stmt("INSERT INTO t VALUES (?)", i))
			errc <- err
		}()
		return errc
	}
	// A write's entry waits at the gate while a second write queues
	// behind it; once the first is answered the gather holds the second
	// for the first's writer, which does not come back. The second may
	// queue too late and go out alone: then try again.
	var held chan error
	for round := 0; held == nil; round++ {
		if round == 100 {
			t.Fatal("the second write never queued behind the first in 100 rounds")
		}
		gate := make(chan struct{})
		logs.gate.Store(&gate)
		first := exec(2 * round)
		<-logs.held
		second := exec(2*round + 1)
		time.Sleep(10 * time.Millisecond) // time to queue; retried if not
		logs.gate.Store(nil)
		close(gate)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the second write held or answered", func() bool {
			return s.gathers.Load() > 0 || len(second) > 0
		})
		if s.gathers.Load() > 0 {
			held = second
		} else if err := <-second; err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		nodes[0].store, nodes[0].db = nil, nil // left behind: cleanup would wait too
		t.Fatal("Close still waits 30 s after it began, with a gather holding a write")
	}
	if err := <-held; !errors.Is(err, ErrClosed) {
		t.Fatalf("held write: err = %v, want ErrClosed", err)
	}
}

// gatedLogs holds each StoreLogs while its gate is set, after telling held.
type gatedLogs struct {
	raft.LogStore
	gate atomic.Pointer[chan struct{}]
	held chan struct{}
}

func (g *gatedLogs) StoreLogs(logs []*raft.Log) error {
	if gate := g.gate.Load(); gate != nil {
		g.held <- struct{}{}
		<-*gate
	}
	return g.LogStore.StoreLogs(logs)
}

// closedLoop runs closed-loop writers on s, each sending its next write to
// table t(w, i) as soon as its last one is answered, until stop (called
// after every answered write, with the count so far) reports true. It
// returns the entry index of every write answered until then. No writer has
// stopped when stop is called; afterwards their writes in progress are
// cancelled (they may still be applied).
func closedLoop(t *testing.T, s *Store, writers int, stop func(writes int) bool) []uint64 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu      sync.Mutex
		idx     []uint64
		stopped bool
		wg      sync.WaitGroup
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				res, err := s.Execute(ctx, stmt("INSERT INTO t VALUES (?, ?)", w, i))
				mu.Lock()
				if stopped {
					mu.Unlock()
					return
				}
				if err != nil {
					stopped = true
					cancel()
					mu.Unlock()
					t.Errorf("writer %d, write %d: %v", w, i, err)
					return
				}
				idx = append(idx, res.Index)
				if stop(len(idx)) {
					stopped = true
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return idx
}

// entrySizes returns how many of the writes answered at the given indexes
// each entry carried, in log order.
func entrySizes(idx []uint64) []int {
	idx = slices.Clone(idx)
	slices.Sort(idx)
	var sizes []int
	for i, x := range idx {
		if i == 0 || x != idx[i-1] {
			sizes = append(sizes, 0)
		}
		sizes[len(sizes)-1]++
	}
	return sizes
}
