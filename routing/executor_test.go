package routing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// run runs sql in session s of node nd's Executor and returns every row.
func run(t *testing.T, nd *inmemNode, s *node.Session, sql string) ([][]any, error) {
	t.Helper()
	rows, err := nd.exec.Query(context.Background(), s, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]any
	for {
		c, err := rows.Next()
		if err != nil {
			return nil, err
		}
		if c == nil {
			return out, nil
		}
		for i := range c.Rows {
			row := make([]any, len(c.Columns))
			for j, v := range c.Columns {
				row[j], _ = v.Value(i)
			}
			out = append(out, row)
		}
	}
}

func mustRun(t *testing.T, nd *inmemNode, s *node.Session, sql string) [][]any {
	t.Helper()
	rows, err := run(t, nd, s, sql)
	if err != nil {
		t.Fatalf("%s on %s: %v", sql, nd.id, err)
	}
	return rows
}

func countOf(t *testing.T, rows [][]any) int64 {
	t.Helper()
	if len(rows) != 1 || len(rows[0]) != 1 {
		t.Fatalf("want one value, got %v", rows)
	}
	return rows[0][0].(int64)
}

func TestWriteOnFollowerGoesThroughLeader(t *testing.T) {
	net := newInmemNet(t, "n1", "n2", "n3")
	n2 := net.node("n2")
	s := n2.session(t)
	mustRun(t, n2, s, "INSERT INTO t VALUES (1)")
	if got := net.node("n1").executes.Load(); got != 1 {
		t.Fatalf("the leader proposed %d commands, want 1", got)
	}
	for _, nd := range net.nodes {
		if nd.count() != 1 {
			t.Fatalf("%s has %d rows, want 1", nd.id, nd.count())
		}
	}
	// The session reads its write wherever the read runs.
	if n := countOf(t, mustRun(t, n2, s, "SELECT count(*) FROM t")); n != 1 {
		t.Fatalf("session read %d rows after its write, want 1", n)
	}
}

