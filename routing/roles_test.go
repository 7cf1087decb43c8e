package routing

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// readTokenAttacks are texts that would change the database, a node or
// the server's files, each of which a read token must be refused.
func readTokenAttacks(dir string) []string {
	return []string{
		"INSERT INTO t VALUES (1)",
		"insert into t values (1)",
		"INSERT INTO t VALUES (1) RETURNING id",
		"UPDATE t SET id = 2",
		"DELETE FROM t",
		"WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x",
		"INSERT INTO t SELECT * FROM query_table('t')",
		"CREATE TABLE u(i INTEGER)",
		"CREATE TABLE u AS SELECT 1 AS i",
		"CREATE VIEW v AS SELECT 1",
		"CREATE MACRO m(x) AS x",
		"CREATE TEMP TABLE tmp(i INTEGER)",
		"DROP TABLE t",
		"ALTER TABLE t ADD COLUMN x INTEGER",
		"SELECT 1; INSERT INTO t VALUES (1)",
		"INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)",
		"BEGIN; INSERT INTO t VALUES (1); COMMIT",
		"SELECT nextval('s')",
		"SELECT * FROM query('INSERT INTO t VALUES (1) RETURNING id')",
		"SELECT * FROM query('SELECT nextval(''s'')')",
		"FROM query('CREATE TABLE u(i INTEGER)')",
		"CALL dbgen(sf = 0)",
		"CHECKPOINT",
		"FORCE CHECKPOINT",
		"CALL checkpoint()",
		"SELECT * FROM force_checkpoint()",
		"VACUUM t",
		"ANALYZE",
		"PREPARE p AS INSERT INTO t VALUES (1)",
		"EXECUTE p",
		"ATTACH ':memory:' AS other",
		"DETACH other",
		"COPY t FROM '" + filepath.Join(dir, "in.csv") + "'",
		"COPY t TO '" + filepath.Join(dir, "out.csv") + "'",
		"COPY (SELECT 1) TO '" + filepath.Join(dir, "out.csv") + "'",
		"EXPORT DATABASE '" + filepath.Join(dir, "export") + "'",
		"EXPLAIN ANALYZE INSERT INTO t VALUES (1)",
		"EXPLAIN ANALYZE COPY t TO '" + filepath.Join(dir, "out.csv") + "'",
		"CREATE SECRET (TYPE s3, KEY_ID 'k', SECRET 's')",
		"SET GLOBAL threads = 1",
		"SET VARIABLE v = 1",
		"PRAGMA enable_profiling",
		"SELECT setseed(0.5)",
	}
}

// readTokenAllowed are texts a read token runs.
var readTokenAllowed = []string{
	"SELECT count(*) FROM t",
	"SELECT * FROM query('SELECT 42')",
	"SELECT * FROM query_table('t')",
	"EXPLAIN SELECT * FROM t",
	"DESCRIBE t",
	"SHOW TABLES",
	"SET TimeZone = 'UTC'",
	"RESET TimeZone",
	"SET duckraft_consistency = 'strong'",
	"BEGIN; SELECT count(*) FROM t; COMMIT",
	"BEGIN",
	"SELECT 1",
	"ROLLBACK",
}

