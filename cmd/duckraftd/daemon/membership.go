package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/duckraft/duckraft/cluster"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/routing"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// membership is this node's gossip membership and the reconciler that keeps
// the Raft configuration in line with it.
type membership struct {
	gossip *cluster.Gossip
	self   string
	cancel context.CancelFunc
	done   chan struct{}
}

// raftAdapter presents replication's Store as the reconciler's Raft.
type raftAdapter struct{ s *replication.Store }

func (a raftAdapter) IsLeader() bool                     { return a.s.IsLeader() }
func (a raftAdapter) AddVoter(id, addr string) error     { return a.s.Join(id, addr, true) }
func (a raftAdapter) AddNonvoter(id, addr string) error  { return a.s.Join(id, addr, false) }
func (a raftAdapter) DemoteVoter(id string) error        { return a.s.Demote(id) }
func (a raftAdapter) RemoveServer(id string) error       { return a.s.Remove(id) }
func (a raftAdapter) AppliedIndex() uint64               { return a.s.AppliedIndex() }
func (a raftAdapter) LastIndex() uint64                  { return a.s.LastIndex() }
func (a raftAdapter) TransferLeadership(to string) error { return a.s.TransferLeadership(to) }

func (a raftAdapter) Servers() ([]cluster.Server, error) {
	conf, err := a.s.Configuration()
	if err != nil {
		return nil, err
	}
	out := make([]cluster.Server, len(conf))
	for i, s := range conf {
		out[i] = cluster.Server{ID: s.ID, Address: s.Addr, Voter: s.Voter}
	}
	return out, nil
}

// startMembership starts gossip, joins the cluster through c.Join if
// given, and runs the reconciler. raftAddr is the Raft address peers dial;
// load reports this node's in-flight statements; gossipKey encrypts gossip.
func startMembership(c Config, raftAddr, engine string, gossipKey []byte, store *replication.Store, load func() uint64, log *slog.Logger) (*membership, error) {
	role := cluster.RoleVoter
	if c.Replica {
		role = cluster.RoleReplica
	}
	g, err := startGossip(c, gossipKey, cluster.Meta{ID: c.ID, Role: role, RaftAddr: raftAddr, QuackAddr: c.quackAdvertise(), HTTPAddr: c.httpAdvertise(), Engine: engine, Staging: true,
		CompressedSnapshots: true},
		func() cluster.Status {
			return cluster.Status{AppliedIndex: store.AppliedThrough(), Load: load(), Leader: store.IsLeader(), LeaderID: store.LeaderID()}
		}, log)
	if err != nil {
		return nil, err
	}
	rec, err := cluster.NewReconciler(cluster.ReconcilerConfig{
		ID:         c.ID,
		Raft:       raftAdapter{store},
		Membership: g,
		Events:     g.Subscribe(),
		Handoff:    raftAdapter{store},
		Elected:    store.LeaderCh(),
		Voters:     c.Voters,
		ReapAfter:  c.ReapAfter,
		CatchUpFor: c.CatchUpFor,
		Logger:     log,
	})
	if err != nil {
		g.Shutdown()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &membership{gossip: g, self: c.ID, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		rec.Run(ctx)
	}()
	return m, nil
}

// startRouterMembership joins gossip as a router: without a Raft address,
// which keeps it out of the Raft configuration and out of reads.
func startRouterMembership(c Config, gossipKey []byte, load func() uint64, log *slog.Logger) (*membership, error) {
	m := &membership{self: c.ID, cancel: func() {}, done: make(chan struct{})}
	close(m.done)
	g, err := startGossip(c, gossipKey, cluster.Meta{ID: c.ID, QuackAddr: c.quackAdvertise(), HTTPAddr: c.httpAdvertise()}, func() cluster.Status {
		return cluster.Status{Load: load()}
	}, log)
	if err != nil {
		return nil, err
	}
	m.gossip = g
	return m, nil
}

// startGossip starts gossip with meta, encrypted with key, and joins
// through c.Join if given.
func startGossip(c Config, key []byte, meta cluster.Meta, status func() cluster.Status, log *slog.Logger) (*cluster.Gossip, error) {
	g, err := cluster.NewGossip(cluster.Config{
		Meta:     meta,
		BindAddr: c.GossipAddr,
		Key:      key,
		Status:   status,
		Timing:   c.GossipTiming,
		Logger:   log,
	})
	if err != nil {
		return nil, err
	}
	if c.Join != "" {
		if err := joinWithRetry(g, c.Join, 30*time.Second, log); err != nil {
			g.Shutdown()
			return nil, err
		}
	}
	return g, nil
}

// joinWithRetry joins through addr, retrying while the member may still be
// starting.
func joinWithRetry(g *cluster.Gossip, addr string, timeout time.Duration, log *slog.Logger) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := g.Join(addr)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("join %s: %w", addr, err)
		}
		log.Warn("join failed, retrying", "addr", addr, "err", err)
		time.Sleep(500 * time.Millisecond)
	}
}