// The leader proves a heavy write with the statements as its analysis
// lexed them, each at its entry's place, whether the client's node is the
// leader (it lexed the client's text) or a follower (the leader lexed the
// forwarded text), and past an append that is no statement.
func TestProofGetsTheLeadersTexts(t *testing.T) {
	net := newInmemNet(t, "n1", "n2")
	n1 := net.node("n1")
	chunk, err := wire.ChunkFromRows([]wire.LogicalType{{ID: wire.TypeInteger}}, [][]any{{int32(1)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, via := range []*inmemNode{n1, net.node("n2")} {
		before := n1.provedTexts.Load()
		s := via.session(t)
		mustRun(t, via, s, "UPDATE t SET id = id + 1")
		mustRun(t, via, s, "BEGIN")
		if err := via.exec.Append(context.Background(), s, []string{"main"}, "t", chunk); err != nil {
			t.Fatalf("append via %s: %v", via.id, err)
		}
		mustRun(t, via, s, "INSERT INTO t SELECT 2")
		mustRun(t, via, s, "DELETE FROM t WHERE id = 5")
		mustRun(t, via, s, "COMMIT")
		// The UPDATE's one text, then the transaction's two statements
		// after its append.
		if got := n1.provedTexts.Load() - before; got != 3 {
			t.Errorf("via %s: the leader proved %d statements with their lexed texts, want 3", via.id, got)
		}
	}
	// The in-memory log applies statements, not appends: one INSERT per
	// transaction.
	for _, nd := range net.nodes {
		if got := nd.count(); got != 2 {
			t.Errorf("%s holds %d rows, want the two inserted", nd.id, got)
		}
	}
}

// A leader that applied a write but whose answer was lost, and then lost
// leadership, is asked again with the same idempotency key: the write
// applies once.
func TestWriteRetryAfterLostAnswerAppliesOnce(t *testing.T) {
	net := newInmemNet(t, "n1", "n2", "n3")
	n1, n2 := net.node("n1"), net.node("n2")
	n1.failWrite.Store(&nodeapi.Error{Code: nodeapi.CodeUnknownOutcome, Message: "leadership lost, outcome unknown"})
	mustRun(t, n2, n2.session(t), "INSERT INTO t VALUES (1)")
	if got := n1.executes.Load(); got != 2 {
		t.Fatalf("the leader was asked %d times, want 2 (the lost answer and the retry)", got)
	}
	if n1.count() != 1 || len(net.log) != 1 {
		t.Fatalf("%d rows and %d log entries after a retried write, want 1 and 1", n1.count(), len(net.log))
	}
}

// A write whose answer was lost, and whose retries the leader then refuses
// before the log (its applier stalled), may still have applied: the client
// is told its outcome is unknown, with its key, never that it failed; and
// the retry with that key applies nothing twice.
func TestUnknownOutcomeIsNotTurnedIntoAFailure(t *testing.T) {
	net := newInmemNet(t, "n1", "n2", "n3")
	n1, n2 := net.node("n1"), net.node("n2")
	n1.failWrite.Store(&nodeapi.Error{Code: nodeapi.CodeUnknownOutcome, Message: "leadership lost, outcome unknown"})
	n1.refuseWrites.Store(&nodeapi.Error{Code: nodeapi.CodeApplyStalled, Message: "applier stalled"})
	sess := n2.session(t)
	_, err := run(t, n2, sess, "INSERT INTO t VALUES (1)")
	var uo *UnknownOutcomeError
	if !errors.As(err, &uo) || !errors.Is(err, replication.ErrUnknownOutcome) {
		t.Fatalf("write: %v; want an UnknownOutcomeError", err)
	}
	if len(uo.Key) != writeKeyBytes || !strings.Contains(err.Error(), fmt.Sprintf("%x", uo.Key)) {
		t.Fatalf("the error does not name the key: %v", err)
	}
	n1.refuseWrites.Store(nil)
	mustRun(t, n2, sess, fmt.Sprintf("SET duckraft_write_key = '%x'", uo.Key))
	mustRun(t, n2, sess, "INSERT INTO t VALUES (1)")
	if n1.count() != 1 || len(net.log) != 1 {
		t.Fatalf("%d rows and %d log entries after the keyed retry, want 1 and 1", n1.count(), len(net.log))
	}
	// The key was for one write: the next gets a fresh one.
	mustRun(t, n2, sess, "INSERT INTO t VALUES (2)")
	if n1.count() != 2 {
		t.Fatalf("%d rows after a new write, want 2", n1.count())
	}
}

func TestWriteKeySetting(t *testing.T) {
	for _, tc := range []struct {
		sql     string
		ok, bad bool
	}{
		{"SET duckraft_write_key = '00112233445566778899aabbccddeeff'", true, false},
		{"set SESSION duckraft_write_key TO '00112233445566778899AABBCCDDEEFF';", true, false},
		{"SET duckraft_write_key = 'abc'", true, true},
		{"SET duckraft_write_key = 42", true, true},
		{"SET duckraft_write_key = '00112233445566778899aabbccddeefg'", true, true},
		{"SET duckraft_consistency = 'strong'", false, false},
	} {
		key, ok, err := writeKeySetting(sqltext.Parse(tc.sql))
		if ok != tc.ok || (err != nil) != tc.bad || ok && !tc.bad && len(key) != writeKeyBytes {
			t.Errorf("%s: key %x, recognised %v, err %v", tc.sql, key, ok, err)
		}
	}
}

// A follower whose leader is unreachable retries until a new leader is
// known, and the write lands there.
func TestWriteFollowsNewLeader(t *testing.T) {
	net := newInmemNet(t, "n1", "n2", "n3")
	n1, n2, n3 := net.node("n1"), net.node("n2"), net.node("n3")
	n1.down.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := run(t, n2, n2.session(t), "INSERT INTO t VALUES (1)")
		done <- err
	}()
	// The write keeps failing at n1 until n3 takes over.
	waitFor(t, func() bool { return n1.unreachable.Load() > 0 }, "the write to try n1")
	net.setLeader("n3")
	if err := <-done; err != nil {
		t.Fatalf("write during the leader change: %v", err)
	}
	if n3.executes.Load() != 1 || n1.executes.Load() != 0 || n3.count() != 1 {
		t.Fatalf("proposed on n1 %d, n3 %d times; n3 has %d rows; want 0, 1, 1",
			n1.executes.Load(), n3.executes.Load(), n3.count())
	}
}

// TestWriteGoesOutWhenTheLeaderChanges: a write that failed at a dead
// leader pauses before its next attempt, but goes out as soon as this node
// learns of a new leader, not when the pause ends: after a leader's death
// every client's write waited for it on top of the election.
func TestWriteGoesOutWhenTheLeaderChanges(t *testing.T) {
	pause := retryPause
	retryPause = time.Hour
	t.Cleanup(func() { retryPause = pause })
	net := newInmemNet(t, "n1", "n2", "n3")
	n1, n2, n3 := net.node("n1"), net.node("n2"), net.node("n3")
	n1.down.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := run(t, n2, n2.session(t), "INSERT INTO t VALUES (1)")
		done <- err
	}()
	waitFor(t, func() bool { return n1.unreachable.Load() > 0 }, "the write to try n1")
	net.setLeader("n3")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("write after the leader change: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the write still waits a minute after n3 became leader")
	}
	if n3.count() != 1 {
		t.Fatalf("n3 has %d rows, want 1", n3.count())
	}
}

