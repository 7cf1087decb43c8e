package routing

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Peer is a live data node that can serve reads, as gossip describes it.
type Peer struct {
	ID        string
	QuackAddr string
	// Replica is set for non-voting read replicas, which take reads
	// before voters so that voters keep their capacity for the log.
	Replica bool
	Leader  bool
	// Applied is the node's applied index as last gossiped: at most its
	// real one, since applied indexes only grow.
	Applied uint64
	// Load is the node's in-flight statements as last gossiped.
	Load uint64
}

// Directory finds the cluster's members (from gossip metadata).
type Directory interface {
	QuackAddr(id string) (string, bool)
	// Peers lists the live data nodes, this one included; routers, which
	// hold no data, are not peers.
	Peers() []Peer
}

// Costs that order candidate nodes for a read, in units of one in-flight
// statement: replicas first, then followers, the leader last; this node
// gets a small bonus because a local read saves a hop.
const (
	followerCost = 3
	leaderCost   = 6
	selfBonus    = 1
	// lagUnit entries of apply lag cost as much as one in-flight statement.
	lagUnit = 100
	// rehomeSlack is how much cheaper another node must be before a
	// session leaves the node it reads from (its cache stays warm there).
	rehomeSlack = 4
	// suspectFor is how long a node that failed at the transport level is
	// left out of reads: gossip takes about a second to declare it dead.
	suspectFor = 2 * time.Second
)

// balancer tracks what this node adds to each peer's load and which peers
// recently failed.
type balancer struct {
	mu       sync.Mutex
	inflight map[string]*atomic.Int64
	suspects map[string]time.Time
}

func newBalancer() *balancer {
	return &balancer{inflight: map[string]*atomic.Int64{}, suspects: map[string]time.Time{}}
}

func (b *balancer) counter(id string) *atomic.Int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.inflight[id]
	if c == nil {
		c = new(atomic.Int64)
		b.inflight[id] = c
	}
	return c
}

func (b *balancer) suspect(id string) {
	b.mu.Lock()
	b.suspects[id] = time.Now().Add(suspectFor)
	b.mu.Unlock()
}

func (b *balancer) suspected(id string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	until, ok := b.suspects[id]
	if ok && now.After(until) {
		delete(b.suspects, id)
		return false
	}
	return ok
}

// cost ranks p for a read: lower is better.
func (b *balancer) cost(p Peer, self string, maxApplied uint64) int64 {
	c := int64(p.Load) + b.counter(p.ID).Load()
	switch {
	case p.Leader:
		c += leaderCost
	case !p.Replica:
		c += followerCost
	}
	if p.ID == self {
		c -= selfBonus
	}
	return c + int64((maxApplied-min(maxApplied, p.Applied))/lagUnit)
}

// cheapest returns the lowest-cost peer, choosing among equals at random
// so that sessions starting together spread out.
func (b *balancer) cheapest(peers []Peer, self string, maxApplied uint64) (Peer, int64) {
	var best Peer
	bestCost, ties := int64(0), 0
	for _, p := range peers {
		c := b.cost(p, self, maxApplied)
		switch {
		case ties == 0 || c < bestCost:
			best, bestCost, ties = p, c, 1
		case c == bestCost:
			ties++
			if rand.IntN(ties) == 0 {
				best = p
			}
		}
	}
	return best, bestCost
}