// QuackAddr implements routing.Directory from gossip metadata.
func (m *membership) QuackAddr(id string) (string, bool) {
	for _, mem := range m.gossip.Members() {
		if mem.Meta.ID == id && mem.State != cluster.StateDead && mem.State != cluster.StateLeft {
			return mem.Meta.QuackAddr, mem.Meta.QuackAddr != ""
		}
	}
	return "", false
}

// member is what gossip knows of member id, dead or gone ones included.
func (m *membership) member(id string) (cluster.Member, bool) {
	for _, mem := range m.gossip.Members() {
		if mem.Meta.ID == id {
			return mem, true
		}
	}
	return cluster.Member{}, false
}

// lagReference is the index every member's lag is measured against (one
// meaning of lag, docs/operations.md): own, this node's commit index or
// applied index, or the furthest applied index an alive member gossips,
// whichever is further; a follower's commit index can trail what the
// leader has committed.
func (m *membership) lagReference(own uint64) uint64 {
	for _, mem := range m.gossip.Members() {
		if mem.State == cluster.StateAlive {
			own = max(own, mem.Meta.AppliedIndex)
		}
	}
	return own
}

// Peers implements routing.Directory: the live data nodes (members with a
// Raft address; routers have none) that are not leaving.
func (m *membership) Peers() []routing.Peer {
	var out []routing.Peer
	for _, mem := range m.gossip.Members() {
		meta := mem.Meta
		if mem.State != cluster.StateAlive || meta.Leaving || meta.RaftAddr == "" || meta.QuackAddr == "" {
			continue
		}
		out = append(out, routing.Peer{ID: meta.ID, QuackAddr: meta.QuackAddr, Replica: meta.Role == cluster.RoleReplica,
			Leader: meta.Leader, Applied: meta.AppliedIndex, Load: meta.Load, Engine: meta.Engine, Staging: meta.Staging})
	}
	return out
}

// isMemberHost reports whether host is the address of a member that is
// not dead or gone (a data node or a router), as gossip saw it or as the
// member advertises its Quack address: the node's session cap per client
// exempts members. A client on a member's machine is exempt with it.
func (m *membership) isMemberHost(host string) bool {
	for _, mem := range m.gossip.Members() {
		if mem.State == cluster.StateDead || mem.State == cluster.StateLeft {
			continue
		}
		for _, addr := range []string{mem.GossipAddr, mem.Meta.QuackAddr} {
			if h, _, err := net.SplitHostPort(addr); err == nil && h == host {
				return true
			}
		}
	}
	return false
}

// leaderID is the leader the data nodes report, for a router.
func (m *membership) leaderID() string {
	for _, p := range m.Peers() {
		if p.Leader {
			return p.ID
		}
	}
	return ""
}

// Close stops the reconciler and gossip. With leave it first tells the
// others that this node leaves; without, they detect it as failed, as after
// a crash.
func (m *membership) Close(leave bool) error {
	m.cancel()
	<-m.done
	if leave {
		m.gossip.Leave(time.Second)
	}
	return m.gossip.Shutdown()
}

