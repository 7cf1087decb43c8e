package replication

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// slowHeartbeat is the survivors' heartbeat timeout in the dead-leader
// tests: raft's own timer cannot start an election sooner after the
// leader's last message, so a new leader before it is the watch's.
const slowHeartbeat = 10 * time.Second

// setHeartbeat sets the heartbeat and election timeouts of n's raft.
func setHeartbeat(t *testing.T, n *testNode, d time.Duration) {
	t.Helper()
	rc := n.store.raft.ReloadableConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout = d, d
	if err := n.store.raft.ReloadConfig(rc); err != nil {
		t.Fatalf("%s: reload config: %v", n.id, err)
	}
}

// killLeader stops the leader of nodes (its Raft port then refuses
// connections, as a killed process's does), with the survivors' heartbeat
// timeout at slowHeartbeat, and returns the survivors sorted by ID, the
// first of them first in line for the election, and the time of the stop.
func killLeader(t *testing.T, nodes []*testNode, leader *testNode) ([]*testNode, time.Time) {
	t.Helper()
	var survivors []*testNode
	for _, nd := range nodes {
		if nd != leader {
			survivors = append(survivors, nd)
			setHeartbeat(t, nd, slowHeartbeat)
		}
	}
	slices.SortFunc(survivors, func(a, b *testNode) int { return strings.Compare(a.id, b.id) })
	start := time.Now()
	leader.stop(t, true)
	return survivors, start
}

// waitNewLeader waits for one of survivors to lead, restores the
// survivors' heartbeat timeout (a leader at slowHeartbeat would heartbeat
// too rarely for its lease) and returns it. It fails the test if the
// election came only after slowHeartbeat: raft's timer's, not the watch's.
func waitNewLeader(t *testing.T, survivors []*testNode, start time.Time) *testNode {
	t.Helper()
	var next *testNode
	var took time.Duration
	waitFor(t, 3*slowHeartbeat, "a new leader", func() bool {
		for _, nd := range survivors {
			if nd.store.IsLeader() {
				next, took = nd, time.Since(start)
				return true
			}
		}
		return false
	})
	for _, nd := range survivors {
		setHeartbeat(t, nd, 500*time.Millisecond)
	}
	t.Logf("%s elected %v after the leader stopped", next.id, took)
	if took >= slowHeartbeat {
		t.Fatalf("new leader %v after the leader stopped: raft's heartbeat timeout (%v), not the watch", took, slowHeartbeat)
	}
	return next
}

// insertAndCount writes id into t through the leader among nodes, waits
// until every one of them applied it, and checks that each holds id rows.
func insertAndCount(t *testing.T, nodes []*testNode, id int) {
	t.Helper()
	res := execOnLeader(t, nodes, stmt(fmt.Sprintf("INSERT INTO t VALUES (%d)", id)))
	waitApplied(t, nodes, res.Index)
	for _, nd := range nodes {
		if got := queryInt(t, nd.db, "SELECT count(*) FROM t"); got != int64(id) {
			t.Errorf("%s: count = %d, want %d", nd.id, got, id)
		}
	}
}

// A follower whose leader's Raft port refuses connections stands for
// election at once: the survivors elect a new leader long before their
// heartbeat timeout, and the first in line (the lowest ID) wins when the
// logs are equal, without a competing candidacy of the other.
func TestDeadLeaderReplacedAtOnce(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	mustExec(t, leader.store, stmt("CREATE TABLE t(id INTEGER)"))
	res := mustExec(t, leader.store, stmt("INSERT INTO t VALUES (1)"))
	waitApplied(t, nodes, res.Index)

	// The election may be over before the leader's Close returns.
	term := leader.store.raft.CurrentTerm()
	survivors, start := killLeader(t, nodes, leader)
	next := waitNewLeader(t, survivors, start)
	if next != survivors[0] {
		t.Errorf("%s won, want %s, first in line with an equal log", next.id, survivors[0].id)
	}
	// One election: the first in line's, in the next term.
	if got := next.store.raft.CurrentTerm(); got != term+1 {
		t.Errorf("new leader's term %d, want %d: more than one election", got, term+1)
	}
	insertAndCount(t, survivors, 2)
}

// failingLogs fails StoreLogs while fail is set: a follower whose log
// falls behind the leader's.
type failingLogs struct {
	raft.LogStore
	fail atomic.Bool
}

var errInjected = errors.New("injected log store failure")

func (l *failingLogs) StoreLog(e *raft.Log) error { return l.StoreLogs([]*raft.Log{e}) }

func (l *failingLogs) StoreLogs(es []*raft.Log) error {
	if l.fail.Load() {
		return errInjected
	}
	return l.LogStore.StoreLogs(es)
}

