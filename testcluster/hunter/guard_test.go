package hunter

import (
	"context"
	"strings"
	"testing"
)

// TestGuardBoundsTables: statements that multiply rows leave no table past
// maxRows. One call of DuckDB 2.0's dbgen grew the hunted database to
// TPC-H's, whose tables have no id column: such a table is dropped (a
// plain CREATE TABLE AS stands for dbgen, which takes more than the
// cluster's write timeout on a loaded 2-core machine); a base table keeps
// the rows Setup gave it, and another table the rows below id 1000.
func TestGuardBoundsTables(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	h := start(t, Config{Seed: 1})
	for _, sql := range []string{
		"CREATE TABLE lineitem AS SELECT i AS l_orderkey, 'x' || i AS l_comment FROM range(30000) r(i)",
		"INSERT INTO t0(id, v) SELECT 1000 + i, i FROM range(20000) r(i)",
		"CREATE TABLE wide AS SELECT i AS id, i AS v FROM range(12000) r(i)",
	} {
		n := len(h.last)
		if f := h.send(Statement{SQL: sql, Placement: "test"}); f != nil {
			t.Fatalf("%s: %s: %s", sql, f.Kind, f.Detail)
		}
		if e := h.last[n].Err; e != "" {
			t.Fatalf("%s was refused, so the guard is not exercised: %s", sql, e)
		}
	}
	ctx := context.Background()
	tables, err := queryStrings(ctx, h.conn(h.c.Leader()), grownQuery)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range tables {
		if n, err := h.count(ctx, row[0]); err == nil && n > maxRows {
			t.Errorf("%s holds %d rows, more than %d", row[0], n, maxRows)
		}
	}
	want := map[string]bool{`"main"."lineitem"`: true, `"main"."t0"`: false, `"main"."wide"`: false}
	got := map[string]bool{}
	for _, tr := range h.rep.Trims {
		got[tr.Table] = tr.Dropped
	}
	for table, dropped := range want {
		if d, ok := got[table]; !ok || d != dropped {
			t.Errorf("%s: trimmed %v, dropped %v; want dropped %v (trims: %v)", table, ok, d, dropped, h.rep.Trims)
		}
	}
	for table, rows := range map[string]int64{`"main"."t0"`: 200, `"main"."wide"`: 1000} {
		if n, err := h.count(ctx, table); err != nil || n != rows {
			t.Errorf("%s: %d rows (%v), want %d", table, n, err, rows)
		}
	}
	if !strings.Contains(h.rep.String(), "CREATE TABLE lineitem") {
		t.Errorf("the report does not name the statement that grew the tables:\n%s", h.rep)
	}
}
