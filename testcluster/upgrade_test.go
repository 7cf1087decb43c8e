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

// snapshotCatalog builds a catalog of every kind a snapshot recreates, with
// rows of several types, on the node conn talks to.
var snapshotCatalog = []string{
	"CREATE SCHEMA app",
	"CREATE TYPE app.mood AS ENUM ('sad', 'ok', 'happy')",
	"CREATE SEQUENCE app.ids START 100",
	"CREATE MACRO app.twice(x) AS x * 2",
	`CREATE TABLE app.events(id BIGINT PRIMARY KEY DEFAULT nextval('app.ids'), ts TIMESTAMP, mood app.mood,
		tags VARCHAR[], pos STRUCT(x DOUBLE, y DOUBLE), amount DECIMAL(12, 2), note VARCHAR,
		doubled BIGINT GENERATED ALWAYS AS (id * 2))`,
	"CREATE INDEX events_at ON app.events(ts)",
	"CREATE VIEW app.happy AS SELECT id, note FROM app.events WHERE mood = 'happy'",
	`INSERT INTO app.events(ts, mood, tags, pos, amount, note)
		SELECT TIMESTAMP '2026-01-01' + INTERVAL (i) MINUTE, (['sad', 'ok', 'happy'])[i % 3 + 1],
		[i::VARCHAR, 'x'], {'x': i / 3, 'y': -i}, i * 1.25, CASE WHEN i % 7 = 0 THEN NULL ELSE 'note ' || i END
		FROM range(500) r(i)`,
}

// snapshotState is what a snapshot must carry over, read on one node: every
// row of the table, the view and the sequence's next value, as text, so
// nodes of different DuckDB versions compare (the state hash of two
// versions need not agree).
func snapshotState(t *testing.T, n *testcluster.Node) string {
	t.Helper()
	conn := n.Client(t)
	exec(t, conn, "SET duckraft_consistency = 'any'")
	var b strings.Builder
	for _, q := range []string{
		"SELECT id, ts::VARCHAR, mood::VARCHAR, tags::VARCHAR, pos::VARCHAR, amount::VARCHAR, note, doubled FROM app.events ORDER BY id",
		"SELECT * FROM app.happy ORDER BY id",
		"SELECT sequence_name, last_value FROM duckdb_sequences()",
		"SELECT index_name FROM duckdb_indexes()",
		"SELECT app.twice(21)",
		"SELECT count(*) FROM up",
	} {
		for _, r := range rowsOf(t, conn, q) {
			fmt.Fprintln(&b, r...)
		}
	}
	return b.String()
}

// TestSnapshotAcrossVersions installs snapshots between builds of different
// DuckDB versions, as a rolling upgrade may: a node of this build with an
// empty data directory catches up from a snapshot the old build's leader
// took, and, once a node of this build leads, a node of the old build with
// an empty data directory catches up from the snapshot that leader took,
// which compresses nothing while a server of the configuration gossips no
// reader of compressed frames. Both must end with the leader's rows, view,
// sequence and index.
func TestSnapshotAcrossVersions(t *testing.T) {
	old := os.Getenv("DUCKRAFTD_OLD")
	if old == "" {
		t.Skip("DUCKRAFTD_OLD is not set: run make upgrade-test")
	}
	// Small thresholds make every node snapshot and compact its log
	// often, so a node that lost its data directory gets a snapshot.
	c := testcluster.Start(t, 3, testcluster.Options{Binary: old,
		Args: []string{"--snapshot-threshold", "32", "--trailing-logs", "8", "--snapshot-interval", "200ms"}})
	leader := c.WaitForLeader(t, 10*time.Second)
	conn := leader.Client(t)
	for _, q := range snapshotCatalog {
		exec(t, conn, q)
	}
	exec(t, conn, "CREATE TABLE up(k BIGINT PRIMARY KEY)")
	// writes appends literal rows, each its own log entry, through the
	// leader, so the log grows past the snapshot threshold.
	next := 0
	writes := func(n int) {
		t.Helper()
		conn := c.WaitForLeader(t, 20*time.Second).Client(t)
		for range n {
			exec(t, conn, fmt.Sprintf("INSERT INTO up VALUES (%d)", next))
			next++
		}
	}
	waitSnapshot := func(n *testcluster.Node, before int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for strings.Count(n.Log(), "snapshot persisted") <= before {
			if time.Now().After(deadline) {
				t.Fatalf("%s took no snapshot", n.ID)
			}
			writes(8)
		}
	}
	// rebuild stops n, empties its data directory and starts it from
	// binary: it has nothing but what the leader sends it.
	rebuild := func(n *testcluster.Node, binary string) {
		t.Helper()
		restores := strings.Count(n.Log(), "restored snapshot")
		n.Stop()
		if err := os.RemoveAll(n.Dir); err != nil {
			t.Fatal(err)
		}
		n.RestartWith(t, binary)
		st, err := c.WaitForLeader(t, 20*time.Second).Status()
		if err != nil {
			t.Fatal(err)
		}
		c.WaitForIndex(t, st.Commit, 60*time.Second)
		if strings.Count(n.Log(), "restored snapshot") == restores {
			t.Fatalf("%s caught up without a snapshot", n.ID)
		}
	}

	// The old build's snapshot, restored by this build.
	waitSnapshot(leader, 0)
	writes(40)
	followers := c.Others(leader)
	rebuild(followers[0], testcluster.Binary(t))
	if got, want := snapshotState(t, followers[0]), snapshotState(t, leader); got != want {
		t.Fatalf("%s (this build) restored from the old build's snapshot:\n%s\nthe old leader has:\n%s", followers[0].ID, got, want)
	}

	// This build's snapshot, restored by the old build.
	if _, err := leader.TransferLeadership(followers[0].ID); err != nil {
		t.Fatal(err)
	}
	newLeader := c.WaitForLeader(t, 20*time.Second)
	if newLeader != followers[0] {
		t.Fatalf("leadership went to %s, not %s", newLeader.ID, followers[0].ID)
	}
	// The old build cannot read compressed frames (kind Z) and says so
	// by gossiping no flag for them: this build's leader writes its
	// snapshots plain while an old node is in the configuration.
	waitSnapshot(newLeader, strings.Count(newLeader.Log(), "snapshot persisted"))
	writes(40)
	behind := followers[1]
	rebuild(behind, old)
	if strings.Contains(behind.Log(), "unknown frame kind 'Z'") {
		t.Fatalf("%s (old build) was sent a compressed snapshot:\n%s", behind.ID, lastLines(behind.Log(), 20))
	}
	if got, want := snapshotState(t, behind), snapshotState(t, newLeader); got != want {
		t.Fatalf("%s (old build) restored from this build's snapshot:\n%s\nthe leader has:\n%s", behind.ID, got, want)
	}
}
