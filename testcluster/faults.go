package testcluster

// What Partition cuts: Raft traffic only (log replication, votes,
// snapshots), which runs through the per-node proxies of a cluster started
// with Options.Proxy. Gossip (memberlist over UDP and TCP), writes that
// followers forward to the leader, reads forwarded to the leader, and
// clients' Quack connections all stay connected: a partitioned node still
// looks alive to gossip and still takes client requests, which is what
// exercises the routing layer's handling of stale leaders.

// Partition splits the Raft network: nodes in the same group reach each
// other, nodes in different groups do not, and a node in no group is cut
// off from all others. Connections that cross groups are closed, and new
// ones are closed as soon as the proxy learns who dials. It panics if the
// cluster was started without Options.Proxy, a mistake in the test.
func (c *Cluster) Partition(groups ...[]*Node) {
	if c.net == nil {
		panic("testcluster: Partition needs a cluster started with Options.Proxy")
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
	c.net.partition(ids, all)
}

// Isolate cuts n off from every other node's Raft traffic.
func (c *Cluster) Isolate(n *Node) {
	var rest []*Node
	for _, m := range c.Nodes {
		if m != n {
			rest = append(rest, m)
		}
	}
	c.Partition([]*Node{n}, rest)
}

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
