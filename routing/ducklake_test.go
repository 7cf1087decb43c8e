package routing

import "testing"

// The reads a DuckLake client makes of its catalog (testcluster/ducklake):
// a snapshot, then the files and rows of that snapshot, in one session.

// A transaction's reads see what was committed before it began: DuckLake
// reads the newest snapshot right after BEGIN, and a stale one makes its
// commit lose the snapshot id to a commit it could not see.
func TestTransactionReadsSeeCommitsBeforeBegin(t *testing.T) {
	net := newInmemNet(t, "n1", "n2", "r1")
	n1, r1 := net.node("n1"), net.node("r1")
	s := n1.session(t)
	mustRun(t, n1, s, "SELECT count(*) FROM t")
	r1.held.Store(true)
	other := n1.session(t)
	mustRun(t, n1, other, "INSERT INTO t VALUES (1)")

	mustRun(t, n1, s, "BEGIN TRANSACTION")
	if n := countOf(t, mustRun(t, n1, s, "SELECT count(*) FROM t")); n != 1 {
		t.Errorf("a transaction begun after a commit was acknowledged read %d rows, want 1", n)
	}
	mustRun(t, n1, s, "COMMIT")
}

// A session's reads never go back in time: DuckLake reads a snapshot's row,
// then the files of that snapshot, and a node further behind than the one
// that served the first read would answer the second without them.
func TestSessionReadsAreMonotonic(t *testing.T) {
	net := newInmemNet(t, "n1", "n2", "r1")
	n1, n2, r1 := net.node("n1"), net.node("n2"), net.node("r1")
	s := n1.session(t)
	mustRun(t, n1, s, "SELECT count(*) FROM t")
	n2.held.Store(true)
	other := n1.session(t)
	mustRun(t, n1, other, "INSERT INTO t VALUES (1)")
	if n := countOf(t, mustRun(t, n1, s, "SELECT count(*) FROM t")); n != 1 || r1.reads.Load() != 2 {
		t.Fatalf("read %d rows with r1 serving %d reads, want 1 row from r1", n, r1.reads.Load())
	}
	// The session's node goes away; n2, one entry behind, is the
	// cheapest node left.
	r1.down.Store(true)
	if n := countOf(t, mustRun(t, n1, s, "SELECT count(*) FROM t")); n != 1 {
		t.Errorf("the session read %d rows after it had read 1", n)
	}
}