// A statement's own error comes back at once, without a retry.
func TestWriteErrorIsNotRetried(t *testing.T) {
	net := newInmemNet(t, "n1", "n2")
	n2 := net.node("n2")
	_, err := run(t, n2, n2.session(t), "INSERT INTO missing VALUES (1)")
	if err == nil || retryableWrite(err) {
		t.Fatalf("write to a missing table: %v (retryable %v)", err, retryableWrite(err))
	}
	if got := net.node("n1").executes.Load(); got != 1 {
		t.Fatalf("the leader was asked %d times, want 1", got)
	}
}

// A session read sent to a replica that has not applied the session's
// write is refused there as behind and served by another node.
func TestSessionReadMovesOffALaggingReplica(t *testing.T) {
	net := newInmemNet(t, "n1", "n2", "r1")
	n1, r1 := net.node("n1"), net.node("r1")
	s := n1.session(t)
	r1.held.Store(true)
	mustRun(t, n1, s, "INSERT INTO t VALUES (1)")
	// r1 is one entry behind, within the staleness bound, and the cheapest
	// node: the read goes there first.
	if n := countOf(t, mustRun(t, n1, s, "SELECT count(*) FROM t")); n != 1 {
		t.Fatalf("session read %d rows after its write, want 1", n)
	}
	if r1.refused.Load() != 1 || r1.reads.Load() != 0 {
		t.Fatalf("r1 refused %d and served %d reads, want 1 and 0", r1.refused.Load(), r1.reads.Load())
	}
	// Once it caught up it serves the session again.
	r1.release()
	if n := countOf(t, mustRun(t, n1, s, "SELECT count(*) FROM t")); n != 1 || r1.reads.Load() != 1 {
		t.Fatalf("after catching up r1 served %d reads (read %d rows), want 1", r1.reads.Load(), n)
	}
}

// TestSessionReadSkipsACatchingUpNode: a node far behind a session's
// index (it restarted and replays the log) refuses the session's read at
// once, and another node serves it; it used to hold the read for
// SessionWait first, which after a leader's death added those 2 s to the
// reads of every session whose read went to a node that had restarted
// shortly before.
func TestSessionReadSkipsACatchingUpNode(t *testing.T) {
	net := newInmemNet(t, "n1", "n2", "r1")
	n1, r1 := net.node("n1"), net.node("r1")
	r1.exec.local.wait = time.Hour
	s := n1.session(t)
	r1.held.Store(true)
	for i := range farBehind + 1 {
		mustRun(t, n1, s, fmt.Sprintf("INSERT INTO t VALUES (%d)", i))
	}
	// r1 is within the staleness bound and the cheapest node: the read
	// goes there first.
	type answer struct {
		rows [][]any
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		rows, err := run(t, n1, s, "SELECT count(*) FROM t")
		done <- answer{rows, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			t.Fatalf("session read: %v", a.err)
		}
		if n := countOf(t, a.rows); n != farBehind+1 {
			t.Fatalf("session read %d rows after its writes, want %d", n, farBehind+1)
		}
	case <-time.After(time.Minute):
		t.Fatal("the read still waits a minute on r1, which is far behind")
	}
	if r1.refused.Load() != 1 || r1.reads.Load() != 0 {
		t.Fatalf("r1 refused %d and served %d reads, want 1 and 0", r1.refused.Load(), r1.reads.Load())
	}
}

