package testcluster_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/testcluster"
)

func exec(t testing.TB, c *client.Conn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func queryInts(t testing.TB, c *client.Conn, sql string) []int64 {
	t.Helper()
	var out []int64
	for _, row := range rowsOf(t, c, sql) {
		switch x := row[0].(type) {
		case int64:
			out = append(out, x)
		case int32:
			out = append(out, int64(x))
		default:
			t.Fatalf("%s: got %T", sql, row[0])
		}
	}
	return out
}

// rowsOf returns every row of sql as Go values.
func rowsOf(t testing.TB, c *client.Conn, sql string) [][]any {
	t.Helper()
	rows, err := c.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%.60q: %v", sql, err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%.60q: %v", sql, err)
	}
	return out
}

// TestWritesOnAnyNodeReplicate writes through every node and reads every
// write back on every node; the nodes' state hashes agree. It runs in both
// modes.
func TestWritesOnAnyNodeReplicate(t *testing.T) {
	inBothModes(t, testcluster.Options{}, writesOnAnyNodeReplicate)
}

func writesOnAnyNodeReplicate(t *testing.T, opts testcluster.Options) {
	c := testcluster.Start(t, 3, opts)
	exec(t, c.Nodes[1].Client(t), "CREATE TABLE t(node VARCHAR, i INTEGER)")
	for _, n := range c.Nodes {
		conn := n.Client(t)
		for i := 0; i < 5; i++ {
			exec(t, conn, fmt.Sprintf("INSERT INTO t VALUES ('%s', %d)", n.ID, i))
		}
		// The session reads its own writes on the node it wrote through.
		if got := queryInts(t, conn, fmt.Sprintf("SELECT count(*) FROM t WHERE node = '%s'", n.ID)); got[0] != 5 {
			t.Fatalf("%s reads %d of its 5 writes", n.ID, got[0])
		}
	}
	c.WaitConverged(t, 10*time.Second)
	for _, n := range c.Nodes {
		conn := n.Client(t)
		exec(t, conn, "SET duckraft_consistency = 'any'")
		if got := queryInts(t, conn, "SELECT count(*) FROM t"); got[0] != 15 {
			t.Fatalf("%s holds %d rows, want 15", n.ID, got[0])
		}
	}
}

// deterministicFunctions (TestSharedCluster) replicates writes that use the
// clock, sequences and random values; every node ends up with the same
// data.
func deterministicFunctions(t *testing.T, c *testcluster.Cluster) {
	conn := c.Nodes[2].Client(t)
	for _, sql := range []string{
		"CREATE SEQUENCE fns_id",
		"CREATE TABLE fns(id BIGINT DEFAULT nextval('fns_id'), ts TIMESTAMPTZ, dt DATE, r DOUBLE, u UUID)",
		"INSERT INTO fns(ts, dt, r, u) VALUES (now(), current_date, 1.0, NULL)",
		"INSERT INTO fns SELECT 1000000 + range, current_timestamp, today(), random(), uuid() FROM range(1000)",
		"INSERT INTO fns(u, r, dt, ts, id) SELECT gen_random_uuid(), random(), current_date, now(), 2000000 + range FROM range(10)",
		// nextval over several row groups: the order it hands out values
		// must be the same on every node.
		"INSERT INTO fns(id, ts, dt, r, u) SELECT nextval('fns_id'), now(), current_date, 0.5, NULL FROM range(300000)",
		"UPDATE fns SET r = r + 1 WHERE id % 2 = 0",
		"DELETE FROM fns WHERE id % 7 = 0",
	} {
		exec(t, conn, sql)
	}
	c.WaitConverged(t, 10*time.Second)
	// A write that cannot be made deterministic is refused, not diverged.
	if _, err := conn.Exec(context.Background(), "UPDATE fns SET r = random()"); err == nil {
		t.Fatal("UPDATE … random() was accepted")
	}
}

