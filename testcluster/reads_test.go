package testcluster_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/testcluster"
)

// reads returns every running node's read counter.
func reads(t testing.TB, c *testcluster.Cluster) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		st, err := n.Status()
		if err != nil {
			t.Fatalf("status of %s: %v", n.ID, err)
		}
		out[n.ID] = st.Reads
	}
	return out
}

// TestReadsSpreadOverReplicas runs on 3 voters and 2 replicas formed with
// --join, plus a router: sessions read their own writes wherever they
// connect, replicas serve most session reads, a split scan equals the
// leader's scan while writes continue, and the router answers catalog loads.
func TestReadsSpreadOverReplicas(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Replicas: 2})
	router := c.StartRouter(t)
	leader := c.WaitForLeader(t, 10*time.Second)
	exec(t, c.Nodes[0].Client(t), "CREATE TABLE w(writer INTEGER, seq INTEGER)")

	t.Run("ReadYourWrites", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		var conns []*client.Conn
		for _, n := range c.Nodes {
			conns = append(conns, n.Client(t))
		}
		conns = append(conns, router.Client(t))
		for w, conn := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for i := 1; i <= 15; i++ {
					if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO w VALUES (%d, %d)", w, i)); err != nil {
						errs <- fmt.Errorf("writer %d: %w", w, err)
						return
					}
					got, err := queryInt(ctx, conn, fmt.Sprintf("SELECT count(*) FROM w WHERE writer = %d", w))
					if err != nil || got != int64(i) {
						errs <- fmt.Errorf("writer %d reads %d of its %d writes (err %v)", w, got, i, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("ReplicasServeSessionReads", func(t *testing.T) {
		st, err := leader.Status()
		if err != nil {
			t.Fatal(err)
		}
		c.WaitForIndex(t, st.Commit, 10*time.Second)
		time.Sleep(time.Second) // gossip carries the replicas' applied index
		before := reads(t, c)
		var wg sync.WaitGroup
		var failed atomic.Int64
		for _, n := range c.Nodes {
			for range 2 {
				conn := n.Client(t)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 25 {
						if _, err := queryInt(context.Background(), conn, "SELECT count(*) FROM w"); err != nil {
							failed.Add(1)
						}
					}
				}()
			}
		}
		wg.Wait()
		after := reads(t, c)
		var total, onReplicas uint64
		for _, n := range c.Nodes {
			d := after[n.ID] - before[n.ID]
			total += d
			if n.Replica {
				onReplicas += d
			}
			t.Logf("%s (replica %v): %d reads", n.ID, n.Replica, d)
		}
		if failed.Load() > 0 {
			t.Fatalf("%d reads failed", failed.Load())
		}
		if share := float64(onReplicas) / float64(total); share < 0.8 {
			t.Fatalf("replicas served %d of %d session reads (%.0f%%), want at least 80%%", onReplicas, total, 100*share)
		}
	})

	t.Run("SplitScanWhileWriting", func(t *testing.T) {
		// The scanning session creates the table: it reads its own write.
		scan := router.Client(t)
		exec(t, scan, "CREATE TABLE s AS SELECT range::BIGINT AS id, 'row ' || range AS v FROM range(1, 20001)")
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := c.Nodes[1].Client(t)
			for id := 20001; ; id++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := w.Exec(context.Background(), fmt.Sprintf("INSERT INTO s VALUES (%d, 'row %d')", id, id)); err != nil {
					t.Errorf("writer: %v", err)
					return
				}
			}
		}()
		exec(t, scan, "SET duckraft_split_scan = 3")
		before := reads(t, c)
		const scans = 8
		for range scans {
			ids := queryInts(t, scan, "SELECT * FROM s")
			checkPrefix(t, ids)
		}
		close(stop)
		wg.Wait()
		after := reads(t, c)
		var shares uint64
		for id := range after {
			shares += after[id] - before[id]
		}
		t.Logf("%d scans ran as %d reads", scans, shares)
		if shares < 2*scans {
			t.Errorf("%d scans ran as only %d reads: most were not split", scans, shares)
		}
		// Writes stopped: the split scan equals the leader's scan.
		strong := leader.Client(t)
		exec(t, strong, "SET duckraft_consistency = 'strong'")
		want := queryInts(t, strong, "SELECT * FROM s")
		got := queryInts(t, scan, "SELECT * FROM s")
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("split scan has %d rows, the leader's scan %d", len(got), len(want))
		}
	})

	t.Run("RouterAnswersCatalogLoads", func(t *testing.T) {
		const tables = "\nSELECT schema_name, sql, 'table'\nFROM duckdb_tables()\nUNION ALL\nSELECT schema_name, view_name, 'view'\nFROM duckdb_views()\n\t"
		rows, err := router.Client(t).Query(context.Background(), tables)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var names []string
		for rows.Next() {
			v, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, fmt.Sprint(v[0], v[1]))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(names) != 2 {
			t.Fatalf("catalog through the router lists %q, want the tables w and s", names)
		}
	})
}

// checkPrefix fails unless ids are exactly 1..n: the table as of one log
// index of a writer that inserts ids in order.
func checkPrefix(t testing.TB, ids []int64) {
	t.Helper()
	slices.Sort(ids)
	for i, id := range ids {
		if id != int64(i+1) {
			t.Fatalf("split scan of %d rows is not one index's state: row %d has id %d", len(ids), i, id)
		}
	}
}