// A read whose node is unreachable runs elsewhere, and the node is left
// out of the next reads instead of being tried again.
func TestReadFailsOverFromUnreachableNode(t *testing.T) {
	net := newInmemNet(t, "n1", "n2", "r1")
	n1, r1 := net.node("n1"), net.node("r1")
	s := n1.session(t)
	r1.down.Store(true)
	for range 3 {
		if n := countOf(t, mustRun(t, n1, s, "SELECT count(*) FROM t")); n != 0 {
			t.Fatalf("read %d rows, want 0", n)
		}
	}
	if r1.connects.Load() != 0 {
		t.Fatalf("r1 accepted %d sessions while down", r1.connects.Load())
	}
	if !n1.exec.members.bal.Suspected("r1", time.Now()) {
		t.Fatal("r1 failed but is not suspected")
	}
}

// A node that restarted has forgotten the sessions opened on it: the read
// that finds out runs elsewhere, and the next one opens a new session there.
func TestReadReconnectsToRestartedNode(t *testing.T) {
	net := newInmemNet(t, "n1", "n2", "r1")
	n1, r1 := net.node("n1"), net.node("r1")
	s := n1.session(t)
	mustRun(t, n1, s, "SELECT count(*) FROM t")
	if r1.connects.Load() != 1 || r1.reads.Load() != 1 {
		t.Fatalf("r1: %d sessions, %d reads; want the read on r1", r1.connects.Load(), r1.reads.Load())
	}
	r1.restart()
	mustRun(t, n1, s, "SELECT count(*) FROM t")
	mustRun(t, n1, s, "SELECT count(*) FROM t")
	if r1.connects.Load() != 2 || r1.reads.Load() != 2 {
		t.Fatalf("after restart r1 has %d sessions and %d reads, want 2 and 2", r1.connects.Load(), r1.reads.Load())
	}
}

// Settings follow a session's reads to its remote sessions, and are
// replayed in a new remote session after a restart.
func TestSettingsFollowReads(t *testing.T) {
	net := newInmemNet(t, "n1", "n2", "r1")
	n1, r1 := net.node("n1"), net.node("r1")
	s := n1.session(t)
	mustRun(t, n1, s, "SET TimeZone = 'Asia/Tokyo'")
	for i := range 3 {
		rows := mustRun(t, n1, s, "SELECT current_setting('TimeZone')")
		if len(rows) != 1 || rows[0][0] != "Asia/Tokyo" {
			t.Fatalf("read %d saw TimeZone %v, want Asia/Tokyo", i, rows)
		}
		if i == 0 {
			r1.restart()
		}
	}
	if r1.connects.Load() != 2 || r1.reads.Load() != 2 {
		t.Fatalf("r1 opened %d sessions and served %d reads, want 2 and 2", r1.connects.Load(), r1.reads.Load())
	}
}

// A strong read on a follower runs on the leader.
func TestStrongReadRunsOnLeader(t *testing.T) {
	net := newInmemNet(t, "n1", "n2", "r1")
	n1, n2 := net.node("n1"), net.node("n2")
	s := n2.session(t)
	mustRun(t, n2, s, "SET duckraft_consistency = 'strong'")
	mustRun(t, n2, s, "SELECT count(*) FROM t")
	if n1.reads.Load() != 1 {
		t.Fatalf("the leader served %d strong reads, want 1", n1.reads.Load())
	}
	// A node that is no longer leader refuses; the read follows the new one.
	net.setLeader("n2")
	mustRun(t, n2, s, "SELECT count(*) FROM t")
	if n1.reads.Load() != 1 {
		t.Fatal("a former leader served a strong read")
	}
}

// An any read runs on the node the client is connected to, even where a
// replica would be cheaper; it moves only if that node cannot serve it.
func TestAnyReadRunsOnConnectedNode(t *testing.T) {
	net := newInmemNet(t, "n1", "n2", "r1")
	n2, r1 := net.node("n2"), net.node("r1")
	s := n2.session(t)
	mustRun(t, n2, s, "SET duckraft_consistency = 'any'")
	for range 5 {
		mustRun(t, n2, s, "SELECT count(*) FROM t")
	}
	if n2.exec.Reads() != 5 || r1.connects.Load() != 0 {
		t.Fatalf("n2 ran %d of 5 any reads itself, r1 got %d sessions; want all on n2", n2.exec.Reads(), r1.connects.Load())
	}
}

