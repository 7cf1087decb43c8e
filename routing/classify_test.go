package routing

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/engine"
)

// classifyTests lists statements, their class, and whether DuckDB can run
// them in a scratch database to confirm the class against its own statement
// type ({dir} becomes a temporary directory; before runs first).
var classifyTests = []struct {
	sql    string
	want   Class
	before string
	noRun  bool // needs the network or files the test does not have
}{
	{sql: "SELECT * FROM t", want: ClassRead},
	{sql: "select 1", want: ClassRead},
	{sql: "(SELECT 1) UNION ALL (SELECT 2)", want: ClassRead},
	{sql: "WITH x AS (SELECT 1 AS a) SELECT * FROM x", want: ClassRead},
	{sql: "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r", want: ClassRead},
	{sql: "FROM t", want: ClassRead},
	{sql: "FROM t SELECT a WHERE a > 1", want: ClassRead},
	{sql: "VALUES (1, 'a'), (2, 'b')", want: ClassRead},
	{sql: "TABLE t", want: ClassRead},
	{sql: "PIVOT t ON b USING sum(a)", want: ClassRead},
	{sql: "SHOW TABLES", want: ClassRead},
	{sql: "SHOW ALL TABLES", want: ClassRead},
	{sql: "DESCRIBE t", want: ClassRead},
	{sql: "DESCRIBE SELECT 1", want: ClassRead},
	{sql: "SUMMARIZE t", want: ClassRead},
	{sql: "EXPLAIN SELECT * FROM t", want: ClassRead},
	{sql: "EXPLAIN INSERT INTO t VALUES (1, 'x')", want: ClassRead},
	{sql: "EXPLAIN ANALYZE SELECT * FROM t", want: ClassRead},
	{sql: "EXPLAIN ANALYZE INSERT INTO t VALUES (1, 'x')", want: ClassWrite},
	{sql: "PRAGMA table_info('t')", want: ClassRead},
	{sql: "PRAGMA show_tables", want: ClassRead},
	{sql: "PRAGMA database_size", want: ClassRead},
	{sql: "PRAGMA version", want: ClassRead},
	{sql: "CALL duckdb_functions()", want: ClassRead},
	{sql: "CALL pragma_table_info('t')", want: ClassRead},
	{sql: "SELECT random(), uuid(), now()", want: ClassRead},
	{sql: "SELECT currval('s')", want: ClassRead, before: "SELECT nextval('s')"},
	{sql: "SELECT 'nextval(1)', \"nextval\" FROM (SELECT 1 AS nextval)", want: ClassRead},
	{sql: "SELECT nextval('s')", want: ClassWrite},
	{sql: "SELECT a, NEXTVAL('s') FROM t", want: ClassWrite},
	{sql: "SELECT setseed(0.5)", want: ClassSession},
	{sql: "COPY t TO '{dir}/t.csv'", want: ClassRead},
	{sql: "COPY (SELECT * FROM t) TO '{dir}/t.parquet' (FORMAT parquet)", want: ClassRead},
	{sql: "EXPORT DATABASE '{dir}/export'", want: ClassRead},
	{sql: "INSERT INTO t VALUES (1, 'x')", want: ClassWrite},
	{sql: "insert into t select * from t", want: ClassWrite},
	{sql: "INSERT OR REPLACE INTO t VALUES (1, 'x')", want: ClassWrite, noRun: true}, // t has no key
	{sql: "WITH x AS (SELECT 1 AS a, 'b' AS b) INSERT INTO t SELECT * FROM x", want: ClassWrite},
	{sql: "WITH x AS (SELECT 1 AS a) UPDATE t SET a = 2 FROM x WHERE t.a = x.a", want: ClassWrite},
	{sql: "WITH x AS (SELECT 1 AS a) DELETE FROM t USING x WHERE t.a = x.a", want: ClassWrite},
	{sql: "UPDATE t SET b = 'y'", want: ClassWrite},
	{sql: "DELETE FROM t WHERE a = 1", want: ClassWrite},
	{sql: "TRUNCATE t", want: ClassWrite},
	{sql: "MERGE INTO t USING (SELECT 1 AS a) s ON t.a = s.a WHEN MATCHED THEN DELETE", want: ClassWrite},
	{sql: "CREATE TABLE u (a INT)", want: ClassWrite},
	{sql: "CREATE OR REPLACE TABLE u AS SELECT 1 AS a", want: ClassWrite},
	{sql: "CREATE VIEW v AS SELECT * FROM t", want: ClassWrite},
	{sql: "CREATE SEQUENCE s2", want: ClassWrite},
	{sql: "CREATE INDEX i ON t (a)", want: ClassWrite},
	{sql: "CREATE MACRO m(x) AS x + 1", want: ClassWrite},
	{sql: "CREATE SCHEMA sch", want: ClassWrite},
	{sql: "CREATE TYPE mood AS ENUM ('happy', 'sad')", want: ClassWrite},
	{sql: "CREATE SECRET (TYPE s3, KEY_ID 'k', SECRET 's')", want: ClassSession, noRun: true},
	{sql: "DROP TABLE t", want: ClassWrite},
	{sql: "ALTER TABLE t ADD COLUMN c INT", want: ClassWrite},
	{sql: "COMMENT ON TABLE t IS 'people'", want: ClassWrite},
	{sql: "COPY t FROM '{dir}/in.csv'", want: ClassWrite, before: "COPY t TO '{dir}/in.csv'"},
	{sql: "ATTACH ':memory:' AS other", want: ClassWrite},
	{sql: "DETACH other", want: ClassWrite, before: "ATTACH ':memory:' AS other"},
	{sql: "INSTALL httpfs", want: ClassWrite, noRun: true},
	{sql: "LOAD json", want: ClassWrite, noRun: true},
	{sql: "IMPORT DATABASE '{dir}/export'", want: ClassWrite, noRun: true},
	{sql: "CALL dbgen(sf = 0)", want: ClassWrite, noRun: true},
	{sql: "EXECUTE p", want: ClassWrite, before: "PREPARE p AS SELECT 1"},
	{sql: "BEGIN", want: ClassTxnBegin},
	{sql: "BEGIN TRANSACTION", want: ClassTxnBegin},
	{sql: "START TRANSACTION", want: ClassTxnBegin},
	{sql: "COMMIT", want: ClassTxnCommit, before: "BEGIN"},
	{sql: "END", want: ClassTxnCommit, before: "BEGIN"},
	{sql: "ROLLBACK", want: ClassTxnRollback, before: "BEGIN"},
	{sql: "ABORT", want: ClassTxnRollback, before: "BEGIN"},
	{sql: "SET threads = 1", want: ClassSession},
	{sql: "SET TimeZone = 'UTC'", want: ClassSession},
	{sql: "SET VARIABLE x = 42", want: ClassSession},
	{sql: "RESET threads", want: ClassSession},
	{sql: "USE memory", want: ClassSession},
	{sql: "PRAGMA threads = 2", want: ClassSession},
	{sql: "PRAGMA enable_profiling", want: ClassSession},
	{sql: "PREPARE q AS SELECT 1", want: ClassSession},
	{sql: "DEALLOCATE p", want: ClassSession, before: "PREPARE p AS SELECT 1"},
	{sql: "CHECKPOINT", want: ClassSession},
	{sql: "FORCE CHECKPOINT", want: ClassSession},
	{sql: "VACUUM", want: ClassSession},
	{sql: "ANALYZE", want: ClassSession},
	{sql: "-- a comment first\n/* and another */ INSERT INTO t VALUES (1, 'x')", want: ClassWrite},
}

