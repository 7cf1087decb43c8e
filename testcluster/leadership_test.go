package testcluster_test

import (
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/testcluster"
)

// stopLeaderTransfersLeadership (TestSharedCluster) stops the leader with
// SIGTERM: it hands leadership to another voter before it exits, so the
// others need no election timeout, and writes go on through the new leader.
func stopLeaderTransfersLeadership(t *testing.T, c *testcluster.Cluster) {
	// A starved machine can hold an election between the pick of a
	// follower and the ask, and make it the leader; or between the pick of
	// the leader and its stop, which then finds it a follower (its log says
	// so: it entered the follower state). Either try says nothing of a
	// leader's stop, and the pick is made again, the stopped node first
	// restarted.
	var old, via *testcluster.Node
	created := false
	for attempt := 1; ; attempt++ {
		if attempt > 5 {
			t.Fatalf("an election during each of %d tries", attempt-1)
		}
		old = c.WaitForLeader(t, 20*time.Second)
		via = c.Others(old)[0]
		before := term(t, via)
		_, err := via.TransferLeadership("")
		if after := term(t, via); after != before {
			t.Logf("an election while %s was asked to transfer (term %d to %d, %v): again", via.ID, before, after, err)
			continue
		}
		if nodeapi.CodeOf(err) != nodeapi.CodeNotLeader {
			t.Fatalf("transfer asked of follower %s: %v, want code %s", via.ID, err, nodeapi.CodeNotLeader)
		}
		if !created {
			conn := via.Client(t)
			exec(t, conn, "CREATE TABLE handover(i INTEGER)")
			exec(t, conn, "INSERT INTO handover VALUES (1)")
			created = true
		}
		// Only what it logs from now on counts: on the shared cluster, an
		// earlier test may have stopped a leader too.
		logged := len(old.Log())
		old.Stop()
		since := old.Log()[logged:]
		if strings.Contains(since, "transferred leadership") {
			break
		}
		if !strings.Contains(since, "entering follower state") {
			t.Fatalf("the stopped leader did not hand over leadership; its log ends:\n%s", lastLines(old.Log(), 20))
		}
		t.Logf("%s lost leadership before its stop: again", old.ID)
		old.Restart(t)
		c.WaitForVoters(t, 3, 30*time.Second)
	}
	now := c.WaitForLeader(t, 10*time.Second)
	if now == old {
		t.Fatalf("stopped node %s still leads", old.ID)
	}
	exec(t, via.Client(t), "INSERT INTO handover VALUES (2)")
	old.Restart(t)
	c.WaitConverged(t, 30*time.Second)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
