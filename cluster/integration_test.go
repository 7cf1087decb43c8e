package cluster

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// raftAdapter is how the wiring code is expected to adapt a *raft.Raft to Raft.
type raftAdapter struct{ r *raft.Raft }

const raftTimeout = 5 * time.Second

func (a raftAdapter) IsLeader() bool       { return a.r.State() == raft.Leader }
func (a raftAdapter) AppliedIndex() uint64 { return a.r.AppliedIndex() }

func (a raftAdapter) Servers() ([]Server, error) {
	f := a.r.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	var out []Server
	for _, s := range f.Configuration().Servers {
		out = append(out, Server{ID: string(s.ID), Address: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

func (a raftAdapter) AddVoter(id, addr string) error {
	return a.r.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, raftTimeout).Error()
}

func (a raftAdapter) AddNonvoter(id, addr string) error {
	return a.r.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, raftTimeout).Error()
}

func (a raftAdapter) DemoteVoter(id string) error {
	return a.r.DemoteVoter(raft.ServerID(id), 0, raftTimeout).Error()
}

func (a raftAdapter) RemoveServer(id string) error {
	return a.r.RemoveServer(raft.ServerID(id), 0, raftTimeout).Error()
}

// nopFSM applies nothing; the test only needs log indexes to move.
type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                    { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error)    { return nopSnapshot{}, nil }
func (nopFSM) Restore(rc io.ReadCloser) error         { return rc.Close() }
func (nopSnapshot) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnapshot) Release()                          {}

type nopSnapshot struct{}

// inmemNet connects in-memory Raft transports like a network that can lose nodes.
type inmemNet struct {
	mu    sync.Mutex
	trans map[raft.ServerAddress]*raft.InmemTransport
}

func (n *inmemNet) add() (raft.ServerAddress, *raft.InmemTransport) {
	n.mu.Lock()
	defer n.mu.Unlock()
	addr, tr := raft.NewInmemTransport("")
	for a, other := range n.trans {
		tr.Connect(a, other)
		other.Connect(addr, tr)
	}
	n.trans[addr] = tr
	return addr, tr
}

func (n *inmemNet) cut(addr raft.ServerAddress) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, other := range n.trans {
		other.Disconnect(addr)
	}
	n.trans[addr].DisconnectAll()
	delete(n.trans, addr)
}

// testNode is one duckraft node minus DuckDB: real Raft (in-memory), real gossip on
// loopback and a Reconciler.
type testNode struct {
	id     string
	addr   raft.ServerAddress
	raft   *raft.Raft
	gossip *Gossip
	stop   context.CancelFunc
	done   chan struct{}
	dead   bool
}

