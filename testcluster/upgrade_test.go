package testcluster_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/testcluster"
)

// TestRollingUpgrade upgrades a running 3-node cluster of the build in
// $DUCKRAFTD_OLD (make upgrade-test builds the last DuckDB 1.5.6 release)
// to this build, one node at a time (a follower, then leadership moved to
// it, then the others), while a client keeps writing through whichever
// node answers. No acknowledged write may be lost, a write that computes is
// refused while the versions are mixed, and every node must end with the
// same state hash.
func TestRollingUpgrade(t *testing.T) {
	old := os.Getenv("DUCKRAFTD_OLD")
	if old == "" {
		t.Skip("DUCKRAFTD_OLD is not set: run make upgrade-test")
	}
	c := testcluster.Start(t, 3, testcluster.Options{Binary: old})
	leader := c.WaitForLeader(t, 10*time.Second)
	exec(t, leader.Client(t), "CREATE TABLE up(k BIGINT PRIMARY KEY, via VARCHAR)")

	ctx, stop := context.WithCancel(context.Background())
	var mu sync.Mutex
	acked := map[int64]bool{}
	var attempts int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conn *client.Conn
		for k := int64(0); ctx.Err() == nil; k++ {
			if conn == nil {
				for _, n := range c.Nodes {
					cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					cn, err := client.Connect(cctx, "quack:"+n.QuackAddr, client.Options{Token: testcluster.Token, Generation: wire.Q1})
					cancel()
					if err == nil {
						conn = cn
						break
					}
				}
				if conn == nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
			}
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := conn.Exec(wctx, fmt.Sprintf("INSERT INTO up VALUES (%d, 'w')", k))
			cancel()
			mu.Lock()
			attempts = k + 1
			if err == nil {
				acked[k] = true
			}
			mu.Unlock()
			if err != nil {
				conn.Close()
				conn = nil
			}
		}
		if conn != nil {
			conn.Close()
		}
	}()

	upgrade := func(n *testcluster.Node) {
		t.Helper()
		time.Sleep(time.Second) // writes run on the mixed cluster
		n.RestartWith(t, testcluster.Binary(t))
		st, err := c.WaitForLeader(t, 20*time.Second).Status()
		if err != nil {
			t.Fatal(err)
		}
		// The upgraded node catches up with what the cluster committed.
		c.WaitForIndex(t, st.Commit, 60*time.Second)
	}
	// docs/upgrade.md's order: one follower, then leadership to it, so
	// that a leader of the new build decides while versions are mixed;
	// then the others.
	followers := c.Others(leader)
	first := followers[0]
	upgrade(first)
	if _, err := leader.TransferLeadership(first.ID); err != nil {
		t.Fatal(err)
	}
	if got := c.WaitForLeader(t, 20*time.Second); got != first {
		t.Fatalf("leadership went to %s, not the upgraded %s", got.ID, first.ID)
	}
	// The new leader refuses writes that compute while versions differ.
	const computed = "UPDATE up SET via = 'u' WHERE k // 1 = k"
	if _, err := first.Client(t).Exec(context.Background(), computed); err == nil || !strings.Contains(err.Error(), "different DuckDB versions") {
		t.Fatalf("%s on a mixed cluster: %v, want a refusal", computed, err)
	}
	upgrade(followers[1])
	upgrade(leader)
	time.Sleep(time.Second)
	stop()
	<-done
	exec(t, c.WaitForLeader(t, 20*time.Second).Client(t), computed)

	hash := c.WaitConverged(t, 60*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged during the upgrade")
	}
	for _, n := range c.Nodes {
		conn := n.Client(t)
		exec(t, conn, "SET duckraft_consistency = 'any'")
		got := map[int64]bool{}
		for _, k := range queryInts(t, conn, "SELECT k FROM up ORDER BY k") {
			got[k] = true
		}
		for k := range acked {
			if !got[k] {
				t.Errorf("%s lost acknowledged write %d", n.ID, k)
			}
		}
		if v := queryInts(t, conn, "SELECT count(*) FROM up WHERE k >= "+fmt.Sprint(attempts)); v[0] != 0 {
			t.Errorf("%s holds %d writes never sent", n.ID, v[0])
		}
		var version string
		rows := rowsOf(t, conn, "SELECT version()")
		version, _ = rows[0][0].(string)
		if version != "v2.0.0" {
			t.Errorf("%s runs DuckDB %s after the upgrade", n.ID, version)
		}
	}
	t.Logf("%d writes acknowledged of %d sent during the upgrade; state hash %s", len(acked), attempts, hash)
}