// status assembles this node's view of the cluster: Raft's configuration
// joined with what gossip says of each member.
//
// A member's lag has one meaning wherever duckraft shows it (here, the
// status page, /readyz and duckraft_apply_lag): the leader's commit index
// less the member's applied index (Store.AppliedThrough, which counts the
// entries raft keeps from the FSM, so an idle cluster shows 0 everywhere,
// the leader too). A follower knows the leader's commit index as of its
// last AppendEntries; one that has not heard from a leader since it
// started knows none, so the furthest index any member reports applied
// stands in when it is higher.
func status(store *replication.Store, m *membership, exec *routing.Executor) nodeapi.Status {
	stats := store.Stats()
	term, _ := strconv.ParseUint(stats["term"], 10, 64)
	st := nodeapi.Status{
		ID:       store.ID(),
		State:    stats["state"],
		Term:     term,
		LeaderID: store.LeaderID(),
		Applied:  store.AppliedThrough(),
		Commit:   store.CommitIndex(),
		Reads:    exec.Reads(),
		Load:     exec.Load(),
	}
	members := map[string]cluster.Member{}
	for _, mem := range m.gossip.Members() {
		members[mem.Meta.ID] = mem
	}
	top := m.lagReference(max(st.Commit, st.Applied))
	conf, _ := store.Configuration()
	seen := map[string]bool{}
	add := func(ms nodeapi.MemberStatus, mem cluster.Member, ok bool) {
		if ok {
			ms.State = mem.State.String()
			ms.QuackAddr = mem.Meta.QuackAddr
			ms.HTTPAddr = mem.Meta.HTTPAddr
			ms.Applied = mem.Meta.AppliedIndex
			if ms.ID == st.ID {
				// Fresher than what this node last gossiped.
				ms.Applied = st.Applied
			}
			ms.Load = int(mem.Meta.Load)
			ms.Lag = top - min(top, ms.Applied)
			if ms.Role == "" {
				ms.Role = roleOf(mem)
			}
		} else {
			ms.State = "unknown"
		}
		ms.Leader = ms.ID == st.LeaderID
		st.Members = append(st.Members, ms)
	}
	for _, srv := range conf {
		role := "nonvoter"
		if srv.Voter {
			role = "voter"
		}
		mem, ok := members[srv.ID]
		if ok && mem.Meta.Role == cluster.RoleReplica {
			role = "replica"
		}
		seen[srv.ID] = true
		add(nodeapi.MemberStatus{ID: srv.ID, Role: role, RaftAddr: srv.Addr, InRaft: true, Voter: srv.Voter}, mem, ok)
	}
	for id, mem := range members {
		if !seen[id] {
			add(nodeapi.MemberStatus{ID: id, RaftAddr: mem.Meta.RaftAddr}, mem, true)
		}
	}
	return st
}

// roleOf names the role of a member outside the Raft configuration, as
// gossip describes it: a router; a data node gossip still lists after it
// was removed from Raft (by duckraft node remove, or reaped after being
// dead for --reap-after) is removed; a live one not yet added is joining.
func roleOf(mem cluster.Member) string {
	switch {
	case mem.Meta.RaftAddr == "":
		return "router"
	case mem.State != cluster.StateAlive:
		return "removed"
	default:
		return "joining"
	}
}

// gossipRole is a member's role as its own gossip says: what a router,
// which sees no Raft configuration, shows.
func gossipRole(m cluster.Meta) string {
	if m.RaftAddr == "" {
		return "router"
	}
	return m.Role.String()
}

// routerStatus is a router's view of the cluster: gossip only.
func routerStatus(id string, m *membership, exec *routing.Executor) nodeapi.Status {
	st := nodeapi.Status{ID: id, State: "Router", LeaderID: m.leaderID(), Reads: exec.Reads(), Load: exec.Load()}
	for _, mem := range m.gossip.Members() {
		st.Commit = max(st.Commit, mem.Meta.AppliedIndex)
	}
	for _, mem := range m.gossip.Members() {
		st.Members = append(st.Members, nodeapi.MemberStatus{
			ID: mem.Meta.ID, Role: gossipRole(mem.Meta), State: mem.State.String(), RaftAddr: mem.Meta.RaftAddr,
			QuackAddr: mem.Meta.QuackAddr, HTTPAddr: mem.Meta.HTTPAddr, Applied: mem.Meta.AppliedIndex, Load: int(mem.Meta.Load),
			Lag: st.Commit - min(st.Commit, mem.Meta.AppliedIndex), Leader: mem.Meta.Leader,
		})
	}
	return st
}

// readsCompressedSnapshots implements replication.Config.ReadsCompressedSnapshots
// from gossip: a node gossip has not seen yet counts as one that cannot.
func (d *Daemon) readsCompressedSnapshots(id string) bool {
	m := d.gossiped.Load()
	if m == nil {
		return false
	}
	mem, ok := m.member(id)
	return ok && mem.Meta.CompressedSnapshots
}
