package testcluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/testcluster"
)

// duckDB2ClientOnCluster (TestSharedCluster) speaks to a follower of a
// 3-node cluster as a DuckDB 2.0 client does (quack-2.0.md §4): the ATTACH
// catalog loads, a CREATE TABLE … AS (the CREATE in a remote transaction,
// the rows in a SEND_DATA stream on the same connection, then COMMIT), an
// INSERT stream, a pushed-down query inside BEGIN TRANSACTION … COMMIT, and
// errors, which carry DuckDB's exception type.
func duckDB2ClientOnCluster(t *testing.T, c *testcluster.Cluster) {
	leader := c.WaitForLeader(t, 10*time.Second)
	follower := c.Others(leader)[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := client.Connect(ctx, "quack:"+follower.QuackAddr, client.Options{Token: testcluster.Token, Generation: wire.Q3})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "node", "testdata", "duckdb-2.0", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	schemaKeys := map[int64]bool{}
	for _, row := range rowsOf(t, conn, read("attach-schemas.sql")) {
		if strings.Contains(fmt.Sprint(row[2]), "_duckraft") {
			t.Fatalf("internal schema shown to an attaching client: %v", row)
		}
		key, _ := row[0].(int64)
		schemaKeys[key] = true
	}
	if len(schemaKeys) == 0 {
		t.Fatal("the schema load listed no schema")
	}

	// CREATE TABLE remote.ctas AS …: the table is created in the remote
	// transaction the client opened, and the rows arrive in it.
	exec(t, conn, "BEGIN TRANSACTION")
	exec(t, conn, "CREATE TABLE main.ctas(i INTEGER PRIMARY KEY, s VARCHAR)")
	chunk, err := wire.ChunkFromRows([]wire.LogicalType{{ID: wire.TypeInteger}, {ID: wire.TypeVarchar}},
		[][]any{{int32(1), "one"}, {int32(2), nil}})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Append(ctx, "main", "ctas", chunk); err != nil {
		t.Fatalf("insert stream inside the remote transaction: %v", err)
	}
	exec(t, conn, "COMMIT")
	// INSERT INTO remote.ctas SELECT …: a stream on its own.
	more, _ := wire.ChunkFromRows([]wire.LogicalType{{ID: wire.TypeInteger}, {ID: wire.TypeVarchar}}, [][]any{{int32(3), "three"}})
	if err := conn.Append(ctx, "main", "ctas", more); err != nil {
		t.Fatal(err)
	}

	// The table now shows in the table load, under a listed schema.
	found := false
	for _, row := range rowsOf(t, conn, read("attach-tables.sql")) {
		key, _ := row[0].(int64)
		if !schemaKeys[key] {
			t.Fatalf("%v names a schema key the schema load did not list", row)
		}
		found = found || strings.Contains(fmt.Sprint(row[1]), "ctas")
	}
	if !found {
		t.Fatal("the table load does not list ctas")
	}

	// A pushed-down query, as DuckDB 2.0 wraps it, is a read: no Raft
	// entry, however often it runs.
	c.WaitConverged(t, 10*time.Second)
	before, err := leader.Status()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		exec(t, conn, "SET duckraft_consistency = 'any'")
		exec(t, conn, "BEGIN TRANSACTION")
		if got := rowsOf(t, conn, "SELECT count_star() FROM ctas WHERE (s ~~ 'o%') OR (s IS NULL)"); len(got) != 1 || got[0][0] != int64(2) {
			t.Fatalf("pushed-down query: %v", got)
		}
		exec(t, conn, "COMMIT")
	}
	after, err := leader.Status()
	if err != nil {
		t.Fatal(err)
	}
	if after.Commit != before.Commit {
		t.Errorf("read-only transactions moved the leader's commit index from %d to %d", before.Commit, after.Commit)
	}

	// What DuckDB 2.0 renders when it pushes whole statements down: schema-
	// qualified functions and operators, count_star(), ~~, to_days, CTEs,
	// ANY (subquery); reads, then an UPDATE and an INSERT … RETURNING in the
	// remote transaction (quack-2.0.md D7–D9).
	for _, q := range []string{
		`SELECT "system".main."add"(i, 1) AS j FROM ctas WHERE (i = 1)`,
		`SELECT "substring"(s, 1, 2) FROM ctas WHERE (s ~~ 'o%')`,
		`SELECT (DATE '2020-01-01' + to_days(CAST(trunc(CAST(1 AS DOUBLE)) AS INTEGER))) AS d`,
		`WITH w AS (SELECT i FROM ctas) SELECT count_star() FROM w WHERE i = ANY(SELECT i FROM ctas WHERE (s IS NOT NULL))`,
	} {
		if got := rowsOf(t, conn, q); len(got) != 1 {
			t.Errorf("%s: %v", q, got)
		}
	}
	exec(t, conn, "BEGIN TRANSACTION")
	exec(t, conn, `UPDATE ctas SET s = "system".main.concat(s, '!') WHERE (i = 3)`)
	exec(t, conn, "COMMIT")
	// The rows a transaction writes exist only once it commits, so
	// RETURNING inside one is refused rather than answered empty; outside
	// one it returns them.
	exec(t, conn, "BEGIN TRANSACTION")
	var se *client.ServerError
	if _, err := conn.Exec(ctx, "INSERT INTO ctas VALUES (5, 'five') RETURNING i"); !errors.As(err, &se) || se.Type != "Not implemented" {
		t.Errorf("INSERT … RETURNING in a transaction: %v, want a Not implemented error", err)
	}
	exec(t, conn, "ROLLBACK")
	if got := rowsOf(t, conn, "INSERT INTO ctas VALUES (4, 'four') RETURNING i"); len(got) != 1 || got[0][0] != int32(4) {
		t.Errorf("INSERT … RETURNING: %v", got)
	}

	// Errors carry DuckDB's exception type, which a 2.0 client raises.
	for _, tc := range []struct{ sql, typ string }{
		{"SELECT * FROM no_such_table", "Catalog"},
		{"INSERT INTO ctas VALUES (1, 'again')", "Constraint"},
		{"SELECT 'x'::INTEGER", "Conversion"},
	} {
		_, err := conn.Exec(ctx, tc.sql)
		var se *client.ServerError
		if !errors.As(err, &se) || se.Type != tc.typ {
			t.Errorf("%s: %v (type %q), want a %s error", tc.sql, err, typeOf(se), tc.typ)
		}
	}

	// A read at consistency 'any' answers from the node's own state, which
	// may trail the leader's commit by an entry: wait until every node has
	// applied what the leader committed.
	committed, err := leader.Status()
	if err != nil {
		t.Fatal(err)
	}
	c.WaitForIndex(t, committed.Commit, 30*time.Second)
	for _, n := range c.Nodes {
		nc := n.Client(t)
		exec(t, nc, "SET duckraft_consistency = 'any'")
		if got := queryInts(t, nc, "SELECT count(*) FROM ctas WHERE s <> 'three!' OR i <> 3"); got[0] != 3 {
			t.Errorf("%s holds %d rows of ctas besides the updated one, want 3", n.ID, got[0])
		}
	}
}

func typeOf(se *client.ServerError) string {
	if se == nil {
		return ""
	}
	return se.Type
}
