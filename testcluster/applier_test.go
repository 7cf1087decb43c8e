package testcluster_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/outcome"
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
// hand. Now every write is acknowledged (sent again under its key when the
// leader's wait for its apply ran out on a loaded machine, as a user told
// unknown_outcome would), every node applies them all, and
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
		execKeyed(t, w, "CREATE OR REPLACE TABLE w AS SELECT list(range ORDER BY range) AS l FROM range(2500000)")
		execKeyed(t, w, "CREATE OR REPLACE TABLE v AS SELECT "+string(rune('0'+i))+" AS i")
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

// writeKey is the key an unknown_outcome error gives for a retry.
var writeKey = regexp.MustCompile(`SET duckraft_write_key = '([0-9a-f]+)'`)

// execKeyed runs a write as a user who was told its outcome is unknown
// would: a write that is in the log but not applied within the leader's
// wait (a loaded machine, an applier that yields memory) is answered
// unknown_outcome with a key, and sent again under that key until it is
// acknowledged; the key makes it apply once. Any other error fails t.
func execKeyed(t testing.TB, c *client.Conn, sql string) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		_, err := c.Exec(t.Context(), sql)
		if err == nil {
			return
		}
		var se *client.ServerError
		m := writeKey.FindStringSubmatch(err.Error())
		if !errors.As(err, &se) || se.Code != string(outcome.UnknownOutcome) || m == nil || attempt == 10 {
			t.Fatalf("%s (attempt %d): %v", sql, attempt, err)
		}
		t.Logf("%s: %v; sent again with its key", sql, err)
		if _, err := c.Exec(t.Context(), "SET duckraft_write_key = '"+m[1]+"'"); err != nil {
			t.Fatalf("set the write key: %v", err)
		}
	}
}