func TestClassify(t *testing.T) {
	for _, tt := range classifyTests {
		got, err := Classify(tt.sql)
		if err != nil || len(got) != 1 || got[0].Class != tt.want {
			t.Errorf("Classify(%q) = %v, %v; want one %s", tt.sql, got, err, tt.want)
		}
	}
}

func TestClassifyMulti(t *testing.T) {
	got, err := Classify("BEGIN; INSERT INTO t VALUES (';'); -- done;\n SELECT * FROM t; COMMIT;")
	want := []Statement{
		{"BEGIN", ClassTxnBegin},
		{"INSERT INTO t VALUES (';')", ClassWrite},
		{"-- done;\n SELECT * FROM t", ClassRead},
		{"COMMIT", ClassTxnCommit},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Classify = %q, %v\nwant %q", got, err, want)
	}
	if got, err := Classify(" ; -- nothing\n"); err != nil || len(got) != 0 {
		t.Errorf("Classify of empty text = %v, %v", got, err)
	}
	if _, err := Classify("SELECT 'unterminated"); err == nil {
		t.Error("Classify of an unterminated string: no error")
	}
}

// TestClassifyMatchesDuckDB runs each statement in a scratch database and
// checks the class against the statement type DuckDB reports for it.
func TestClassifyMatchesDuckDB(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, tt := range classifyTests {
		if tt.noRun {
			continue
		}
		sql := strings.ReplaceAll(tt.sql, "{dir}", dir)
		db, err := engine.Open("", engine.Options{Threads: 1, AllowExternalAccess: true})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		conn, err := db.Connect()
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		setup := "CREATE TABLE t (a INT, b VARCHAR); INSERT INTO t VALUES (1, 'x'); CREATE SEQUENCE s"
		if tt.before != "" {
			setup += "; " + strings.ReplaceAll(tt.before, "{dir}", dir)
		}
		if _, err := conn.Exec(ctx, setup); err != nil {
			t.Fatalf("%q: setup: %v", tt.sql, err)
		}
		res, err := conn.Query(ctx, sql)
		if err != nil {
			t.Errorf("%q: %v", tt.sql, err)
		} else {
			if err := Confirm(tt.want, res.StatementType()); err != nil {
				t.Errorf("%q: %v", tt.sql, err)
			}
			res.Close()
		}
		conn.Close()
		db.Close()
	}
}
