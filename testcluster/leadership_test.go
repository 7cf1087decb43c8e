package testcluster_test

import (
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/testcluster"
)

// TestStopLeaderTransfersLeadership stops the leader with SIGTERM: it
// hands leadership to another voter before it exits, so the others need
// no election timeout, and writes go on through the new leader.
func TestStopLeaderTransfersLeadership(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	old := c.WaitForLeader(t, 20*time.Second)
	via := c.Others(old)[0]
	conn := via.Client(t)
	exec(t, conn, "CREATE TABLE s(i INTEGER)")
	exec(t, conn, "INSERT INTO s VALUES (1)")

	if _, err := via.TransferLeadership(""); nodeapi.CodeOf(err) != nodeapi.CodeNotLeader {
		t.Fatalf("transfer asked of a follower: %v, want code %s", err, nodeapi.CodeNotLeader)
	}

	old.Stop()
	if !strings.Contains(old.Log(), "transferred leadership") {
		t.Fatalf("the stopped leader did not hand over leadership; its log ends:\n%s", lastLines(old.Log(), 20))
	}
	now := c.WaitForLeader(t, 10*time.Second)
	if now == old {
		t.Fatalf("stopped node %s still leads", old.ID)
	}
	exec(t, conn, "INSERT INTO s VALUES (2)")
	old.Restart(t)
	c.WaitConverged(t, 30*time.Second)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
