package testcluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/cmd/duckraftd/daemon"
	"github.com/duckraft/duckraft/testcluster"
)

// inBothModes runs test once with duckraftd processes and once in-process,
// each as a subtest named for its mode.
func inBothModes(t *testing.T, opts testcluster.Options, test func(*testing.T, testcluster.Options)) {
	for _, tc := range []struct {
		name      string
		inProcess bool
	}{
		{"process", false},
		{"in-process", true},
	} {
		opts.InProcess = tc.inProcess
		t.Run(tc.name, func(t *testing.T) { test(t, opts) })
	}
}

// follower returns a running node other than the leader l.
func follower(t *testing.T, c *testcluster.Cluster, l *testcluster.Node) *testcluster.Node {
	t.Helper()
	for _, n := range c.Nodes {
		if n != l && n.Running() {
			return n
		}
	}
	t.Fatal("no running follower")
	return nil
}

// TestInProcessKilledLeaderCatchesUp crashes the leader of an in-process
// cluster whose log is compacted every 64 entries: the others elect a new
// leader and take the writes a router sends, and the old leader, restarted
// from its data directory, replays DuckDB's write-ahead log, installs a
// snapshot (its log fell behind the compacted one) and converges.
func TestInProcessKilledLeaderCatchesUp(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{InProcess: true, Configure: func(cfg *daemon.Config) {
		cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 64, 16, 200*time.Millisecond
	}})
	old := c.WaitForLeader(t, 10*time.Second)
	conn := c.StartRouter(t).Client(t)
	exec(t, conn, "CREATE TABLE k(i INTEGER)")
	exec(t, conn, "INSERT INTO k VALUES (0)")

	old.Kill()
	if old.Running() {
		t.Fatal("killed node still runs")
	}
	for i := 1; i <= 150; i++ {
		exec(t, conn, fmt.Sprintf("INSERT INTO k VALUES (%d)", i))
	}
	if l := c.WaitForLeader(t, 10*time.Second); l == old {
		t.Fatalf("killed node %s leads", old.ID)
	}

	old.Restart(t)
	c.WaitConverged(t, 30*time.Second)
	oc := old.Client(t)
	exec(t, oc, "SET duckraft_consistency = 'any'")
	if got := queryInts(t, oc, "SELECT count(*) FROM k"); got[0] != 151 {
		t.Fatalf("restarted node holds %d rows, want 151", got[0])
	}
	if !strings.Contains(old.Log(), "restored snapshot") {
		t.Fatalf("restarted node caught up without installing a snapshot; log:\n%s", old.Log())
	}
}

// TestSlowLogWrites slows one node's Raft log writes. A slow follower does
// not hold writes up: the leader and the other follower are a quorum, and
// the slow one catches up. A slow leader acknowledges no write before its
// own log write has returned.
func TestSlowLogWrites(t *testing.T) {
	const delay = 300 * time.Millisecond
	c := testcluster.Start(t, 3, testcluster.Options{InProcess: true})
	leader := c.WaitForLeader(t, 10*time.Second)
	slow := follower(t, c, leader)
	conn := leader.Client(t)
	exec(t, conn, "CREATE TABLE s(i INTEGER)")

	slow.SlowLogWrites(t, delay)
	start := time.Now()
	for i := 0; i < 10; i++ {
		exec(t, conn, fmt.Sprintf("INSERT INTO s VALUES (%d)", i))
	}
	t.Logf("10 writes with a slow follower took %v", time.Since(start))
	c.WaitConverged(t, 20*time.Second)
	slow.SlowLogWrites(t, 0)

	// A starved machine can move leadership during the write (the slow
	// leader misses its lease): then a leader whose log is not slow
	// acknowledged it, which says nothing of a slow one, and the write is
	// tried again on whichever node leads, in a term of its own.
	for attempt := 1; ; attempt++ {
		l := c.WaitForLeader(t, 10*time.Second)
		before := term(t, l)
		lc := l.Client(t)
		l.SlowLogWrites(t, delay)
		start = time.Now()
		_, err := lc.Exec(t.Context(), fmt.Sprintf("INSERT INTO s VALUES (%d)", 9+attempt))
		took := time.Since(start)
		l.SlowLogWrites(t, 0)
		if after := term(t, l); after != before || c.Leader() != l {
			if attempt == 5 {
				t.Fatalf("leadership moved during each of %d writes on a slow leader", attempt)
			}
			t.Logf("leadership moved from %s (term %d to %d) during the write, answered after %v (%v): again", l.ID, before, after, took, err)
			continue
		}
		if err != nil {
			t.Fatalf("a write on a leader whose log writes take %v: %v", delay, err)
		}
		if took < delay {
			t.Fatalf("a write on a leader whose log writes take %v was acknowledged after %v", delay, took)
		}
		break
	}
	c.WaitConverged(t, 20*time.Second)
}

// term returns n's Raft term.
func term(t *testing.T, n *testcluster.Node) uint64 {
	t.Helper()
	st, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	return st.Term
}

// TestClockJump moves the leader's clock a day back and then a year ahead:
// writes stamped with now() carry the leader's clock as it was, every node
// stores the same values, and a later write that compares with now() uses
// the leader's clock too.
func TestClockJump(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{InProcess: true})
	leader := c.WaitForLeader(t, 10*time.Second)
	conn := follower(t, c, leader).Client(t)
	exec(t, conn, "CREATE TABLE j(step INTEGER, ts TIMESTAMPTZ)")

	for step, jump := range []time.Duration{-24 * time.Hour, 366 * 24 * time.Hour} {
		leader.JumpClock(t, jump)
		exec(t, conn, fmt.Sprintf("INSERT INTO j VALUES (%d, now())", step))
	}
	c.WaitConverged(t, 20*time.Second)
	for _, n := range c.Nodes {
		nc := n.Client(t)
		exec(t, nc, "SET duckraft_consistency = 'any'")
		// Seconds from real time now to each stamp: the day back, then the
		// year ahead of it.
		got := queryInts(t, nc, "SELECT (epoch(ts) - epoch(current_timestamp))::BIGINT FROM j ORDER BY step")
		for i, want := range []time.Duration{-24 * time.Hour, 365 * 24 * time.Hour} {
			if d := time.Duration(got[i]) * time.Second; d < want-time.Minute || d > want+time.Minute {
				t.Errorf("%s: write %d stamped %v from now, want %v", n.ID, i, d, want)
			}
		}
	}
	// The leader's clock, a year ahead, decides which row is old.
	exec(t, conn, "DELETE FROM j WHERE ts < now() - INTERVAL 300 DAY")
	c.WaitConverged(t, 20*time.Second)
	lc := leader.Client(t)
	if got := queryInts(t, lc, "SELECT step FROM j"); len(got) != 1 || got[0] != 1 {
		t.Fatalf("after deleting by the leader's clock, steps %v remain, want [1]", got)
	}
}
