package replication

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/wal"
)

func TestParsePlainInsert(t *testing.T) {
	tests := []struct {
		sql    string
		ok     bool
		target string
		values string
		rows   int64
	}{
		{sql: "INSERT INTO t VALUES (1, 'a')", ok: true, target: "insert into t values", values: "(1, 'a')", rows: 1},
		{sql: "insert into Main.T (a, \"B\") values (1,2), (3, 4);", ok: true, target: `insert into main . t ( a , "B" ) values`, values: "(1,2), (3, 4)", rows: 2},
		{sql: "INSERT INTO t VALUES (-1.5e3, NULL, TRUE, DATE '2024-01-02', '7'::INTEGER, [1, 2], {'k': 'v'})", ok: true,
			target: "insert into t values", values: "(-1.5e3, NULL, TRUE, DATE '2024-01-02', '7'::INTEGER, [1, 2], {'k': 'v'})", rows: 1},
		{sql: "INSERT INTO t VALUES (1 + 2 * 3, 'a' || 'b')", ok: true, target: "insert into t values", values: "(1 + 2 * 3, 'a' || 'b')", rows: 1},
		{sql: "INSERT INTO t VALUES ((SELECT count(*) FROM t))"},
		{sql: "INSERT INTO t VALUES (nextval('s'))"},
		{sql: "INSERT INTO t VALUES (now())"},
		{sql: "INSERT INTO t VALUES (x)"},
		{sql: "INSERT INTO t VALUES (?)"},
		{sql: "INSERT INTO t VALUES (1) RETURNING *"},
		{sql: "INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING"},
		{sql: "INSERT OR REPLACE INTO t VALUES (1)"},
		{sql: "INSERT INTO t BY NAME VALUES (1)"},
		{sql: "INSERT INTO t DEFAULT VALUES"},
		{sql: "INSERT INTO t SELECT 1"},
		{sql: "INSERT INTO t VALUES (1) /* c */"},
		{sql: "INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)"},
		{sql: "INSERT INTO t VALUES (1"},
		{sql: "UPDATE t SET a = 1"},
		{sql: "INSERT INTO t VALUES (DEFAULT)"},
	}
	for _, tt := range tests {
		got, ok := parsePlainInsert(sqltext.Parse(tt.sql))
		if ok != tt.ok {
			t.Errorf("%q: ok = %v, want %v", tt.sql, ok, tt.ok)
			continue
		}
		if ok && (got.target != tt.target || got.values != tt.values || got.rows != tt.rows) {
			t.Errorf("%q: got %+v, want target %q values %q rows %d", tt.sql, got, tt.target, tt.values, tt.rows)
		}
	}
}

