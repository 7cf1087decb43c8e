// Package balance chooses among the data nodes that can serve a read: it
// ranks them by cost, in units of one in-flight statement (gossiped load,
// this node's own requests to each, the node's role and its apply lag), and
// leaves out for a while those that just failed at the transport level.
package balance

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
	// Engine is the DuckDB version the node embeds, "" from a build that
	// did not gossip it (DuckDB 1.5.6).
	Engine string
	// Staging is set when the node applies wal's staging entries
	// (cluster.Meta.Staging).
	Staging bool
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
	// RehomeSlack is how much cheaper another node must be before a
	// session leaves the node it reads from (its cache stays warm there).
	RehomeSlack = 4
	// SuspectFor is how long a node that failed at the transport level is
	// left out of reads: gossip takes about a second to declare it dead.
	SuspectFor = 2 * time.Second
)

// Balancer tracks what this node adds to each peer's load and which peers
// recently failed.
type Balancer struct {
	mu       sync.Mutex
	inflight map[string]*atomic.Int64
	suspects map[string]time.Time
}

// New returns a Balancer that knows of no load and no failure.
func New() *Balancer {
	return &Balancer{inflight: map[string]*atomic.Int64{}, suspects: map[string]time.Time{}}
}

// Counter is this node's count of requests in flight to peer id.
func (b *Balancer) Counter(id string) *atomic.Int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.inflight[id]
	if c == nil {
		c = new(atomic.Int64)
		b.inflight[id] = c
	}
	return c
}

// Suspect leaves peer id out for SuspectFor.
func (b *Balancer) Suspect(id string) {
	b.mu.Lock()
	b.suspects[id] = time.Now().Add(SuspectFor)
	b.mu.Unlock()
}

// Suspected reports whether peer id failed within SuspectFor before now.
func (b *Balancer) Suspected(id string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	until, ok := b.suspects[id]
	if ok && now.After(until) {
		delete(b.suspects, id)
		return false
	}
	return ok
}

// Cost ranks p for a read from node self, given the furthest applied
// index known: lower is better.
func (b *Balancer) Cost(p Peer, self string, maxApplied uint64) int64 {
	c := int64(p.Load) + b.Counter(p.ID).Load()
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

// Cheapest returns the lowest-cost peer and its cost, choosing among
// equals at random so that sessions starting together spread out.
func (b *Balancer) Cheapest(peers []Peer, self string, maxApplied uint64) (Peer, int64) {
	var best Peer
	bestCost, ties := int64(0), 0
	for _, p := range peers {
		c := b.Cost(p, self, maxApplied)
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
