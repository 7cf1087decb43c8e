package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

// TestWriteWhileLeaderPaused pauses the leader (SIGSTOP) and at once writes
// through a follower: the others elect a new leader, so the write must be
// acknowledged before the old leader resumes. The pause is far longer than
// an election (about a second), and only a failing run waits it out.
//
// It is the regression test for bug 2 of docs/reliability.md: the follower
// forwarded the write to the frozen leader and waited on it until the
// leader resumed or the client gave up.
func TestWriteWhileLeaderPaused(t *testing.T) {
	if testing.Short() {
		t.Skip("pauses the leader of a real cluster")
	}
	const pause = 30 * time.Second
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
	// The resume has not fired: the leader was still paused when the
	// write was acknowledged.
	paused := resumed.Stop()
	if paused {
		leader.Resume()
	}
	t.Logf("write through %s acknowledged %v after pausing the leader %s", via.ID, took.Round(time.Millisecond), leader.ID)
	if !paused {
		t.Errorf("write acknowledged %v after pausing the leader, once its %v pause had ended: it waited on the paused leader instead of the new one",
			took.Round(time.Millisecond), pause)
	}
}