// TestLeaderKillNoAcknowledgedWriteLost writes continuously through a
// follower while the leader is killed with SIGKILL: a new leader takes
// writes and every acknowledged write is on every survivor, exactly once.
// The killed node then restarts and catches up. How long the failover
// took is logged, not bounded: raft bounds no election, and the chaos
// runs measure it (docs/reliability.md).
func TestLeaderKillNoAcknowledgedWriteLost(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitForLeader(t, 10*time.Second)
	var via *testcluster.Node
	for _, n := range c.Nodes {
		if n != leader {
			via = n
			break
		}
	}
	setup := via.Client(t)
	exec(t, setup, "CREATE TABLE acked(id BIGINT)")

	var (
		mu      sync.Mutex
		acked   []int64
		lastAck atomic.Int64 // first acknowledgement of a write begun after the kill
		killed  atomic.Int64
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		next    atomic.Int64
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := client.Connect(context.Background(), "quack:"+via.QuackAddr, client.Options{Token: testcluster.Token})
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := next.Add(1)
				started := time.Now().UnixNano()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO acked VALUES (%d)", id))
				cancel()
				if err == nil {
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
					if started > killed.Load() {
						lastAck.CompareAndSwap(0, time.Now().UnixNano())
					}
				}
			}
		}()
	}
	killed.Store(1 << 62)
	time.Sleep(time.Second)
	killedAt := time.Now()
	killed.Store(killedAt.UnixNano())
	leader.Kill()
	// Wait for the first write acknowledged after the kill.
	deadline := killedAt.Add(30 * time.Second)
	for lastAck.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no write acknowledged within 30 s of killing the leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	failover := time.Duration(lastAck.Load() - killedAt.UnixNano())
	t.Logf("first write acknowledged %v after SIGKILL of the leader", failover)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	check := func(n *testcluster.Node) {
		t.Helper()
		conn := n.Client(t)
		got := queryInts(t, conn, "SELECT id FROM acked ORDER BY id")
		seen := map[int64]int{}
		for _, id := range got {
			seen[id]++
		}
		mu.Lock()
		defer mu.Unlock()
		for _, id := range acked {
			if seen[id] != 1 {
				t.Errorf("%s: acknowledged write %d present %d times", n.ID, id, seen[id])
			}
		}
		for id, k := range seen {
			if k > 1 {
				t.Errorf("%s: write %d applied %d times", n.ID, id, k)
			}
		}
	}
	c.WaitConverged(t, 15*time.Second)
	for _, n := range c.Nodes {
		if n.Running() {
			check(n)
		}
	}
	leader.Restart(t)
	c.WaitConverged(t, 30*time.Second)
	check(leader)
	mu.Lock()
	t.Logf("%d writes acknowledged", len(acked))
	mu.Unlock()
}

// TestLateJoinerCatchesUpFromSnapshot starts a node after the log has been
// compacted; it must install a snapshot and then replay the tail.
func TestLateJoinerCatchesUpFromSnapshot(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Args: []string{"--snapshot-threshold", "64", "--trailing-logs", "16", "--snapshot-interval", "200ms"}})
	conn := c.Nodes[0].Client(t)
	exec(t, conn, "CREATE TABLE big AS SELECT range AS i, 'row ' || range AS s FROM range(200000)")
	exec(t, conn, "CREATE VIEW v AS SELECT count(*) AS n FROM big")
	for i := 0; i < 300; i++ {
		exec(t, conn, fmt.Sprintf("INSERT INTO big VALUES (%d, 'extra')", 1_000_000+i))
	}
	c.WaitConverged(t, 10*time.Second)
	late := c.AddNode(t, true)
	c.WaitForMembers(t, 4, 30*time.Second)
	hash := c.WaitConverged(t, 60*time.Second)
	if !late.Running() {
		t.Fatal("late node died")
	}
	lc := late.Client(t)
	exec(t, lc, "SET duckraft_consistency = 'any'")
	if got := queryInts(t, lc, "SELECT n FROM v"); got[0] != 200300 {
		t.Fatalf("late node holds %d rows, want 200300", got[0])
	}
	if !strings.Contains(late.Log(), "restored snapshot") {
		t.Fatalf("late node caught up without installing a snapshot; log:\n%s", late.Log())
	}
	t.Logf("converged at state hash %s", hash)
}
