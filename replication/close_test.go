package replication

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/wal"
)

// closeAfter closes nd's store and fails the test if Close has not
// returned within limit of ready reporting true: Close waits for the entry
// the applier is working on, however long that takes, but not for more.
// A Close left behind keeps the store (and its DB) from the node's
// cleanup, which would wait for it too.
func closeAfter(t *testing.T, nd *testNode, ready func() bool, limit time.Duration, what string) {
	t.Helper()
	closed := make(chan error, 1)
	s := nd.store
	go func() { closed <- s.Close() }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var timeout <-chan time.Time
	for {
		select {
		case err := <-closed:
			nd.store = nil
			if err != nil {
				t.Fatalf("close: %v", err)
			}
			return
		case <-tick.C:
			if timeout == nil && ready() {
				timeout = time.After(limit)
			}
		case <-timeout:
			nd.store, nd.db = nil, nil
			t.Fatalf("Close still waits %v after %s", limit, what)
		}
	}
}

// submitWrite queues cmd on s and returns a channel with its answer.
func submitWrite(t *testing.T, s *Store, cmd wal.Command) chan error {
	t.Helper()
	wait, err := s.Submit(context.Background(), cmd)
	if err != nil {
		t.Fatalf("submit %+v: %v", cmd.Entry, err)
	}
	answer := make(chan error, 1)
	go func() {
		_, err := wait(context.Background())
		answer <- err
	}()
	return answer
}

// wantClosedOrApplied checks a write's answer after Close: applied, or
// ErrUnknownOutcome with ErrClosed (it may have been stored), never silence
// nor another error, which would tell the client it never applies.
func wantClosedOrApplied(t *testing.T, answer chan error) {
	t.Helper()
	select {
	case err := <-answer:
		if err != nil && (!errors.Is(err, ErrUnknownOutcome) || !errors.Is(err, ErrClosed)) {
			t.Fatalf("write answered %v, want success or ErrUnknownOutcome with ErrClosed", err)
		}
		t.Logf("write answered %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("write not answered 10 s after Close returned")
	}
}

// retryOnce reopens the node and sends cmd again under its key: it must be
// applied exactly once, whatever Close answered the first time.
func retryOnce(t *testing.T, nd *testNode, cmd wal.Command, table string) {
	t.Helper()
	nd.start(t, false)
	waitLeader(t, []*testNode{nd})
	mustExec(t, nd.store, cmd)
	if n := queryInt(t, nd.db, "SELECT count(*) FROM "+table); n != 1 {
		t.Fatalf("%s holds %d rows after the retry under the same key, want 1", table, n)
	}
}

// slowSQL keeps the applier busy for seconds: a real statement, 6.25e8 rows
// summed on the applier's one thread.
const slowSQL = "CREATE TABLE slow AS SELECT sum(a.range * b.range) AS s FROM range(25000) a, range(25000) b"

// Close answers a write whose entry is committed but not yet applied when
// raft shuts down. Raft hands committed entries to its FSM goroutine
// through a queue (fsmMutateCh); at shutdown that goroutine ends without
// answering the entries still queued, so their futures never resolved and
// Close, which waits for every entry's answer, hung for ever (seen in
// TestStalledLeaderHandsOver). The write may be committed, so its answer
// is ErrUnknownOutcome with ErrClosed, and a retry under its key applies
// it once.
func TestCloseAnswersCommittedUnappliedWrite(t *testing.T) {
	nodes := startCluster(t, 1, func(c *Config) {
		c.OutcomeWait = 10 * time.Minute // the answer must come from Close, not from this
	})
	nd := nodes[0]
	s := nd.store
	mustExec(t, s, stmt("CREATE TABLE t(i INTEGER)"))
	mustExec(t, s, stmt("CREATE TABLE filler(i INTEGER)"))
	// Entries of raft's own (no writer waits for them, so they leave the
	// Store's one in-flight slot free): a slow one the applier works on,
	// then fillers, each committed alone so that each is a batch of its
	// own in raft's FSM queue. After its current batch, raft's FSM
	// goroutine picks at random between the next batch and shutdown, so
	// without the fix the write behind fillers is answered with chance
	// 2^-(fillers+1).
	const fillers = 10
	slowStart := time.Now()
	s.raft.Apply(mustEncode(t, stmt(slowSQL)), 0)
	commit := s.raft.CommitIndex()
	waitFor(t, 10*time.Second, "the slow entry committed", func() bool { return s.raft.CommitIndex() > commit })
	slowIdx := s.raft.CommitIndex()
	for i := range fillers {
		commit := s.raft.CommitIndex()
		s.raft.Apply(mustEncode(t, stmt("INSERT INTO filler VALUES (?)", i)), 0)
		waitFor(t, 10*time.Second, "a filler committed", func() bool { return s.raft.CommitIndex() > commit })
	}
	cmd := stmt("INSERT INTO t VALUES (1)")
	cmd.Key = []byte("committed, not applied")
	commit = s.raft.CommitIndex()
	answer := submitWrite(t, s, cmd)
	waitFor(t, 10*time.Second, "the write committed", func() bool { return s.raft.CommitIndex() > commit })
	if applied := s.AppliedIndex(); applied >= slowIdx {
		t.Fatalf("the slow entry %d was applied (applied index %d) %v after it was proposed, before the write behind it committed: make slowSQL slower",
			slowIdx, applied, time.Since(slowStart))
	}
	slowApplied := func() bool { return s.AppliedIndex() >= slowIdx }
	closeAfter(t, nd, slowApplied, 30*time.Second, "the slow entry applied, with committed writes queued behind it")
	t.Logf("closed %v after the slow entry was proposed", time.Since(slowStart))
	wantClosedOrApplied(t, answer)
	retryOnce(t, nd, cmd, "t")
}

// mustEncode encodes cmd as an entry of its own.
func mustEncode(t *testing.T, cmd wal.Command) []byte {
	t.Helper()
	data, err := wal.Batch{Commands: []wal.Command{cmd}}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Every kind of future the Store waits on can be made to end on the
// Store's raftDown: without that, an upgrade of raft that renamed or
// dropped the futures' ShutdownCh would bring back the hang of
// TestCloseAnswersCommittedUnappliedWrite.
func TestAwaitEndsEveryRaftFuture(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	r := nodes[0].store.raft
	futures := []struct {
		name   string
		future func() raft.Future
	}{
		{"Apply", func() raft.Future { return r.Apply(mustEncode(t, stmt("CREATE TABLE a(i INTEGER)")), 0) }},
		{"Barrier", func() raft.Future { return r.Barrier(0) }},
		{"VerifyLeader", r.VerifyLeader},
		{"Snapshot", func() raft.Future { return r.Snapshot() }},
		{"AddNonvoter", func() raft.Future { return r.AddNonvoter("other", "127.0.0.1:1", 0, 0) }},
		{"DemoteVoter", func() raft.Future { return r.DemoteVoter("other", 0, 0) }},
		{"RemoveServer", func() raft.Future { return r.RemoveServer("other", 0, 0) }},
		{"LeadershipTransfer", r.LeadershipTransfer},
	}
	for _, fu := range futures {
		f := fu.future()
		if !endOn(f, make(chan struct{})) {
			t.Errorf("%s: %T has no ShutdownCh to end on", fu.name, f)
		}
		// Raft answers each of them while it runs.
		f.Error()
	}
}
