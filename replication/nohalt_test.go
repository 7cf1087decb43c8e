package replication

import (
	"context"
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// TestClientStatementsDoNotHalt applies, as replicated entries, statements
// a client could send that break the applier's bookkeeping. Each must fail
// as its own command, the same on every node, and leave the FSM applying:
// a halt is for local I/O failure only. Before the applier refused
// statements naming its schema, the first four halted it.
func TestClientStatementsDoNotHalt(t *testing.T) {
	for _, tc := range []struct {
		sql     string
		refused bool
	}{
		{"DROP TABLE _duckraft.keys", true},
		{`DROP SCHEMA "_DuckRaft" CASCADE`, true},
		{"ALTER TABLE _duckraft.keys ADD COLUMN x INTEGER", true},
		{"ALTER TABLE main._duckraft.keys DROP COLUMN ts", true},
		{"DELETE FROM _duckraft.applied", true},
		{"UPDATE _duckraft.applied SET idx = 99", true},
		{"CREATE TABLE _duckraft.extra(i INTEGER)", true},
		{"INSERT INTO t SELECT count(*) FROM _duckraft.keys", true},
		{"PREPARE p AS INSERT INTO t VALUES (7)", true},
		{"EXECUTE p", true},
		{"DEALLOCATE p", true},
		{"SET default_collation = 'nocase'", true},
		{"PRAGMA default_collation = 'nocase'", true},
		{"INSERT INTO t SELECT length('_duckraft')", false},
		{"CREATE TEMP TABLE applied(id INTEGER, idx UBIGINT)", false},
		{"COPY t FROM '/nonexistent/duckraft.csv'", false},
		{"INSERT INTO t SELECT * FROM read_csv('/nonexistent/duckraft.csv')", false},
	} {
		t.Run(tc.sql, func(t *testing.T) {
			db := openDB(t, t.TempDir())
			defer db.Close()
			f := openFSM(t, db)
			defer f.close()
			f.ApplyBatch([]*raft.Log{logEntry(t, 1, stmt("CREATE TABLE t(i INTEGER)"))})
			r := f.ApplyBatch([]*raft.Log{logEntry(t, 2, stmt(tc.sql))})
			if err := f.haltErr(); err != nil {
				t.Fatalf("FSM halted: %v", err)
			}
			if tc.refused {
				res, ok := r[0].(*entryResult)
				if !ok || !errors.Is(res.results[0].err, ErrRefused) {
					t.Fatalf("result %v, want ErrRefused", r[0])
				}
			}
			r = f.ApplyBatch([]*raft.Log{logEntry(t, 3, stmt("INSERT INTO t VALUES (1)"))})
			if err := f.haltErr(); err != nil {
				t.Fatalf("FSM halted on the next write: %v", err)
			}
			if res, ok := r[0].(*entryResult); !ok || res.results[0].err != nil {
				t.Fatalf("write after it: %v", r[0])
			}
			conn, err := db.Connect()
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if got, err := readApplied(conn); err != nil || got != 3 {
				t.Fatalf("stored applied index = %d, %v; want 3", got, err)
			}
		})
	}
}

// TestApplyIgnoresGlobalSettings changes, on another connection of the
// node's database, settings that DuckDB applies to every connection when
// set without a scope (a plain SET default_collation is global) or with
// GLOBAL, and checks that the FSM does not halt (a global
// max_expression_depth of 2 made its own bookkeeping queries fail) and
// that replicated statements still compute what they compute on a node
// where nobody did: the applier pins them on its own connection.
func TestApplyIgnoresGlobalSettings(t *testing.T) {
	for _, tc := range []struct {
		set, sql, query string
		want            int64
	}{
		{"SET default_collation = 'nocase'", "CREATE TABLE r AS SELECT count(*) AS n FROM c WHERE s = 'A'",
			"SELECT n FROM r", 1},
		{"SET default_order = 'desc'", "CREATE TABLE r AS SELECT list(i ORDER BY i)[1] AS n FROM range(3) t(i)",
			"SELECT n FROM r", 0},
		{"SET default_null_order = 'nulls_first'", "CREATE TABLE r AS SELECT coalesce(list(i ORDER BY i)[1], -1) AS n FROM (VALUES (1), (NULL)) t(i)",
			"SELECT n FROM r", 1},
		{"SET GLOBAL integer_division = true", "CREATE TABLE r AS SELECT (7 / 2 * 10)::BIGINT AS n",
			"SELECT n FROM r", 35},
		{"SET GLOBAL max_expression_depth = 2", "CREATE TABLE r AS SELECT (((1 + 1) + 1) + 1)::BIGINT AS n",
			"SELECT n FROM r", 4},
	} {
		t.Run(tc.set, func(t *testing.T) {
			db := openDB(t, t.TempDir())
			defer db.Close()
			f := openFSM(t, db)
			defer f.close()
			other, err := db.Connect()
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if _, err := other.Exec(context.Background(), tc.set); err != nil {
				t.Fatal(err)
			}
			r := f.ApplyBatch([]*raft.Log{logEntry(t, 1, stmt("CREATE TABLE c(s VARCHAR)"), stmt("INSERT INTO c VALUES ('a'), ('A')"), stmt(tc.sql))})
			if err := f.haltErr(); err != nil {
				t.Fatalf("after %q elsewhere, the FSM halted: %v", tc.set, err)
			}
			if res, ok := r[0].(*entryResult); !ok || res.results[2].err != nil {
				t.Fatalf("apply: %v", r[0])
			}
			// The check reads on a connection of its own, which the global
			// setting reaches.
			if _, err := other.Exec(context.Background(), "RESET GLOBAL max_expression_depth"); err != nil {
				t.Fatal(err)
			}
			if got := queryInt(t, db, tc.query); got != tc.want {
				t.Fatalf("after %q elsewhere, the applier computed %d, want %d", tc.set, got, tc.want)
			}
		})
	}
}