func startNode(t *testing.T, net *inmemNet, id string, role Role, bootstrap bool) *testNode {
	t.Helper()
	addr, tr := net.add()
	cfg := raft.DefaultConfig()
	cfg.LocalID = raft.ServerID(id)
	cfg.HeartbeatTimeout = 200 * time.Millisecond
	cfg.ElectionTimeout = 200 * time.Millisecond
	cfg.LeaderLeaseTimeout = 100 * time.Millisecond
	cfg.CommitTimeout = 10 * time.Millisecond
	cfg.Logger = hclog.NewNullLogger()
	store := raft.NewInmemStore()
	r, err := raft.NewRaft(cfg, nopFSM{}, store, store, raft.NewInmemSnapshotStore(), tr)
	if err != nil {
		t.Fatal(err)
	}
	if bootstrap {
		if err := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: cfg.LocalID, Address: addr}}}).Error(); err != nil {
			t.Fatal(err)
		}
	}
	log := testLogger(t).With("node", id)
	g, err := NewGossip(Config{
		Meta:     Meta{ID: id, Role: role, RaftAddr: string(addr), QuackAddr: "quack-" + id},
		BindAddr: "127.0.0.1:0",
		Token:    testToken,
		Timing:   LoopbackTiming(),
		Logger:   log.WithGroup("gossip"),
		Status: func() Status {
			_, leader := r.LeaderWithID()
			return Status{AppliedIndex: r.AppliedIndex(), Leader: r.State() == raft.Leader, LeaderID: string(leader)}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := NewReconciler(ReconcilerConfig{
		ID:         id,
		Raft:       raftAdapter{r},
		Membership: g,
		Events:     g.Subscribe(),
		Voters:     3,
		ReapAfter:  2 * time.Second,
		MaxLag:     16,
		CatchUpFor: 500 * time.Millisecond,
		Interval:   200 * time.Millisecond,
		Logger:     log,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &testNode{id: id, addr: addr, raft: r, gossip: g, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(n.done)
		rec.Run(ctx)
	}()
	t.Cleanup(func() { n.kill(t, net) })
	return n
}

// kill stops the node without a graceful leave, as a crash would.
func (n *testNode) kill(t *testing.T, net *inmemNet) {
	t.Helper()
	if n.dead {
		return
	}
	n.dead = true
	n.stop()
	<-n.done
	n.gossip.Shutdown()
	if err := n.raft.Shutdown().Error(); err != nil {
		t.Errorf("shutdown %s: %v", n.id, err)
	}
	net.cut(n.addr)
}

// configOf returns the configuration as the current leader among nodes has it, written
// like "n1=V n2=V n3=N" in ID order, or "" if there is no leader.
func configOf(nodes []*testNode) string {
	for _, n := range nodes {
		if n.dead || n.raft.State() != raft.Leader {
			continue
		}
		servers, err := raftAdapter{n.raft}.Servers()
		if err != nil {
			return ""
		}
		var parts []string
		for _, s := range servers {
			kind := "N"
			if s.Voter {
				kind = "V"
			}
			parts = append(parts, s.ID+"="+kind)
		}
		slices.Sort(parts)
		return fmt.Sprint(parts)
	}
	return ""
}

func waitConfig(t *testing.T, nodes []*testNode, want string) time.Duration {
	t.Helper()
	var got string
	return waitFor(t, 20*time.Second, "configuration "+want, func() bool {
		got = configOf(nodes)
		return got == want
	})
}

func TestReconcilerWithRealRaft(t *testing.T) {
	net := &inmemNet{trans: make(map[raft.ServerAddress]*raft.InmemTransport)}
	n1 := startNode(t, net, "n1", RoleVoter, true)
	waitFor(t, 5*time.Second, "n1 leads", func() bool { return n1.raft.State() == raft.Leader })
	for i := range 20 {
		if err := n1.raft.Apply(fmt.Appendf(nil, "entry %d", i), raftTimeout).Error(); err != nil {
			t.Fatal(err)
		}
	}

	n2 := startNode(t, net, "n2", RoleVoter, false)
	n3 := startNode(t, net, "n3", RoleVoter, false)
	join(t, n2.gossip, n1.gossip)
	join(t, n3.gossip, n1.gossip)
	nodes := []*testNode{n1, n2, n3}
	d := waitConfig(t, nodes, "[n1=V n2=V n3=V]")
	t.Logf("n2 and n3 voting %s after joining", d)

	n4 := startNode(t, net, "n4", RoleVoter, false)
	n5 := startNode(t, net, "n5", RoleReplica, false)
	join(t, n4.gossip, n2.gossip)
	join(t, n5.gossip, n3.gossip)
	nodes = append(nodes, n4, n5)
	waitConfig(t, nodes, "[n1=V n2=V n3=V n4=N n5=N]")
	// Give the reconciler time to (wrongly) promote anything.
	time.Sleep(time.Second)
	if got := configOf(nodes); got != "[n1=V n2=V n3=V n4=N n5=N]" {
		t.Fatalf("configuration changed to %s with three healthy voters", got)
	}

	n1.kill(t, net)
	d = waitConfig(t, nodes, "[n2=V n3=V n4=V n5=N]")
	t.Logf("leader n1 killed: reaped and n4 promoted in %s (reap-after 2 s)", d)

	// n1 comes back on new addresses with an empty log: it rejoins as a non-voter.
	n1b := startNode(t, net, "n1", RoleVoter, false)
	join(t, n1b.gossip, n3.gossip)
	nodes = append(nodes, n1b)
	waitConfig(t, nodes, "[n1=N n2=V n3=V n4=V n5=N]")
	waitFor(t, 10*time.Second, "n1 to catch up", func() bool {
		return n1b.raft.AppliedIndex() >= n2.raft.AppliedIndex()-1
	})
	servers, _ := raftAdapter{n2.raft}.Servers()
	for _, n := range nodes[1:] {
		if n.raft.State() == raft.Leader {
			servers, _ = raftAdapter{n.raft}.Servers()
		}
	}
	if i := index(servers, "n1"); i < 0 || servers[i].Address != string(n1b.addr) {
		t.Fatalf("n1 in configuration %v, want address %s", servers, n1b.addr)
	}
}
