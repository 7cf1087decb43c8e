package testcluster

import "testing"

// RestartJoining restarts n with --join through via's gossip address. The
// first node of a cluster starts without --join, so after a restart it would
// find the others only if they happened to gossip to it while it was dead.
func (n *Node) RestartJoining(t testing.TB, via *Node) {
	t.Helper()
	n.mu.Lock()
	n.join = via.GossipAddr
	n.mu.Unlock()
	n.Restart(t)
}
