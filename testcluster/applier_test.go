package testcluster_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

// TestHeavyWriteIsRefusedNotHalting sends, through a follower, a write
// that needs more memory than the nodes have. Before the leader proved
// heavy writes, it entered the log and halted every node's applier, and a
// restart with the same limit halted again. Now it is refused with an
// error that says it was not applied, and the cluster goes on.
func TestHeavyWriteIsRefusedNotHalting(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Args: []string{"--memory-limit", "300MB"}})
	leader := c.WaitForLeader(t, 20*time.Second)
	follower := c.Others(leader)[0]
	conn := follower.Client(t)
	ctx := t.Context()
	start := time.Now()
	_, err := conn.Exec(ctx, "CREATE TABLE oom AS SELECT list(range ORDER BY range) AS l FROM range(60000000)")
	t.Logf("refused after %v: %v", time.Since(start), err)
	if err == nil || !strings.Contains(err.Error(), "was not applied") || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("heavy write: %v; want a refusal that says it was not applied for lack of memory", err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE after(i INTEGER)"); err != nil {
		t.Fatalf("write after the refusal: %v", err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO after VALUES (1)"); err != nil {
		t.Fatalf("write after the refusal: %v", err)
	}
	c.WaitConverged(t, 30*time.Second)
	for _, n := range c.Nodes {
		if _, err := n.Client(t).Exec(ctx, "SELECT * FROM oom"); err == nil {
			t.Errorf("%s has the refused table", n.ID)
		}
		if strings.Contains(n.Log(), "FSM halted") || strings.Contains(n.Log(), "apply failed") {
			t.Errorf("%s's applier failed:\n%s", n.ID, n.Log())
		}
	}
}

// TestReadsCannotHaltTheApplier runs memory-hungry reads in several
// sessions on every node while the leader replicates writes that need
// memory too, under a small --memory-limit. Before reads yielded to the
// applier, its out-of-memory failures halted the nodes' FSMs (three in 300
// ms) and the writes after them failed until each node was restarted by
// hand. Now every write is acknowledged, every node applies them all, and
// the reads that were in the way fail with an error that says why.
func TestReadsCannotHaltTheApplier(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Args: []string{"--memory-limit", "300MB"}})
	leader := c.WaitForLeader(t, 20*time.Second)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var wg sync.WaitGroup
	var reads, yielded atomic.Int64
	for _, n := range c.Nodes {
		for range 2 {
			conn := n.Client(t)
			wg.Go(func() {
				for ctx.Err() == nil {
					_, err := conn.Exec(ctx, "SELECT len(list(range ORDER BY range)) FROM range(1500000)")
					reads.Add(1)
					if err != nil && strings.Contains(err.Error(), "applying replicated writes needed the memory") {
						yielded.Add(1)
					}
					if err != nil {
						// Refused while the applier holds the memory.
						time.Sleep(50 * time.Millisecond)
					}
				}
			})
		}
	}
	w := leader.Client(t)
	for i := range 3 {
		if _, err := w.Exec(t.Context(), "CREATE OR REPLACE TABLE w AS SELECT list(range ORDER BY range) AS l FROM range(2500000)"); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if _, err := w.Exec(t.Context(), "CREATE OR REPLACE TABLE v AS SELECT "+string(rune('0'+i))+" AS i"); err != nil {
			t.Fatalf("small write %d: %v", i, err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				os.WriteFile("/tmp/applier-"+n.ID+".log", []byte(n.Log()), 0o644)
			}
		}
	})
	stop()
	wg.Wait()
	c.WaitConverged(t, 2*time.Minute)
	t.Logf("%d reads, %d of them yielded to the applier", reads.Load(), yielded.Load())
	for _, n := range c.Nodes {
		if strings.Contains(n.Log(), "FSM halted") {
			t.Errorf("%s's applier halted:\n%s", n.ID, n.Log())
		}
	}
}