// clusterWithFollowerBehind starts 3 nodes holding rows 1 and 2 of t,
// where the follower first in line after the leader (behind, the lower ID
// of the two) did not store the entry of row 2, which the other (ahead)
// did, and returns them, the leader, and heal, which lets behind store
// entries again: until then the live leader cannot bring it level.
func clusterWithFollowerBehind(t *testing.T) (nodes []*testNode, leader, behind, ahead *testNode, heal func()) {
	t.Helper()
	logs := map[string]*failingLogs{}
	nodes = startCluster(t, 3, func(c *Config) {
		l := &failingLogs{}
		logs[c.ID] = l
		c.WrapLogStore = func(s raft.LogStore) raft.LogStore { l.LogStore = s; return l }
	})
	leader = waitLeader(t, nodes)
	mustExec(t, leader.store, stmt("CREATE TABLE t(id INTEGER)"))
	res := mustExec(t, leader.store, stmt("INSERT INTO t VALUES (1)"))
	waitApplied(t, nodes, res.Index)

	var followers []*testNode
	for _, nd := range nodes {
		if nd != leader {
			followers = append(followers, nd)
		}
	}
	slices.SortFunc(followers, func(a, b *testNode) int { return strings.Compare(a.id, b.id) })
	behind, ahead = followers[0], followers[1]
	logs[behind.id].fail.Store(true)
	res = mustExec(t, leader.store, stmt("INSERT INTO t VALUES (2)"))
	waitFor(t, 10*time.Second, "the leader's entry on the follower ahead", func() bool {
		return ahead.store.raft.LastIndex() >= res.Index
	})
	if got := behind.store.raft.LastIndex(); got >= res.Index {
		t.Fatalf("%s holds entry %d, want it behind", behind.id, got)
	}
	return nodes, leader, behind, ahead, func() { logs[behind.id].fail.Store(false) }
}

// When the first in line's log is behind, the other survivor refuses its
// vote and stands itself at once, rather than waiting for its heartbeat
// timeout.
func TestDeadLeaderReplacedByLongerLog(t *testing.T) {
	nodes, leader, _, ahead, heal := clusterWithFollowerBehind(t)
	survivors, start := killLeader(t, nodes, leader)
	heal()
	next := waitNewLeader(t, survivors, start)
	if next != ahead {
		t.Errorf("%s won, want %s, whose log is longer", next.id, ahead.id)
	}
	insertAndCount(t, survivors, 3)
}

// The first in line's RequestVote may reach the other survivor before
// that one noticed the leader's death; raft then forgets the leader (a
// new term), so the survivor must still stand when the candidate's log is
// behind its own and the leader it last knew refuses connections. The
// order is forced here: the first in line stands while the leader still
// runs, and the leader stops once the other survivor has refused the vote.
func TestDeadLeaderCandidacyBeforeDeathSeen(t *testing.T) {
	nodes, leader, behind, ahead, heal := clusterWithFollowerBehind(t)
	for _, nd := range nodes {
		setHeartbeat(t, nd, slowHeartbeat)
	}
	survivors := []*testNode{behind, ahead}

	// The follower behind stays behind until its candidacy was refused:
	// healed before, the leader could bring it level first on a loaded
	// machine, and its candidacy would then win (CI saw it).
	term := ahead.store.raft.CurrentTerm()
	behind.store.stand(raft.ServerID(leader.id), "forced by the test")
	waitFor(t, 10*time.Second, "the candidacy's term on the follower ahead", func() bool {
		return ahead.store.raft.CurrentTerm() > term
	})
	if addr, _ := ahead.store.raft.LeaderWithID(); addr != "" {
		t.Fatalf("%s still knows leader %s after a new term", ahead.id, addr)
	}
	heal()
	start := time.Now()
	leader.stop(t, true)
	next := waitNewLeader(t, survivors, start)
	if next != ahead {
		t.Errorf("%s won, want %s, whose log is longer", next.id, ahead.id)
	}
	insertAndCount(t, survivors, 3)
}

// A node that stood for election refuses pre-votes itself for standFor:
// a survivor whose heartbeat timeout fires before the RequestVote reaches
// it must not pass a pre-vote and split the vote. Raft (here a stand-in
// answering the guard's consumer) still sees every other RPC, and the
// pre-votes again once standFor has passed.
func TestStandingRefusesPreVotes(t *testing.T) {
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	g := newRPCGuard(trans, func() uint64 { return 5 }, nil, testLogger())
	defer g.Close()
	g.standFor = time.Minute
	var asked atomic.Int64
	go func() {
		for {
			select {
			case rpc := <-g.Consumer():
				switch rpc.Command.(type) {
				case *raft.TimeoutNowRequest:
					rpc.Respond(&raft.TimeoutNowResponse{}, nil)
				case *raft.RequestPreVoteRequest:
					asked.Add(1)
					rpc.Respond(&raft.RequestPreVoteResponse{Term: 5, Granted: true}, nil)
				default:
					rpc.Respond(nil, errors.New("unexpected RPC"))
				}
			case <-g.done:
				return
			}
		}
	}()
	peer, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	preVote := func() bool {
		t.Helper()
		req := &raft.RequestPreVoteRequest{Term: 6, LastLogTerm: 5, LastLogIndex: 10,
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("peer"), Addr: []byte(peer.LocalAddr())}}
		var resp raft.RequestPreVoteResponse
		if err := peer.RequestPreVote("self", trans.LocalAddr(), req, &resp); err != nil {
			t.Fatalf("pre-vote: %v", err)
		}
		return resp.Granted
	}

	if !preVote() {
		t.Fatal("pre-vote refused before this node stood")
	}
	if err := g.startElection("self", trans.LocalAddr()); err != nil {
		t.Fatalf("startElection: %v", err)
	}
	if preVote() {
		t.Error("pre-vote granted while this node stands for election")
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("raft asked %d pre-votes, want 1: the one before standing", n)
	}
	g.standing.Store(time.Now().Add(-g.standFor).UnixNano())
	if !preVote() {
		t.Error("pre-vote refused after standFor")
	}
}
