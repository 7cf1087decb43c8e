package testcluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/testcluster"
)

// queryString returns the single string sql yields.
func queryString(ctx context.Context, c *client.Conn, sql string) (string, error) {
	rows, err := c.Query(ctx, sql)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	if !rows.Next() {
		return "", fmt.Errorf("%s: no row (%v)", sql, rows.Err())
	}
	v, err := rows.Values()
	if err != nil {
		return "", err
	}
	s, ok := v[0].(string)
	if !ok {
		return "", fmt.Errorf("%s: got %T", sql, v[0])
	}
	return s, nil
}

// TestRemoteReadsFollowSessionAndFrozenNodes checks two things a client of
// a router cannot see but would notice: its session settings hold on the
// replicas its reads run on, and a read whose node froze (SIGSTOP) moves to
// another node once gossip declares the frozen one dead, instead of waiting
// for the client's deadline. The node stays frozen until the test ends, so
// a read that waits on it fails at its 60 s deadline.
func TestRemoteReadsFollowSessionAndFrozenNodes(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Replicas: 1})
	c.WaitForMembers(t, 4, 30*time.Second)
	router := c.StartRouter(t)
	c.WaitForLeader(t, 10*time.Second)
	conn := router.Client(t)
	ctx := context.Background()
	exec(t, conn, "CREATE TABLE r(i INTEGER)")
	exec(t, conn, "INSERT INTO r VALUES (1), (2), (3)")

	t.Run("SettingsFollowReads", func(t *testing.T) {
		for _, set := range []string{"SET TimeZone = 'America/New_York'", "SET SESSION TimeZone = 'Asia/Tokyo'"} {
			exec(t, conn, set)
			want := map[string]string{"SET TimeZone = 'America/New_York'": "America/New_York"}[set]
			if want == "" {
				want = "Asia/Tokyo"
			}
			// The router holds no data: every read runs on a data node.
			for range 5 {
				got, err := queryString(ctx, conn, "SELECT current_setting('TimeZone') FROM r LIMIT 1")
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("after %q a read sees TimeZone %q", set, got)
				}
			}
		}
	})

	t.Run("FrozenNode", func(t *testing.T) {
		// Find the node the session's reads stick to and freeze it.
		before := reads(t, c)
		if _, err := queryInt(ctx, conn, "SELECT count(*) FROM r"); err != nil {
			t.Fatal(err)
		}
		after := reads(t, c)
		var home *testcluster.Node
		for _, n := range c.Nodes {
			if after[n.ID] > before[n.ID] {
				home = n
			}
		}
		if home == nil {
			t.Fatal("no node counted the read")
		}
		home.Pause()
		defer home.Resume()
		qctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		start := time.Now()
		got, err := queryInt(qctx, conn, "SELECT count(*) FROM r")
		took := time.Since(start)
		if err != nil || got != 3 {
			t.Fatalf("read with %s frozen: %d, %v after %v", home.ID, got, err, took)
		}
		t.Logf("read moved off frozen %s in %v", home.ID, took.Round(time.Millisecond))
	})
}

// clientCannotReconfigureNode (TestSharedCluster): a client cannot
// reconfigure a node: not turn on DuckDB's file logging (with DuckDB 1.5.6
// it halted that node's replication, and the process aborted when the
// client disconnected), not change a setting DuckDB applies to the whole
// node (a plain SET default_collation made that node's replication compare
// strings without case), not lock the node's configuration. Each is refused with an error that says so, and the
// replicas stay equal through a write the collation would have changed.
func clientCannotReconfigureNode(t *testing.T, c *testcluster.Cluster) {
	leader := c.WaitForLeader(t, 20*time.Second)
	via := c.Others(leader)[0]
	conn := via.Client(t)
	for _, tc := range []struct{ sql, want string }{
		{"CALL enable_logging(storage = 'file')", "reconfigures the node"},
		{"SET GLOBAL default_collation = 'nocase'", "reconfigures the node"},
		{"SET default_collation = 'nocase'", "this setting is refused"},
		{"SET SESSION default_order = 'desc'", "this setting is refused"},
		{"PRAGMA default_collation = 'nocase'", "this setting is refused"},
		{"SET memory_limit = '16MB'", "this setting is refused"},
		{"SET lock_configuration = true", "this setting is refused"},
		{"RESET default_collation", "this setting is refused"},
		{"PRAGMA enable_profiling", "this setting is refused"},
	} {
		if _, err := conn.Exec(t.Context(), tc.sql); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: %v, want a refusal saying %q", tc.sql, err, tc.want)
		}
	}
	// Nor can it break the applier's bookkeeping: before the applier
	// refused statements naming its schema, this halted every node.
	if _, err := conn.Exec(t.Context(), "DROP TABLE _duckraft.keys"); err == nil || !strings.Contains(err.Error(), "bookkeeping") {
		t.Fatalf("DROP TABLE _duckraft.keys: %v, want a refusal", err)
	}
	// The session settings are still allowed.
	if _, err := conn.Exec(t.Context(), "SET TimeZone = 'Asia/Tokyo'"); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		"CREATE TABLE coll(s VARCHAR)",
		"INSERT INTO coll VALUES ('a'), ('A'), ('b')",
		"CREATE TABLE coll_hits AS SELECT count(*) AS n FROM coll WHERE s = 'A'",
		"CREATE TABLE coll_order AS SELECT list(s ORDER BY s) AS l FROM coll",
	} {
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	conn.Close()
	w := leader.Client(t)
	if _, err := w.Exec(t.Context(), "CREATE TABLE after_refusal AS SELECT 1 AS i"); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(t, 30*time.Second)
}