// A split scan's shares meet at one index even when gossip lags: nodes past
// the pin name their index, and the router re-pins there.
func TestSplitScanRepinsAndMerges(t *testing.T) {
	net := newInmemNet(t, "n1", "r1", "r2")
	n1, r1, r2 := net.node("n1"), net.node("r1"), net.node("r2")
	s := n1.session(t)
	for i := range 10 {
		mustRun(t, n1, s, fmt.Sprintf("INSERT INTO t VALUES (%d)", i))
	}
	stale := uint64(3)
	net.mu.Lock()
	net.gossipApplied = &stale
	net.mu.Unlock()
	// A router knows the nodes' indexes only from gossip.
	router := net.router(t)
	rs := router.session(t)
	mustRun(t, router, rs, "SET duckraft_split_scan = 2")
	rows := mustRun(t, router, rs, "SELECT * FROM t")
	seen := map[int32]bool{}
	for _, r := range rows {
		seen[r[0].(int32)] = true
	}
	if len(rows) != 10 || len(seen) != 10 {
		t.Fatalf("split scan returned %d rows, %d distinct, want 10 and 10: %v", len(rows), len(seen), rows)
	}
	// The first pin (3) was refused by both shares' nodes (at 10); the
	// scan then met at 10 on two nodes rather than falling back to one.
	if r1.refused.Load() == 0 || r2.refused.Load() == 0 || r1.reads.Load() != 1 || r2.reads.Load() != 1 {
		t.Fatalf("shares: r1 served %d refused %d, r2 served %d refused %d; want each to refuse, then serve one share",
			r1.reads.Load(), r1.refused.Load(), r2.reads.Load(), r2.refused.Load())
	}
}

// The end of a client session ends its sessions on other nodes.
func TestEndSessionClosesRemoteSessions(t *testing.T) {
	net := newInmemNet(t, "n1", "n2", "r1")
	n1, r1 := net.node("n1"), net.node("r1")
	s := n1.session(t)
	mustRun(t, n1, s, "SELECT count(*) FROM t")
	if r1.open.Load() != 1 {
		t.Fatalf("r1 holds %d sessions, want 1", r1.open.Load())
	}
	n1.exec.EndSession(s)
	waitFor(t, func() bool { return r1.open.Load() == 0 }, "the remote session to close")
}

// A client cannot reconfigure the node it is connected to for every
// session: SET GLOBAL, DuckDB's logging and its parser are refused, inside
// a transaction too, and session settings still work.
func TestNodeStatementsAreRefused(t *testing.T) {
	net := newInmemNet(t, "n1", "n2")
	n2 := net.node("n2")
	s := n2.session(t)
	for _, sql := range []string{
		"SET GLOBAL threads = 1",
		"SET GLOBAL default_collation = 'nocase'",
		"CALL enable_logging(storage = 'file')",
		"SELECT enable_logging()",
		"SET enable_logging = true",
		"SET TimeZone = 'UTC'; SET GLOBAL default_order = 'DESC'",
	} {
		if _, err := run(t, n2, s, sql); !errors.Is(err, ErrNodeStatement) {
			t.Errorf("%s: %v, want ErrNodeStatement", sql, err)
		}
	}
	mustRun(t, n2, s, "BEGIN")
	if _, err := run(t, n2, s, "SET GLOBAL threads = 1"); !errors.Is(err, ErrNodeStatement) {
		t.Errorf("SET GLOBAL in a transaction: %v", err)
	}
	mustRun(t, n2, s, "ROLLBACK")
	conn, err := n2.db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for setting, want := range map[string]string{"default_collation": "", "default_order": "ASCENDING"} {
		row, err := conn.QueryRow(context.Background(), "SELECT current_setting('"+setting+"')")
		if err != nil || fmt.Sprint(row[0]) != want {
			t.Errorf("after the refusals %s is %v (%v), want %q", setting, row, err, want)
		}
	}
	mustRun(t, n2, s, "SET TimeZone = 'Asia/Tokyo'")
}

// A routed read that is not a single read is refused with a code.
func TestRoutedStatementMustBeARead(t *testing.T) {
	net := newInmemNet(t, "n1")
	n1 := net.node("n1")
	_, err := n1.exec.serveRouted(context.Background(), n1.session(t), nodeapi.Read{}, "INSERT INTO t VALUES (1)")
	if nodeapi.CodeOf(err) != nodeapi.CodeBadRequest {
		t.Fatalf("routed write: %v", err)
	}
	if errors.Is(err, errRemote) || retryableRead(err) {
		t.Fatal("a refused routed write is retryable")
	}
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline: what it waits for happens within milliseconds.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
