package testcluster

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// What Isolate and IsolateSilently cut: Raft traffic only (log
// replication, votes, snapshots), which runs through the per-node proxies of
// a cluster started with Options.Proxy. Gossip (memberlist over UDP and
// TCP), writes that followers forward to the leader, reads forwarded to the
// leader, and clients' Quack connections all stay connected: a partitioned
// node still looks alive to gossip and still takes client requests, which is
// what exercises the routing layer's handling of stale leaders.

// partition splits the Raft network: nodes in the same group reach each
// other, nodes in different groups do not, and a node in no group is cut
// off from all others. Unless silent, connections that cross groups are
// closed, and new ones are closed as soon as the proxy learns who dials.
// Silent, links that cross groups stay open and carry nothing, new ones are
// accepted and never answered, and nobody sees a connection error, only
// timeouts, as when a switch drops packets; after Heal the held bytes are
// delivered, as TCP would retransmit them. One difference from a real
// blackhole: a dial across it connects (the proxy accepts) instead of timing
// out. It panics if the cluster was started without Options.Proxy, a
// mistake in the test.
func (c *Cluster) partition(silent bool, groups [][]*Node) {
	if c.net == nil {
		panic("testcluster: a partition needs a cluster started with Options.Proxy")
	}
	ids := make([][]string, len(groups))
	for i, g := range groups {
		for _, n := range g {
			ids[i] = append(ids[i], n.ID)
		}
	}
	var all []string
	for _, n := range c.Nodes {
		all = append(all, n.ID)
	}
	c.net.partition(ids, all, silent)
}

// Isolate cuts n off from every other node's Raft traffic: its links are
// closed, and so are new ones.
func (c *Cluster) Isolate(n *Node) { c.partition(false, c.alone(n)) }

// IsolateSilently blackholes n's Raft traffic to and from every other node.
func (c *Cluster) IsolateSilently(n *Node) { c.partition(true, c.alone(n)) }

// alone returns the groups that put n alone and the other nodes together.
func (c *Cluster) alone(n *Node) [][]*Node { return [][]*Node{{n}, c.Others(n)} }

// Heal ends any partition: new connections go through again (Raft
// reconnects on its own).
func (c *Cluster) Heal() {
	if c.net != nil {
		c.net.heal()
	}
}

// LinkStats returns what the Raft proxies did so far; zero without
// Options.Proxy.
func (c *Cluster) LinkStats() LinkStats {
	if c.net == nil {
		return LinkStats{}
	}
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	return c.net.stats
}

// Paused reports whether n is stopped with SIGSTOP.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// The faults below need the node to run in-process (Options.InProcess):
// they act inside the daemon, where a process would need root-only or
// preload tooling (a delaying disk, libfaketime). Each lasts until it is
// set back to zero, across restarts.

// SlowLogWrites makes every Raft log write on n take d longer, as on a disk
// whose fsyncs stall: a leader acknowledges no write before its own log
// write returns, a follower answers replication only after its own. Zero
// ends the fault.
func (n *Node) SlowLogWrites(t testing.TB, d time.Duration) {
	t.Helper()
	n.inProcessOnly(t, "SlowLogWrites")
	n.faults.logDelay.Store(int64(d))
}

// JumpClock moves n's clock by d (negative: back in time) on top of any
// earlier jump. The clock it moves is the one a leader stamps statements
// with: now(), current_date and the like, which every node then applies
// as the leader's values. Raft's and gossip's timers keep real time.
func (n *Node) JumpClock(t testing.TB, d time.Duration) {
	t.Helper()
	n.inProcessOnly(t, "JumpClock")
	n.faults.clockSkew.Add(int64(d))
}

func (n *Node) inProcessOnly(t testing.TB, op string) {
	t.Helper()
	if !n.c.opts.InProcess {
		t.Fatalf("testcluster: %s needs a cluster started with Options.InProcess", op)
	}
}

// faults are an in-process node's fault settings, which its daemon's hooks
// read on every use.
type faults struct {
	logDelay  atomic.Int64 // nanoseconds added to each Raft log write
	clockSkew atomic.Int64 // nanoseconds added to the statement clock
}

// wrapLogStore is the daemon's daemon.Config.WrapLogStore.
func (f *faults) wrapLogStore(s raft.LogStore) raft.LogStore {
	return slowLogStore{LogStore: s, delay: &f.logDelay}
}

// now is the daemon's daemon.Config.Now.
func (f *faults) now() time.Time {
	return time.Now().Add(time.Duration(f.clockSkew.Load()))
}

// slowLogStore delays raft's log writes by delay.
type slowLogStore struct {
	raft.LogStore
	delay *atomic.Int64
}

func (s slowLogStore) StoreLog(l *raft.Log) error {
	time.Sleep(time.Duration(s.delay.Load()))
	return s.LogStore.StoreLog(l)
}

func (s slowLogStore) StoreLogs(logs []*raft.Log) error {
	time.Sleep(time.Duration(s.delay.Load()))
	return s.LogStore.StoreLogs(logs)
}
