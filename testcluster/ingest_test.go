package testcluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/testcluster"
)

// ingestChunk is rows [from, from+n) of the table ingest tests load.
func ingestChunk(t *testing.T, from, n int) *wire.DataChunk {
	t.Helper()
	rows := make([][]any, n)
	for i := range rows {
		v := int64(from + i)
		rows[i] = []any{v, fmt.Sprintf("row %d %s", v, strings.Repeat("x", int(v%17))), float64(v) * 1.5}
	}
	c, err := wire.ChunkFromRows([]wire.LogicalType{{ID: wire.TypeBigInt}, {ID: wire.TypeVarchar}, {ID: wire.TypeDouble}}, rows)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// stagedTransactions is what n's /metrics says of the transactions staged
// in its database.
func stagedTransactions(t *testing.T, n *testcluster.Node) float64 {
	t.Helper()
	v, err := n.Metric(fmt.Sprintf("duckraft_staged_transactions{node=%q}", n.ID))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestStagedIngest: a transaction that loads more rows than --stage-bytes
// (CREATE TABLE, then appends, as DuckDB's CREATE TABLE … AS sends them)
// reaches the log in bounded Stage entries before its COMMIT, in both
// generations: Q1 through a follower, which forwards its Stage entries one
// at a time, Q3 on the leader, which keeps several in flight. The rows stay invisible until COMMIT, then
// every node holds all of them; a rolled-back or abandoned transaction
// leaves no staged rows on any node.
func TestStagedIngest(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Args: []string{"--stage-bytes", "65536"}})
	leader := c.WaitForLeader(t, 10*time.Second)
	follower := c.Others(leader)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const chunks, rowsPer = 40, 2048
	for i, gen := range []wire.Generation{wire.Q1, wire.Q3} {
		table := fmt.Sprintf("ingest_%v", gen)
		via := []*testcluster.Node{follower, leader}[i]
		conn, err := client.Connect(ctx, "quack:"+via.QuackAddr, client.Options{Token: testcluster.Token, Generation: gen})
		if err != nil {
			t.Fatal(err)
		}
		exec(t, conn, "BEGIN TRANSACTION")
		exec(t, conn, "CREATE TABLE "+table+" (i BIGINT, s VARCHAR, d DOUBLE)")
		before, err := leader.Status()
		if err != nil {
			t.Fatal(err)
		}
		for k := range chunks {
			if err := conn.Append(ctx, "main", table, ingestChunk(t, k*rowsPer, rowsPer)); err != nil {
				t.Fatalf("%v: append %d: %v", gen, k, err)
			}
		}
		// The rows went ahead into the log, invisible to clients.
		mid, err := leader.Status()
		if err != nil {
			t.Fatal(err)
		}
		if mid.Applied < before.Applied+5 {
			t.Fatalf("%v: the leader applied %d entries during the transaction, want its rows staged in several", gen, mid.Applied-before.Applied)
		}
		if got := stagedTransactions(t, leader); got != 1 {
			t.Fatalf("%v: %v transactions staged on the leader, want 1", gen, got)
		}
		if n, err := queryCount(follower.Client(t), "SELECT count(*) FROM duckdb_tables() WHERE table_name = '"+table+"'"); err != nil || n != 0 {
			t.Fatalf("%v: the table is visible before COMMIT (%d, %v)", gen, n, err)
		}
		exec(t, conn, "COMMIT")
		want := int64(chunks * rowsPer)
		for _, n := range c.Nodes {
			waitCount(t, n, table, want)
		}
		waitNoStages(t, c)

		// A rolled-back transaction's staged rows are dropped everywhere.
		exec(t, conn, "BEGIN TRANSACTION")
		for k := range chunks / 2 {
			if err := conn.Append(ctx, "main", table, ingestChunk(t, k*rowsPer, rowsPer)); err != nil {
				t.Fatal(err)
			}
		}
		if got := stagedTransactions(t, leader); got != 1 {
			t.Fatalf("%v: %v transactions staged before ROLLBACK, want 1", gen, got)
		}
		exec(t, conn, "ROLLBACK")
		waitNoStages(t, c)

		// So are those of a client that went away mid-transaction.
		exec(t, conn, "BEGIN TRANSACTION")
		for k := range chunks / 2 {
			if err := conn.Append(ctx, "main", table, ingestChunk(t, k*rowsPer, rowsPer)); err != nil {
				t.Fatal(err)
			}
		}
		conn.Close()
		waitNoStages(t, c)
		for _, n := range c.Nodes {
			waitCount(t, n, table, want)
		}
	}
	c.WaitConverged(t, time.Minute)
}