// fingerprint is what a refused write must leave unchanged on a node: the
// rows of t, the catalog, the sequence's last value.
func fingerprint(t *testing.T, nd *inmemNode) string {
	t.Helper()
	conn, err := nd.db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	row, err := conn.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM t),
		(SELECT string_agg(table_name || ':' || column_count, ',' ORDER BY table_name) FROM duckdb_tables() WHERE NOT temporary),
		(SELECT count(*) FROM duckdb_views() WHERE NOT internal), (SELECT count(*) FROM duckdb_databases()),
		(SELECT last_value FROM duckdb_sequences() WHERE sequence_name = 's')`)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(row)
}

// TestReadTokenCannotWrite: a read token's every way to write is refused
// with a Permission Error on the leader, a follower, a replica and a
// router, outside and inside a transaction, and every node's data, the
// log and the server's files stay as they were; its reads, settings and
// read-only transactions run.
func TestReadTokenCannotWrite(t *testing.T) {
	net := newInmemNet(t, "n1", "n2", "r1")
	for _, nd := range net.nodes {
		nd.sql("CREATE SEQUENCE s")
		nd.sql("INSERT INTO t VALUES (10), (20)")
	}
	dir := t.TempDir()
	before := map[string]string{}
	for _, nd := range net.nodes {
		before[nd.id] = fingerprint(t, nd)
	}
	logLen := func() int {
		net.mu.Lock()
		defer net.mu.Unlock()
		return len(net.log)
	}
	entries := logLen()
	for _, via := range []*inmemNode{net.node("n1"), net.node("n2"), net.node("r1"), net.router(t)} {
		t.Run(via.id, func(t *testing.T) {
			s := via.sessionAs(t, tokens.Read)
			for _, txn := range []bool{false, true} {
				if txn {
					mustRun(t, via, s, "BEGIN")
				}
				for _, sql := range readTokenAttacks(dir) {
					_, err := run(t, via, s, sql)
					var pe *node.PermissionError
					if !errors.Is(err, node.ErrPermission) || !errors.As(err, &pe) || node.CodeOf(err) != string(outcome.Forbidden) {
						t.Errorf("in a transaction %v: %s: %v, want a Permission Error", txn, sql, err)
					}
				}
				if txn {
					mustRun(t, via, s, "COMMIT")
				}
			}
			chunk, err := wire.ChunkFromRows([]wire.LogicalType{{ID: wire.TypeInteger}}, [][]any{{int32(1)}})
			if err != nil {
				t.Fatal(err)
			}
			if err := via.exec.Append(context.Background(), s, []string{"main"}, "t", chunk); !errors.Is(err, node.ErrPermission) {
				t.Errorf("append: %v, want a Permission Error", err)
			}
			for _, sql := range readTokenAllowed {
				if _, err := run(t, via, s, sql); err != nil {
					t.Errorf("a read token's %s: %v", sql, err)
				}
			}
		})
	}
	for _, nd := range net.nodes {
		if got := fingerprint(t, nd); got != before[nd.id] {
			t.Errorf("%s changed: %s, was %s", nd.id, got, before[nd.id])
		}
	}
	if got := logLen(); got != entries {
		t.Errorf("the log grew by %d entries", got-entries)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) > 0 {
		t.Errorf("refused statements wrote %v", m)
	}
}

// TestWriteTokenWrites: the same texts are not refused for their role
// with a write token (some fail for other reasons: DuckDB's, or duckraft's
// determinism rules), and a write goes through every node.
func TestWriteTokenWrites(t *testing.T) {
	net := newInmemNet(t, "n1", "n2")
	n2 := net.node("n2")
	s := n2.sessionAs(t, tokens.Write)
	mustRun(t, n2, s, "INSERT INTO t VALUES (1)")
	for _, nd := range net.nodes {
		waitFor(t, func() bool { return nd.count() == 1 }, nd.id+" applying the write token's insert")
	}
	// Last: among them, DROP TABLE t applies.
	for _, sql := range readTokenAttacks(t.TempDir()) {
		if _, err := run(t, n2, s, sql); errors.Is(err, node.ErrPermission) {
			t.Errorf("a write token's %s: %v", sql, err)
		}
	}
}

// TestRoutedReadKeepsTheRole: a client that sends the routed-read header
// itself is held to its role there too.
func TestRoutedReadKeepsTheRole(t *testing.T) {
	net := newInmemNet(t, "n1")
	n1 := net.node("n1")
	s := n1.sessionAs(t, tokens.Read)
	out := filepath.Join(t.TempDir(), "out.csv")
	if _, err := n1.exec.serveRouted(context.Background(), s, nodeapi.Read{}, "COPY t TO '"+out+"'"); !errors.Is(err, node.ErrPermission) {
		t.Fatalf("routed COPY TO of a read token: %v", err)
	}
	rows, err := n1.exec.serveRouted(context.Background(), s, nodeapi.Read{}, "SELECT count(*) FROM t")
	if err != nil {
		t.Fatalf("routed read of a read token: %v", err)
	}
	rows.Close()
}
