package testcluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

// readsAfterManyElections (TestSharedCluster) changes leaders many times
// with no write between, as the DuckLake run's leader kills every 20 s did
// once its committers all waited on reads, and then reads in new sessions.
// Each election adds entries that raft never hands to the state machine (a
// new leader's no-op; a barrier for the first strong read of a term). A
// new session reads at the commit index, and a node that judged how far
// behind it was by the state machine's own index found itself more than
// farBehind entries short of it, for ever: every session read was refused
// ("node is catching up") on every node, so nothing was read, nothing was
// written, and each kill made the gap wider (the 10,000-commit DuckLake
// run stalled that way after 45 minutes). The applied index routing judges
// by now counts the entries after the state machine's that it never sees.
func readsAfterManyElections(t *testing.T, c *testcluster.Cluster) {
	leader := c.WaitForLeader(t, 10*time.Second)
	lc := leader.Client(t)
	exec(t, lc, "CREATE TABLE elections_t AS SELECT 42 AS i")
	// 18 elections, each with a strong read (its term's barrier): 36
	// entries the state machine never sees, past routing's farBehind (32).
	for range 18 {
		leader = c.WaitForLeader(t, 10*time.Second)
		next := c.Others(leader)[0]
		if _, err := leader.TransferLeadership(next.ID); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, func() bool {
			st, err := next.Status()
			return err == nil && st.LeaderID == next.ID
		}, func() string { return next.ID + " did not take over" })
		sc := next.Client(t)
		exec(t, sc, "SET duckraft_consistency = 'strong'")
		if got := queryInts(t, sc, "SELECT i FROM elections_t"); got[0] != 42 {
			t.Fatalf("strong read on %s: %v", next.ID, got)
		}
	}
	for _, n := range c.Nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := n.Client(t).Exec(ctx, "SELECT i FROM elections_t")
		cancel()
		if err != nil {
			t.Errorf("a new session's read on %s after 18 elections without a write: %v", n.ID, err)
		}
	}
}
