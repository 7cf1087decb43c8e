package routing

import (
	"github.com/duckraft/duckraft/routing/balance"
)

// logPosition is what the view of the members needs of replication: who
// leads, and how far this node has applied and knows committed the log.
type logPosition interface {
	LeaderID() string
	AppliedThrough() uint64 // as Store.AppliedThrough
	CommitIndex() uint64
}

// members is this node's view of the live data nodes, shared by the reads
// and split scans that choose among them and by the sessions that move
// between them (migrate.go): gossip's list with this node's own entry
// made exact, and the balancer that ranks them and remembers those that
// failed.
type members struct {
	id string
	// router is set on a data-less router, which is never a candidate.
	router bool
	// dir is nil in tests that need no other node.
	dir          Directory
	store        logPosition
	bal          *balance.Balancer
	maxStaleness uint64
	// load is this node's own statements running or streaming.
	load func() uint64
}

// isSelf reports whether p is this node, holding data.
func (m *members) isSelf(p Peer) bool { return p.ID == m.id && !m.router }

// peers returns the live data nodes with this node's own entry made exact.
func (m *members) peers() []Peer {
	if m.dir == nil {
		return nil
	}
	peers := m.dir.Peers()
	leader := m.store.LeaderID()
	for i := range peers {
		if m.isSelf(peers[i]) {
			peers[i].Applied = m.store.AppliedThrough()
			peers[i].Load = m.load()
		}
		if leader != "" {
			peers[i].Leader = peers[i].ID == leader
		}
	}
	return peers
}

// maxApplied is the furthest applied index this node knows of: a bound on
// what is committed.
func (m *members) maxApplied(peers []Peer) uint64 {
	top := max(m.store.AppliedThrough(), m.store.CommitIndex())
	for _, p := range peers {
		top = max(top, p.Applied)
	}
	return top
}

// seen is an index the state a read on p just saw is known to have
// reached, so that the session's next read sees no older state (monotonic
// reads): this node's applied index once its own read began, or the index
// gossip last reported p had applied. The latter is a lower bound: a node
// that applied more since it gossiped may have shown a newer state.
func (m *members) seen(p Peer) uint64 {
	if m.isSelf(p) {
		return m.store.AppliedThrough()
	}
	return p.Applied
}

// alive reports whether gossip lists node id among the live peers.
func (m *members) alive(id string) bool {
	for _, p := range m.peers() {
		if p.ID == id {
			return true
		}
	}
	return false
}
