package testcluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/testcluster"
)

// longScan computes for minutes before its first row; the view streams
// rows at once and for minutes after, so a split scan's shares answer their
// PREPAREs and keep their nodes busy.
const (
	longScan   = "SELECT sum(hash(i)) FROM range(100000000000) r(i)"
	slowView   = "CREATE VIEW endless AS SELECT i, hash(i) AS h FROM range(100000000000) r(i)"
	cancelWait = 15 * time.Second
)

// loads returns the statements running or streaming on each data node
// (nodeapi.Status.Load: DuckDB queries of reads, local or routed there).
func loads(t *testing.T, c *testcluster.Cluster) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, n := range c.Nodes {
		st, err := n.Status()
		if err != nil {
			t.Fatalf("status of %s: %v", n.ID, err)
		}
		out[n.ID] = st.Load
	}
	return out
}

// waitLoads waits until at least busy data nodes run a statement (busy > 0)
// or none does (busy == 0), and fails after within.
func waitLoads(t *testing.T, c *testcluster.Cluster, busy int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		l := loads(t, c)
		n := 0
		for _, v := range l {
			if v > 0 {
				n++
			}
		}
		if busy > 0 && n >= busy || busy == 0 && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v the data nodes' loads are %v, want %d busy", within, l, busy)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// nextAnswers checks that the session's next statement answers within
// cancelWait.
func nextAnswers(t *testing.T, conn *client.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cancelWait)
	defer cancel()
	start := time.Now()
	if _, err := queryInt(ctx, conn, "SELECT 42::BIGINT"); err != nil {
		t.Fatalf("the session's next statement, after %v: %v", time.Since(start), err)
	}
}

// cancelReachesTheNodeThatReads (TestSharedCluster): a client's cancel
// stops a read on the node that runs it, not only on the node the client
// talks to: through a router (every read routed to a data node) while the
// remote node computes the first rows, and a split scan's every share while
// they stream. The proof is each data node's load, its running DuckDB
// queries, back at zero, and the session's next statement answering at
// once. Before, the router answered the client and the data nodes computed
// on for minutes.
func cancelReachesTheNodeThatReads(t *testing.T, c *testcluster.Cluster) {
	router := c.StartRouter(t)
	exec(t, c.Nodes[0].Client(t), slowView)

	t.Run("RoutedRead", func(t *testing.T) {
		conn := router.Client(t)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			rows, err := conn.Query(ctx, longScan)
			if err == nil {
				rows.Close()
			}
			errc <- err
		}()
		waitLoads(t, c, 1, cancelWait)
		start := time.Now()
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled read: %v", err)
			}
		case <-time.After(cancelWait):
			t.Fatal("Query did not return after its context was cancelled")
		}
		waitLoads(t, c, 0, cancelWait)
		nextAnswers(t, conn)
		t.Logf("cancel to idle nodes and the next answer: %v", time.Since(start))
	})

	t.Run("SplitScan", func(t *testing.T) {
		conn := router.Client(t)
		exec(t, conn, "SET duckraft_split_scan = 3")
		rows, err := conn.Query(context.Background(), "SELECT * FROM endless")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		if !rows.Next() {
			t.Fatalf("no first row: %v", rows.Err())
		}
		waitLoads(t, c, 2, cancelWait)
		ctx, cancel := context.WithTimeout(context.Background(), cancelWait)
		defer cancel()
		if err := rows.Cancel(ctx); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		waitLoads(t, c, 0, cancelWait)
		nextAnswers(t, conn)
	})
}

// statementTimeout (TestSharedCluster) bounds reads with
// --statement-timeout (on a router) and the session setting
// duckraft_statement_timeout (on a router, whose reads run on data nodes,
// and on a data node reading locally): the read is interrupted where it
// runs and the client is told the limit and how to change it.
func statementTimeout(t *testing.T, c *testcluster.Cluster) {
	plain := c.StartRouter(t)
	bounded := c.StartRouter(t, "--statement-timeout", "2s")

	timesOut := func(t *testing.T, conn *client.Conn, limit string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*cancelWait)
		defer cancel()
		start := time.Now()
		_, err := queryInt(ctx, conn, longScan)
		if err == nil || ctx.Err() != nil {
			t.Fatalf("long read after %v: %v, want a statement timeout", time.Since(start), err)
		}
		for _, want := range []string{"statement timeout", limit, "duckraft_statement_timeout"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
		waitLoads(t, c, 0, cancelWait)
		nextAnswers(t, conn)
	}

	t.Run("DaemonFlag", func(t *testing.T) {
		timesOut(t, bounded.Client(t), "2s")
	})
	t.Run("SessionSetting", func(t *testing.T) {
		conn := plain.Client(t)
		exec(t, conn, "SET duckraft_statement_timeout = '1s'")
		timesOut(t, conn, "1s")
		exec(t, conn, "SET duckraft_statement_timeout = '0'")
		nextAnswers(t, conn)
	})
	t.Run("SessionSettingLocal", func(t *testing.T) {
		conn := c.Nodes[1].Client(t)
		exec(t, conn, "SET duckraft_consistency = 'any'")
		exec(t, conn, "SET duckraft_statement_timeout = '1500ms'")
		timesOut(t, conn, "1.5s")
	})
	t.Run("BadValue", func(t *testing.T) {
		conn := plain.Client(t)
		ctx, cancel := context.WithTimeout(context.Background(), cancelWait)
		defer cancel()
		_, err := conn.Exec(ctx, "SET duckraft_statement_timeout = 'soon'")
		if err == nil || !strings.Contains(err.Error(), "duckraft_statement_timeout") {
			t.Fatalf("bad value: %v", err)
		}
	})
}
