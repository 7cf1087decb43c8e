package replication

import (
	"context"
	"errors"
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
// write briefly while the others' next writes arrive (group commit).
func TestConcurrentWritesShareEntries(t *testing.T) {
	nodes := startCluster(t, 1, func(c *Config) { c.GatherMax, c.GatherIdle = 200*time.Millisecond, 50*time.Millisecond })
	s := nodes[0].store
	mustExec(t, s, stmt("CREATE TABLE t(w INTEGER, i INTEGER)"))
	const writers, each = 8, 10
	start := s.CommitIndex()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := s.Execute(context.Background(), stmt("INSERT INTO t VALUES (?, ?)", w, i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	entries := s.CommitIndex() - start
	if got := queryInt(t, nodes[0].db, "SELECT count(*) FROM t"); got != writers*each {
		t.Fatalf("%d rows, want %d", got, writers*each)
	}
	// Without the wait the writers split into two alternating groups of
	// about writers/2.
	if perEntry := float64(writers*each) / float64(entries); perEntry < writers*3/4 {
		t.Fatalf("%d writes took %d entries (%.1f per entry), want at least %d per entry", writers*each, entries, perEntry, writers*3/4)
	}
	t.Logf("%d writes in %d entries", writers*each, entries)
}

// A lone writer is never held for company.
func TestLoneWriterIsNotHeld(t *testing.T) {
	const wait = 2 * time.Second
	nodes := startCluster(t, 1, func(c *Config) { c.GatherMax, c.GatherIdle = wait, wait })
	s := nodes[0].store
	mustExec(t, s, stmt("CREATE TABLE t(i INTEGER)"))
	for i := range 3 {
		t0 := time.Now()
		mustExec(t, s, stmt("INSERT INTO t VALUES (?)", i))
		if d := time.Since(t0); d >= wait {
			t.Fatalf("write %d took %s: held for the group-commit wait", i, d)
		}
	}
}

// A gather ends as soon as the writers it waits for are back: the last
// entry's and those that queued behind it. Here the idle gap alone would
// hold every entry for a second. (Once a writer stops, the next gather
// does wait it out, so only the time until the first one is done counts.)
func TestGatherEndsWhenWritersAreBack(t *testing.T) {
	const wait = time.Second
	nodes := startCluster(t, 1, func(c *Config) { c.GatherMax, c.GatherIdle = wait, wait })
	s := nodes[0].store
	mustExec(t, s, stmt("CREATE TABLE t(w INTEGER, i INTEGER)"))
	const writers, each = 4, 5
	start := time.Now()
	done := make(chan time.Duration, writers)
	for w := range writers {
		go func() {
			for i := range each {
				if _, err := s.Execute(context.Background(), stmt("INSERT INTO t VALUES (?, ?)", w, i)); err != nil {
					t.Error(err)
					break
				}
			}
			done <- time.Since(start)
		}()
	}
	first := <-done
	for range writers - 1 {
		<-done
	}
	if first >= wait {
		t.Fatalf("the first writer took %s for %d writes: a gather waited out its idle gap", first, each)
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
