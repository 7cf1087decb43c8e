package testcluster_test

import (
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

// lostQuorumSaysSo (TestSharedCluster) kills two of three voters and writes
// to the one left. Before, the write hung 10.5 s and then said "not the
// leader", which sends a user looking for the leader; now it says that a
// quorum is missing and how far, within the write's bounded wait.
func lostQuorumSaysSo(t *testing.T, c *testcluster.Cluster) {
	leader := c.WaitForLeader(t, 20*time.Second)
	survivor := c.Others(leader)[0]
	conn := survivor.Client(t)
	if _, err := conn.Exec(t.Context(), "CREATE TABLE q(i INTEGER)"); err != nil {
		t.Fatal(err)
	}
	// The other follower dies first, then the leader: killed the other
	// way round, the two followers can elect one of themselves in between
	// (a survivor stands as soon as the dead leader's port refuses), and a
	// survivor elected so would take the write as leader without a quorum,
	// whose outcome is then truly unknown.
	for _, n := range c.Others(leader) {
		if n != survivor {
			n.Kill()
		}
	}
	leader.Kill()
	start := time.Now()
	_, err := conn.Exec(t.Context(), "INSERT INTO q VALUES (1)")
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "2 of 3 voters unreachable") || strings.Contains(err.Error(), "outcome") {
		t.Fatalf("write without a quorum: %v; want it to say that 2 of 3 voters are unreachable (and nothing of an unknown outcome: no leader ever had it)", err)
	}
	// The write waits for a leader for routing's LeaderWait (10 s), plus
	// a forwarded attempt's own bound; a minute is generous.
	if took > time.Minute {
		t.Fatalf("the refusal took %v", took)
	}
	t.Logf("refused after %v: %v", took, err)
}
