package chaos

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/testcluster"
)

// TestStrongReadAfterLeaderKill writes through the leader, kills it with
// SIGKILL right after the acknowledgement, and strong-reads through the
// survivors: once a new leader is elected a strong read must answer, and
// one that began after the acknowledgement must see the write.
//
// It is the regression test for bug 1 of docs/reliability.md: with no
// write after the election, strong reads failed until one came (the read
// index was the new leader's no-op entry), and a new leader's commit index
// could lag the previous term's acknowledged writes.
func TestStrongReadAfterLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills leaders of a real cluster")
	}
	c := testcluster.Start(t, 3, testcluster.Options{})
	setup := c.WaitForLeader(t, 20*time.Second).Client(t)
	for _, sql := range []string{"CREATE TABLE kv(k INTEGER PRIMARY KEY, v BIGINT)", "INSERT INTO kv VALUES (0, 0)"} {
		if err := exec(context.Background(), setup, sql); err != nil {
			t.Fatal(err)
		}
	}
	for round := int64(1); round <= 8; round++ {
		leader := c.WaitForLeader(t, 20*time.Second)
		c.WaitConverged(t, 30*time.Second)
		strongReadAfterKill(t, c, leader, round)
		leader.Restart(t)
	}
}

// strongReadAfterKill runs one round: readers on every follower, a write
// of round through leader, a SIGKILL of leader, and reads until one sees
// the write or 30 s pass (raft bounds no election; a failover takes about
// a second).
func strongReadAfterKill(t *testing.T, c *testcluster.Cluster, leader *testcluster.Node, round int64) {
	t.Helper()
	w := leader.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		acked   atomic.Int64 // when the write was acknowledged, ns since the epoch
		fresh   atomic.Bool
		lastErr atomic.Value
		wg      sync.WaitGroup
	)
	acked.Store(1 << 62)
	for _, n := range c.Nodes {
		if n == leader {
			continue
		}
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn, err := client.Connect(ctx, "quack:"+n.QuackAddr, client.Options{Token: testcluster.Token, Generation: wire.Q1})
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				if err := exec(ctx, conn, "SET duckraft_consistency = 'strong'"); err != nil {
					t.Error(err)
					return
				}
				for ctx.Err() == nil && !fresh.Load() {
					start := time.Now().UnixNano()
					row, err := queryRow(ctx, conn, "SELECT v FROM kv WHERE k = 0")
					switch {
					case err != nil:
						if start > acked.Load() {
							lastErr.Store(fmt.Sprintf("%s: %v", n.ID, err))
						}
						time.Sleep(time.Millisecond)
					case start <= acked.Load():
					case row[0] == round:
						fresh.Store(true)
					default:
						t.Errorf("round %d: strong read through %s began %v after the write of %d was acknowledged and returned %d",
							round, n.ID, time.Duration(start-acked.Load()), round, row[0])
					}
				}
			}()
		}
	}
	time.Sleep(200 * time.Millisecond) // readers connected
	if err := exec(ctx, w, fmt.Sprintf("UPDATE kv SET v = %d WHERE k = 0", round)); err != nil {
		t.Fatalf("round %d: write: %v", round, err)
	}
	acked.Store(time.Now().UnixNano())
	leader.Kill()
	wg.Wait()
	if !fresh.Load() {
		t.Fatalf("round %d: no strong read saw the write within 30 s of killing the leader; last error: %v", round, lastErr.Load())
	}
}
