package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

// TestWriteWhileLeaderPaused pauses the leader (SIGSTOP) and at once writes
// through a follower: a new leader is elected within about a second, so
// the write must be acknowledged well before the old leader resumes.
//
// It is the regression test for bug 2 of docs/reliability.md: the follower
// forwarded the write to the frozen leader and waited on it until the
// leader resumed or the client gave up.
func TestWriteWhileLeaderPaused(t *testing.T) {
	if testing.Short() {
		t.Skip("pauses the leader of a real cluster")
	}
	const pause = 8 * time.Second
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitForLeader(t, 20*time.Second)
	var via *testcluster.Node
	for _, n := range c.Nodes {
		if n != leader {
			via = n
			break
		}
	}
	conn := via.Client(t)
	if err := exec(context.Background(), conn, "CREATE TABLE t(i INTEGER)"); err != nil {
		t.Fatal(err)
	}
	leader.Pause()
	resumed := time.AfterFunc(pause, leader.Resume)
	defer func() {
		if resumed.Stop() {
			leader.Resume()
		}
	}()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*pause)
	defer cancel()
	if _, err := conn.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatalf("write through %s while the leader %s is paused: %v", via.ID, leader.ID, err)
	}
	took := time.Since(start)
	t.Logf("write through %s acknowledged %v after pausing the leader %s", via.ID, took.Round(time.Millisecond), leader.ID)
	if took > pause/2 {
		t.Errorf("write took %v: it waited on the paused leader instead of the new one", took.Round(time.Millisecond))
	}
}