// TestMergedInsertsMatchSeparate applies one batch of commands twice: in one
// raft entry, where runs of INSERTs are merged, and one command per entry,
// where nothing is. Results and the state left behind must be the same.
func TestMergedInsertsMatchSeparate(t *testing.T) {
	setup := []wal.Command{
		stmt("CREATE SEQUENCE s"),
		stmt("CREATE TABLE t(id INTEGER PRIMARY KEY, v VARCHAR, d DATE, n BIGINT DEFAULT nextval('s'), CHECK (id < 1000))"),
		stmt("CREATE TABLE u(a INTEGER, b DOUBLE)"),
	}
	keyed := func(c wal.Command, key string) wal.Command { c.Key = []byte(key); return c }
	returning := func(c wal.Command) wal.Command {
		st := c.Entry.(wal.Statement)
		st.Returning = true
		c.Entry = st
		return c
	}
	batch := []wal.Command{
		returning(stmt("INSERT INTO t (id, v, d) VALUES (1, 'a', '2024-01-01')")),
		returning(stmt("insert into T (id, v, d) values (2, 'b', DATE '2024-01-02'), (3, NULL, NULL)")),
		keyed(stmt("INSERT INTO t (id, v, d) VALUES (4, 'd', '2024-01-04')"), "k1"),
		stmt("INSERT INTO t (id, v, d) VALUES (2, 'duplicate', NULL)"), // primary key violation
		stmt("INSERT INTO t (id, v, d) VALUES (5, 'e', '2024-01-05')"),
		keyed(stmt("INSERT INTO t (id, v, d) VALUES (4, 'd', '2024-01-04')"), "k1"), // a retry: replayed
		stmt("INSERT INTO t (id, v, d) VALUES (6, 'f', 'not a date')"),              // cast error
		stmt("INSERT INTO t (id, v, d) VALUES (2000, 'g', NULL)"),                   // check violation
		stmt("INSERT INTO t (id, v, d) VALUES (7, 'h', '2024-01-07')"),
		stmt("INSERT INTO u VALUES (1, 1.5)"),
		stmt("INSERT INTO u VALUES ('2', 2), (3, '3.25')"),
		stmt("INSERT INTO t (id, v, d) VALUES (8, 'i', NULL)"),
		stmt("INSERT INTO t (id, v, d) VALUES (9, 'j', NULL)"),
	}

	apply := func(perEntry bool) ([]cmdResult, [][]any) {
		t.Helper()
		db := openDB(t, t.TempDir())
		defer db.Close()
		f := openFSM(t, db)
		defer f.close()
		idx := uint64(1)
		for _, r := range f.ApplyBatch([]*raft.Log{logEntry(t, idx, setup...)}) {
			for _, c := range r.(*entryResult).results {
				if c.err != nil {
					t.Fatal(c.err)
				}
			}
		}
		var logs []*raft.Log
		if perEntry {
			for _, c := range batch {
				idx++
				logs = append(logs, logEntry(t, idx, c))
			}
		} else {
			logs = []*raft.Log{logEntry(t, 2, batch...)}
		}
		var results []cmdResult
		for _, l := range logs {
			r := f.ApplyBatch([]*raft.Log{l})[0]
			results = append(results, r.(*entryResult).results...)
		}
		// Sequences are not transactional in DuckDB: a failed attempt
		// that is rolled back still consumed its values. Every node makes
		// the same attempts, so they agree, but the merged and the
		// separate runs leave different gaps; only the order must match.
		if got := queryInt(t, db, "SELECT count(*) FROM (SELECT n < lead(n) OVER (ORDER BY rowid) AS up FROM t) WHERE NOT up"); got != 0 {
			t.Errorf("sequence values not increasing in insert order")
		}
		return results, dump(t, db, "SELECT id, v, d FROM t ORDER BY rowid", "SELECT * FROM u ORDER BY rowid")
	}

	work := make([]pending, len(batch))
	for i, c := range batch {
		work[i] = pending{index: 2, cmd: c}
	}
	parseInserts(work)
	never := func(int) bool { return false }
	if run, ok := nextRun(work, 0, never); !ok || run.n != 5 {
		t.Fatalf("first run = %+v, %v; want the 5 commands before the repeated key", run, ok)
	}
	if run, ok := nextRun(work, 9, never); !ok || run.n != 2 || run.sql != "insert into u values (1, 1.5), ('2', 2), (3, '3.25')" {
		t.Fatalf("run at 9 = %+v, %v", run, ok)
	}

	merged, mergedRows := apply(false)
	separate, separateRows := apply(true)
	for i := range batch {
		m, s := merged[i], separate[i]
		if (m.err == nil) != (s.err == nil) {
			t.Errorf("command %d: merged err %v, separate err %v", i, m.err, s.err)
			continue
		}
		if m.err != nil {
			continue
		}
		if m.res.RowsChanged != s.res.RowsChanged || m.res.Replayed != s.res.Replayed ||
			!reflect.DeepEqual(m.res.Columns, s.res.Columns) || !reflect.DeepEqual(m.res.Chunks, s.res.Chunks) {
			t.Errorf("command %d: merged %+v, separate %+v", i, m.res, s.res)
		}
	}
	for _, i := range []int{3, 6, 7} {
		if merged[i].err == nil {
			t.Errorf("command %d succeeded, want its own error", i)
		}
	}
	if !reflect.DeepEqual(mergedRows, separateRows) {
		t.Errorf("state differs:\nmerged   %v\nseparate %v", mergedRows, separateRows)
	}
	if len(mergedRows) != 11 {
		t.Errorf("got %d rows, want 11: %v", len(mergedRows), mergedRows)
	}
}

// dump returns the rows of each query, as printed values.
func dump(t *testing.T, db *engine.DB, queries ...string) [][]any {
	t.Helper()
	conn, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var rows [][]any
	for _, q := range queries {
		res, err := conn.Query(context.Background(), q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for {
			c, err := res.Next()
			if err != nil {
				t.Fatal(err)
			}
			if c == nil {
				break
			}
			for r := 0; r < c.Rows; r++ {
				row := []any{q}
				for _, v := range c.Columns {
					x, err := v.Value(r)
					if err != nil {
						t.Fatal(err)
					}
					row = append(row, fmt.Sprint(x))
				}
				rows = append(rows, row)
			}
		}
		res.Close()
	}
	return rows
}