// queryCount runs a query of one BIGINT.
func queryCount(conn *client.Conn, query string) (int64, error) {
	rows, err := conn.Query(context.Background(), query)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	if !rows.Next() {
		return 0, fmt.Errorf("%s: no row: %v", query, rows.Err())
	}
	v, err := rows.Values()
	if err != nil {
		return 0, err
	}
	n, ok := v[0].(int64)
	if !ok {
		return 0, fmt.Errorf("%s: %T, want int64", query, v[0])
	}
	return n, nil
}

// waitNoStages waits until no node holds staged rows.
func waitNoStages(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, n := range c.Nodes {
		for stagedTransactions(t, n) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s still holds staged rows", n.ID)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// waitCount waits until table holds want rows on n itself (consistency
// any: the node the client is connected to), and fails on more.
func waitCount(t *testing.T, n *testcluster.Node, table string, want int64) {
	t.Helper()
	conn := n.Client(t)
	exec(t, conn, "SET duckraft_consistency = 'any'")
	deadline := time.Now().Add(time.Minute)
	for {
		// The table does not exist on a node that has not applied the
		// COMMIT yet.
		got, err := queryCount(conn, "SELECT count(*) FROM "+table)
		switch {
		case err == nil && got == want:
			return
		case err == nil && got > want:
			t.Fatalf("%s holds %d rows of %s, want %d", n.ID, got, table, want)
		case time.Now().After(deadline):
			t.Fatalf("%s holds %d rows of %s after a minute (%v), want %d", n.ID, got, table, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStagedIngestSurvivesLeaderKill: the leader is killed with SIGKILL in
// the middle of a staged transaction. The node the client is connected to
// holds the transaction and resends the Stage entry whose outcome it did
// not learn, with its key, to the new leader: the COMMIT applies every row
// once, on every node.
func TestStagedIngestSurvivesLeaderKill(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Args: []string{"--stage-bytes", "65536"}})
	leader := c.WaitForLeader(t, 10*time.Second)
	via := c.Others(leader)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := client.Connect(ctx, "quack:"+via.QuackAddr, client.Options{Token: testcluster.Token, Generation: wire.Q1})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const chunks, rowsPer = 40, 2048
	exec(t, conn, "BEGIN TRANSACTION")
	exec(t, conn, "CREATE TABLE survivors (i BIGINT, s VARCHAR, d DOUBLE)")
	for k := range chunks {
		if k == chunks/2 {
			leader.Kill()
		}
		if err := conn.Append(ctx, "main", "survivors", ingestChunk(t, k*rowsPer, rowsPer)); err != nil {
			t.Fatalf("append %d: %v", k, err)
		}
	}
	exec(t, conn, "COMMIT")
	for _, n := range c.Others(leader) {
		waitCount(t, n, "survivors", chunks*rowsPer)
	}
	if n, err := queryCount(conn, "SELECT count(DISTINCT i) FROM survivors"); err != nil || n != chunks*rowsPer {
		t.Fatalf("%d distinct rows (%v), want %d", n, err, chunks*rowsPer)
	}
	leader.Restart(t)
	waitCount(t, leader, "survivors", chunks*rowsPer)
	waitNoStages(t, c)
	c.WaitConverged(t, time.Minute)
}

// TestAbandonedStagesSwept: the node holding a staged transaction is
// killed, so nobody unstages it; the leader drops its rows on every node
// once they have been idle for --stage-timeout.
func TestAbandonedStagesSwept(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Args: []string{"--stage-bytes", "65536", "--stage-timeout", "2s"}})
	leader := c.WaitForLeader(t, 10*time.Second)
	via := c.Others(leader)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := client.Connect(ctx, "quack:"+via.QuackAddr, client.Options{Token: testcluster.Token, Generation: wire.Q1})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exec(t, conn, "BEGIN TRANSACTION")
	exec(t, conn, "CREATE TABLE abandoned (i BIGINT, s VARCHAR, d DOUBLE)")
	for k := range 20 {
		if err := conn.Append(ctx, "main", "abandoned", ingestChunk(t, k*2048, 2048)); err != nil {
			t.Fatal(err)
		}
	}
	if got := stagedTransactions(t, leader); got != 1 {
		t.Fatalf("%v transactions staged, want 1", got)
	}
	via.Kill()
	for _, n := range c.Others(via) {
		deadline := time.Now().Add(time.Minute)
		for stagedTransactions(t, n) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s still holds the abandoned transaction's rows a minute after its node died", n.ID)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestStagedIngestOutlivesCompaction: a staged transaction's rows stay in
// the Raft log until its COMMIT, while the log is compacted under it
// (snapshots every 16 entries, 4 kept after). One follower, down since
// before the transaction, comes back behind the compacted log and gets a
// snapshot that carries the rows staged so far; then the other is killed
// with SIGKILL in the middle of the transaction and restarted, and reads
// its rows back from its own log. The COMMIT inserts every row once on
// every node, and the nodes converge.
func TestStagedIngestOutlivesCompaction(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Args: []string{"--stage-bytes", "65536",
		"--snapshot-threshold", "16", "--trailing-logs", "4", "--snapshot-interval", "100ms"}})
	leader := c.WaitForLeader(t, 10*time.Second)
	behind, killed := c.Others(leader)[0], c.Others(leader)[1]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := client.Connect(ctx, "quack:"+leader.QuackAddr, client.Options{Token: testcluster.Token, Generation: wire.Q1})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	snapshots := func() float64 {
		t.Helper()
		v, err := leader.Metric(fmt.Sprintf("duckraft_snapshot_duration_seconds_count{node=%q}", leader.ID))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	waitSnapshot := func(after float64) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for snapshots() <= after {
			if time.Now().After(deadline) {
				t.Fatal("the leader took no snapshot within a minute")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	behind.Kill()
	exec(t, conn, "CREATE TABLE before (i INTEGER)")
	for i := range 40 {
		exec(t, conn, fmt.Sprintf("INSERT INTO before VALUES (%d)", i))
	}
	const chunks, rowsPer = 60, 2048
	exec(t, conn, "BEGIN TRANSACTION")
	exec(t, conn, "CREATE TABLE compacted (i BIGINT, s VARCHAR, d DOUBLE)")
	for k := range chunks {
		switch k {
		case 20:
			// The log is compacted past the entries the stopped
			// follower lacks, but not past the staged rows.
			waitSnapshot(snapshots())
			behind.Restart(t)
			waitApplied(t, behind, leader)
		case 40:
			killed.Kill()
		case 50:
			waitSnapshot(snapshots())
			killed.Restart(t)
		}
		if err := conn.Append(ctx, "main", "compacted", ingestChunk(t, k*rowsPer, rowsPer)); err != nil {
			t.Fatalf("append %d: %v", k, err)
		}
	}
	exec(t, conn, "COMMIT")
	for _, n := range c.Nodes {
		waitCount(t, n, "compacted", chunks*rowsPer)
	}
	if n, err := queryCount(conn, "SELECT count(DISTINCT i) FROM compacted"); err != nil || n != chunks*rowsPer {
		t.Fatalf("%d distinct rows (%v), want %d", n, err, chunks*rowsPer)
	}
	waitNoStages(t, c)
	c.WaitConverged(t, time.Minute)
}

// waitApplied waits until n has applied everything leader had applied when
// it was called.
func waitApplied(t *testing.T, n, leader *testcluster.Node) {
	t.Helper()
	metric := func(of *testcluster.Node) float64 {
		t.Helper()
		v, err := of.Metric(fmt.Sprintf("duckraft_raft_applied_index{node=%q}", of.ID))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	want := metric(leader)
	deadline := time.Now().Add(time.Minute)
	for metric(n) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s has not applied index %v within a minute", n.ID, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