// queryInt returns the single integer sql yields.
func queryInt(ctx context.Context, c *client.Conn, sql string) (int64, error) {
	rows, err := c.Query(ctx, sql)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	if !rows.Next() {
		return 0, fmt.Errorf("%s: no row (%v)", sql, rows.Err())
	}
	v, err := rows.Values()
	if err != nil {
		return 0, err
	}
	n, ok := v[0].(int64)
	if !ok {
		return 0, fmt.Errorf("%s: got %T", sql, v[0])
	}
	return n, nil
}

// TestReadsThroughLeaderKill kills the leader under a read-heavy load: reads
// keep succeeding (they retry on other nodes), writes resume, the dead
// voter is reaped after --reap-after and a standby promoted so that the
// cluster keeps 3 voters, and the killed node rejoins on restart. The
// longest pause in writes is logged, not bounded: raft bounds no election,
// and the chaos runs measure failovers (docs/reliability.md).
func TestReadsThroughLeaderKill(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Replicas: 2, Args: []string{"--reap-after", "3s"}})
	// A voter-role node joining a full cluster waits as a non-voter: the
	// standby promoted when a voter is reaped.
	c.AddNode(t, false)
	c.WaitForMembers(t, 6, 30*time.Second)
	router := c.StartRouter(t)
	leader := c.WaitForLeader(t, 10*time.Second)
	var follower *testcluster.Node
	for _, n := range c.Nodes {
		if n != leader && !n.Replica {
			follower = n
			break
		}
	}
	exec(t, follower.Client(t), "CREATE TABLE k(id BIGINT)")
	exec(t, follower.Client(t), "INSERT INTO k SELECT range FROM range(1000)")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var okReads, failedReads atomic.Int64
	var readErr atomic.Value
	reader := func(conn *client.Conn) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := queryInt(ctx, conn, "SELECT count(*) FROM k")
			cancel()
			if err != nil {
				failedReads.Add(1)
				readErr.Store(err.Error())
			} else {
				okReads.Add(1)
			}
		}
	}
	for _, n := range c.Nodes {
		if n == leader {
			continue
		}
		wg.Add(1)
		go reader(n.Client(t))
	}
	for range 2 {
		wg.Add(1)
		go reader(router.Client(t))
	}
	var mu sync.Mutex
	var acked []time.Time
	wg.Add(1)
	go func() {
		defer wg.Done()
		w := follower.Client(t)
		for id := 1000; ; id++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			_, err := w.Exec(ctx, fmt.Sprintf("INSERT INTO k VALUES (%d)", id))
			cancel()
			if err == nil {
				mu.Lock()
				acked = append(acked, time.Now())
				mu.Unlock()
			}
		}
	}()

	time.Sleep(time.Second)
	killed := time.Now()
	leader.Kill()
	// The load runs through the failover: for 4 s, and on until a write
	// begun after the kill is acknowledged (30 s at most).
	resumed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) > 0 && acked[len(acked)-1].After(killed)
	}
	for deadline := killed.Add(30 * time.Second); time.Since(killed) < 4*time.Second || !resumed() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("reads: %d ok, %d failed", okReads.Load(), failedReads.Load())
	if failedReads.Load() > 0 {
		t.Errorf("%d reads failed across the leader kill, last: %v", failedReads.Load(), readErr.Load())
	}
	mu.Lock()
	var gap time.Duration
	for i := 1; i < len(acked); i++ {
		if acked[i].After(killed) {
			from := acked[i-1]
			if from.Before(killed) {
				from = killed
			}
			gap = max(gap, acked[i].Sub(from))
		}
	}
	mu.Unlock()
	t.Logf("longest pause in acknowledged writes after the kill: %v", gap)
	if !resumed() {
		t.Errorf("no write acknowledged within %v of the leader kill", time.Since(killed).Round(time.Second))
	}

	// The dead voter is reaped and the standby promoted.
	deadline := time.Now().Add(30 * time.Second)
	for {
		l := c.WaitForLeader(t, 10*time.Second)
		st, err := l.Status()
		voters, deadIn := 0, false
		for _, m := range st.Members {
			if m.Voter {
				voters++
			}
			if m.ID == leader.ID && m.InRaft {
				deadIn = true
			}
		}
		if err == nil && voters == 3 && !deadIn {
			t.Logf("%s reaped, 3 voters again %v after the kill", leader.ID, time.Since(killed).Round(100*time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the kill: %d voters, %s still in Raft: %v (%+v)", voters, leader.ID, deadIn, st.Members)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Restarted, it rejoins and catches up.
	for _, n := range c.Nodes {
		if n != leader && n.Running() {
			leader.RestartJoining(t, n)
			break
		}
	}
	c.WaitForMembers(t, 6, 30*time.Second)
	c.WaitConverged(t, 30*time.Second)
}

// A restarted cluster with no write since answers a new client's first
// read at once. Its last committed entry is the new term's no-op, which the
// applied index never reaches; new sessions, which start at the commit
// index, used to wait for it and fail with "no node can serve a session
// read" (an attaching DuckDB client starts with reads).
func TestReadsRightAfterRestart(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	n := c.WaitForLeader(t, 20*time.Second)
	exec(t, n.Client(t), "CREATE TABLE r AS SELECT 7 AS i")
	n.Stop()
	n.Restart(t)
	c.WaitForLeader(t, 20*time.Second)
	if got := queryInts(t, n.Client(t), "SELECT i FROM r"); len(got) != 1 || got[0] != 7 {
		t.Fatalf("read after restart: %v, want [7]", got)
	}
}
