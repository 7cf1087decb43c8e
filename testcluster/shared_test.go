package testcluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

// sharedTests need of their cluster only that it is three healthy voters
// of duckraftd processes started with no extra flag. Each writes only to
// tables, views, macros and sequences of its own names (and refuses to
// create none that another creates), and leaves every node running and
// idle, but the last two: the one that stops the leader restarts it, and
// the one that kills two nodes must stay last. A test that judges the
// members gossip knows cannot be one of them: the routers the cancel tests
// start stay in gossip, dead, after their test (TestStatusPageInChromium
// counts three members).
var sharedTests = []struct {
	name string
	run  func(*testing.T, *testcluster.Cluster)
}{
	{"ClientTokenCannotForward", clientTokenCannotForward},
	{"ClientCannotReconfigureNode", clientCannotReconfigureNode},
	{"ClockMacrosRefused", clockMacrosRefused},
	{"DivergentWritesRefused", divergentWritesRefused},
	{"AttachedDuckDBClientOnCluster", attachedDuckDBClientOnCluster},
	{"DuckDB2ClientOnCluster", duckDB2ClientOnCluster},
	{"DuckDB2TypesOnCluster", duckDB2TypesOnCluster},
	{"CancelReachesTheNodeThatReads", cancelReachesTheNodeThatReads},
	{"StatementTimeout", statementTimeout},
	{"OutsiderOnRaftPort", outsiderOnRaftPort},
	{"TokenHolderIsNoMember", tokenHolderIsNoMember},
	{"DeterministicFunctions", deterministicFunctions},
	{"ReadsAfterManyElections", readsAfterManyElections},
	{"StopLeaderTransfersLeadership", stopLeaderTransfersLeadership},
	{"LostQuorumSaysSo", lostQuorumSaysSo},
}

// TestSharedCluster runs sharedTests one after another on one 3-node
// cluster: starting and stopping three duckraftd processes and waiting
// for their election costs each test seconds on a quiet machine, and more
// on a loaded one.
//
// One test's failure does not carry into the next: before each, the
// shared cluster must be healthy (every node running, a leader with three
// voters, equal state hashes at one index). Once a test failed, or the
// cluster is not healthy, every later test starts a cluster of its own,
// and says why.
func TestSharedCluster(t *testing.T) {
	shared := testcluster.Start(t, 3, testcluster.Options{})
	var unshared string // why the later tests run on clusters of their own
	previous := "the cluster's start"
	for _, tc := range sharedTests {
		passed := t.Run(tc.name, func(t *testing.T) {
			if unshared == "" {
				if err := healthy(shared, 30*time.Second); err != nil {
					unshared = fmt.Sprintf("after %s the shared cluster is not healthy: %v", previous, err)
				}
			}
			c := shared
			if unshared != "" {
				t.Logf("on a cluster of its own: %s", unshared)
				c = testcluster.Start(t, 3, testcluster.Options{})
			}
			tc.run(t, c)
		})
		if !passed && unshared == "" {
			unshared = tc.name + " failed on the shared cluster"
		}
		previous = tc.name
	}
}

// healthy waits up to within for every node of c to run, for a leader
// whose Raft configuration holds them all as voters, and for every node
// to report the same state hash at the same applied index; it returns
// what is still missing after that.
func healthy(c *testcluster.Cluster, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := health(c)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// health is healthy's one look.
func health(c *testcluster.Cluster) error {
	for _, n := range c.Nodes {
		if !n.Running() {
			return fmt.Errorf("%s is not running", n.ID)
		}
	}
	l := c.Leader()
	if l == nil {
		return fmt.Errorf("no leader")
	}
	st, err := l.Status()
	if err != nil {
		return err
	}
	voters := 0
	for _, m := range st.Members {
		if m.Voter {
			voters++
		}
	}
	if voters != len(c.Nodes) {
		return fmt.Errorf("leader %s counts %d voters, want %d", l.ID, voters, len(c.Nodes))
	}
	var idx uint64
	var hash string
	for i, n := range c.Nodes {
		ni, nh, err := n.StateHash()
		if err != nil {
			return err
		}
		if i > 0 && (ni != idx || nh != hash) {
			return fmt.Errorf("%s's state hash %s at index %d, %s's %s at %d", c.Nodes[0].ID, hash, idx, n.ID, nh, ni)
		}
		idx, hash = ni, nh
	}
	return nil
}
