package testcluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/testcluster"
)

// TestNestedSchemasOnCluster: DuckDB 2.0 nests schemas, and a 2.0 client
// inserts into a nested schema's table by its path. Through a follower of a
// 3-node cluster: DDL in nested schemas (two of one name), an insert
// stream, a trigger; a node that lost its data directory catches up from a
// snapshot and holds the same rows; the ATTACH schema load lists the
// nested schemas by path; what a snapshot could not restore is refused.
func TestNestedSchemasOnCluster(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{
		Args: []string{"--snapshot-threshold", "32", "--trailing-logs", "8", "--snapshot-interval", "200ms"}})
	leader := c.WaitForLeader(t, 10*time.Second)
	follower := c.Others(leader)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := client.Connect(ctx, "quack:"+follower.QuackAddr, client.Options{Token: testcluster.Token, Generation: wire.Q3})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{
		"CREATE SCHEMA a", "CREATE SCHEMA a.b", "CREATE SCHEMA x", "CREATE SCHEMA x.b",
		"CREATE SEQUENCE a.b.ids START 100",
		"CREATE TABLE a.b.t(id BIGINT DEFAULT nextval('a.b.ids'), note VARCHAR)",
		"CREATE TABLE x.b.t(id BIGINT, note VARCHAR)",
		"CREATE TABLE audit(what VARCHAR)",
		"CREATE TRIGGER audit_t AFTER INSERT ON a.b.t FOR EACH ROW INSERT INTO audit VALUES (NEW.note)",
		"INSERT INTO a.b.t(note) VALUES ('sql')",
	} {
		exec(t, conn, q)
	}
	chunk, err := wire.ChunkFromRows([]wire.LogicalType{{ID: wire.TypeBigInt}, {ID: wire.TypeVarchar}},
		[][]any{{int64(1), "stream 1"}, {int64(2), "stream 2"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.AppendPath(ctx, []string{"a", "b"}, "t", chunk); err != nil {
		t.Fatalf("insert stream into a.b.t: %v", err)
	}
	if err := conn.AppendPath(ctx, []string{"x", "b"}, "t", chunk); err != nil {
		t.Fatalf("insert stream into x.b.t: %v", err)
	}

	// The schema load names the nested schemas by their paths.
	b, err := os.ReadFile(filepath.Join("..", "node", "testdata", "duckdb-2.0", "attach-schemas.sql"))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, row := range rowsOf(t, conn, string(b)) {
		paths = append(paths, fmt.Sprint(row[2]))
	}
	for _, want := range []string{"[a b]", "[x b]"} {
		if !slices.Contains(paths, want) {
			t.Errorf("the schema load lists %v, not %s", paths, want)
		}
	}

	// What a snapshot could not restore is refused, with DuckDB's type.
	for _, q := range []string{"CREATE MACRO a.b.m(x) AS x", "CREATE SCHEMA main.inmain"} {
		_, err := conn.Exec(ctx, q)
		var se *client.ServerError
		if !errors.As(err, &se) || se.Type != "Not implemented" {
			t.Errorf("%s: %v, want a Not implemented error", q, err)
		}
	}

	// Enough entries that the log is compacted past a lost node's start.
	for i := range 80 {
		exec(t, conn, fmt.Sprintf("INSERT INTO x.b.t VALUES (%d, 'filler')", 1000+i))
	}
	lost := c.Others(leader)[1]
	lost.Stop()
	if err := os.RemoveAll(lost.Dir); err != nil {
		t.Fatal(err)
	}
	lost.Restart(t)
	st, err := c.WaitForLeader(t, 20*time.Second).Status()
	if err != nil {
		t.Fatal(err)
	}
	c.WaitForIndex(t, st.Commit, time.Minute)
	if !strings.Contains(lost.Log(), "restored snapshot") {
		t.Fatalf("%s caught up without a snapshot", lost.ID)
	}
	c.WaitConverged(t, time.Minute)
	rc := lost.Client(t)
	exec(t, rc, "SET duckraft_consistency = 'any'")
	for q, want := range map[string]int64{
		"SELECT count(*) FROM a.b.t":                                    3,
		"SELECT count(*) FROM x.b.t":                                    82,
		"SELECT count(*) FROM audit":                                    3,
		"SELECT max(id) FROM a.b.t WHERE note = 'sql'":                  100,
		"SELECT count(*) FROM duckdb_triggers()":                        1,
		"SELECT count(*) FROM duckdb_schemas() WHERE schema_name = 'b'": 2,
	} {
		if got := queryInts(t, rc, q); len(got) != 1 || got[0] != want {
			t.Errorf("%s on %s: %v, want %d", q, lost.ID, got, want)
		}
	}
}
