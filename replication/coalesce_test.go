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
// With a sequence in the database every statement runs as literal text;
// without one the merged runs run through their prepared shapes, and once
// more with no shapes at all, and all three must agree.
func TestMergedInsertsMatchSeparate(t *testing.T) {
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
		stmt("INSERT INTO u VALUES (10, 1), (11, 2)"),
		stmt("INSERT INTO u VALUES (12, 3)"),
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

	for _, tc := range []struct {
		name  string
		setup []wal.Command
	}{
		{"with a sequence", []wal.Command{
			stmt("CREATE SEQUENCE s"),
			stmt("CREATE TABLE t(id INTEGER PRIMARY KEY, v VARCHAR, d DATE, n BIGINT DEFAULT nextval('s'), CHECK (id < 1000))"),
			stmt("CREATE TABLE u(a INTEGER, b DOUBLE)"),
		}},
		{"prepared", []wal.Command{
			stmt("CREATE TABLE t(id INTEGER PRIMARY KEY, v VARCHAR, d DATE, CHECK (id < 1000))"),
			stmt("CREATE TABLE u(a INTEGER, b DOUBLE)"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sequence := tc.name == "with a sequence"
			// apply runs the batch in one entry (merged) or one entry
			// per command, through prepared shapes unless literal, and
			// returns the results, the state, and how many statements
			// ran prepared.
			apply := func(perEntry, literal bool) ([]cmdResult, [][]any, uint64) {
				t.Helper()
				db := openDB(t, t.TempDir())
				defer db.Close()
				f := openFSM(t, db)
				defer f.close()
				if literal {
					f.shapes = nil
				}
				idx := uint64(1)
				for _, r := range f.ApplyBatch([]*raft.Log{logEntry(t, idx, tc.setup...)}) {
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
				// Sequences are not transactional in DuckDB: a failed
				// attempt that is rolled back still consumed its values.
				// Every node makes the same attempts, so they agree, but
				// the merged and the separate runs leave different gaps;
				// only the order must match.
				if sequence {
					if got := queryInt(t, db, "SELECT count(*) FROM (SELECT n < lead(n) OVER (ORDER BY rowid) AS up FROM t) WHERE NOT up"); got != 0 {
						t.Errorf("sequence values not increasing in insert order")
					}
				}
				var hits uint64
				if f.shapes != nil {
					hits = f.shapes.hits
				}
				return results, dump(t, db, "SELECT id, v, d FROM t ORDER BY rowid", "SELECT * FROM u ORDER BY rowid"), hits
			}

			merged, mergedRows, hits := apply(false, false)
			switch {
			case sequence && hits > 0:
				t.Errorf("%d statements ran prepared with a sequence in the database", hits)
			case !sequence && hits == 0:
				t.Error("no merged run ran prepared")
			}
			others := map[string]func() ([]cmdResult, [][]any, uint64){
				"separate": func() ([]cmdResult, [][]any, uint64) { return apply(true, false) },
			}
			if !sequence {
				others["merged as literal text"] = func() ([]cmdResult, [][]any, uint64) { return apply(false, true) }
			}
			for name, other := range others {
				separate, separateRows, _ := other()
				for i := range batch {
					m, s := merged[i], separate[i]
					// A command applied in the same DuckDB transaction as
					// the row it conflicts with gets DuckDB's message for
					// that, so only the merged runs' texts must agree.
					if (m.err == nil) != (s.err == nil) || name != "separate" && m.err != nil && m.err.Error() != s.err.Error() {
						t.Errorf("command %d: merged err %v, %s err %v", i, m.err, name, s.err)
						continue
					}
					if m.err != nil {
						continue
					}
					if m.res.RowsChanged != s.res.RowsChanged || m.res.Replayed != s.res.Replayed ||
						!reflect.DeepEqual(m.res.Columns, s.res.Columns) || !reflect.DeepEqual(m.res.Chunks, s.res.Chunks) {
						t.Errorf("command %d: merged %+v, %s %+v", i, m.res, name, s.res)
					}
				}
				if !reflect.DeepEqual(mergedRows, separateRows) {
					t.Errorf("state differs:\nmerged   %v\n%s %v", mergedRows, name, separateRows)
				}
			}
			for _, i := range []int{3, 6, 7} {
				if merged[i].err == nil {
					t.Errorf("command %d succeeded, want its own error", i)
				}
			}
			if len(mergedRows) != 14 {
				t.Errorf("got %d rows, want 14: %v", len(mergedRows), mergedRows)
			}
		})
	}
}

// TestMergedRunRunsPrepared: a run of INSERTs merged into one statement
// runs through its prepared shape, once per run, and a run of another
// length through a shape of its own.
func TestMergedRunRunsPrepared(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := openFSM(t, db)
	defer f.close()
	if err := results(t, f, logEntry(t, 1, stmt("CREATE TABLE u(a INTEGER, b VARCHAR)")))[0].err; err != nil {
		t.Fatal(err)
	}
	for i, n := range []int{3, 3, 5} {
		var cmds []wal.Command
		for j := range n {
			cmds = append(cmds, stmt(fmt.Sprintf("INSERT INTO u VALUES (%d, 'v%d')", j, j)))
		}
		before, shapes := f.shapes.hits, f.shapes.order.Len()
		for _, r := range results(t, f, logEntry(t, uint64(i+2), cmds...)) {
			if r.err != nil || r.res.RowsChanged != 1 {
				t.Fatalf("entry %d: %+v", i+2, r)
			}
		}
		if f.shapes.hits != before+1 {
			t.Errorf("entry %d of %d INSERTs: %d statements ran prepared, want 1", i+2, n, f.shapes.hits-before)
		}
		if want := shapes + map[bool]int{true: 1}[i != 1]; f.shapes.order.Len() != want {
			t.Errorf("entry %d: %d shapes kept, want %d", i+2, f.shapes.order.Len(), want)
		}
	}
	if got := queryInt(t, db, "SELECT count(*) FROM u"); got != 11 {
		t.Fatalf("%d rows, want 11", got)
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
