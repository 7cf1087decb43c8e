package analyze

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/sqltext"
)

// clockMacroSetup are objects a database may hold from before these checks
// or that DuckDB allows: a user macro over DuckDB's own clock macro, and
// one over age() with one argument.
var clockMacroSetup = []string{
	"CREATE TABLE g (a INT, ts TIMESTAMPTZ, x INTERVAL, s VARCHAR)",
	"INSERT INTO g SELECT i, TIMESTAMPTZ '2026-01-01 00:00:00+00' + i * INTERVAL 1 DAY, NULL, NULL FROM range(5) r(i)",
	"CREATE MACRO hour_ago() AS ago(INTERVAL 1 HOUR)",
	"CREATE MACRO since(t) AS age(t)",
	"CREATE MACRO nap() AS pg_sleep(0)",
}

// TestClockMacros: DuckDB's built-in macros whose bodies read the clock
// (ago, pg_conf_load_time, pg_postmaster_start_time), age() with one
// argument (which counts from today's date), and user macros over them,
// in every place a write evaluates or stores an expression. Each gave the
// replicas different values on main at 42d1571 (issue 31, item 6): the
// binder folds a clock call with constant arguments into a constant, and
// the definitions read were only those of user macros.
func TestClockMacros(t *testing.T) {
	a := newAnalyzer(t)
	c, err := a.pool.DB().Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, s := range clockMacroSetup {
		if _, err := c.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	const materialize = ""
	for _, tc := range []struct {
		place, sql, why string // why: a refusal naming it, or materialize
	}{
		{"update", "UPDATE g SET ts = ago(INTERVAL 1 HOUR)", "ago()"},
		{"update", `UPDATE g SET ts = "AGO"(INTERVAL 1 HOUR)`, "ago()"},
		{"update", "UPDATE g SET ts = system.main.ago(INTERVAL 1 HOUR)", "ago()"},
		{"update", "UPDATE g SET ts = pg_conf_load_time()", "pg_conf_load_time()"},
		{"update", "UPDATE g SET x = age(ts)", "age() with one argument"},
		{"update", "UPDATE g SET x = since(ts)", "age() with one argument"},
		{"update", "UPDATE g SET ts = hour_ago()", "ago()"},
		{"update", "UPDATE g SET a = 1 WHERE nap() IS NULL", "sleep_ms()"},
		{"where", "DELETE FROM g WHERE ts < ago(INTERVAL 1 DAY)", "ago()"},
		{"create table as", "CREATE TABLE c AS SELECT ago(INTERVAL 1 HOUR) AS ts", "ago()"},
		{"create table as", "CREATE TABLE c AS SELECT age(TIMESTAMP '2020-01-01') AS x", "age() with one argument"},
		{"default", "CREATE TABLE d (a INT, ts TIMESTAMPTZ DEFAULT ago(INTERVAL 1 HOUR))", "ago()"},
		{"default", "CREATE TABLE d (a INT, ts TIMESTAMPTZ DEFAULT pg_conf_load_time())", "pg_conf_load_time()"},
		{"default", "CREATE TABLE d (a INT, ts TIMESTAMPTZ DEFAULT pg_postmaster_start_time())", "pg_postmaster_start_time()"},
		{"default", "CREATE TABLE d (a INT, ts TIMESTAMPTZ DEFAULT hour_ago())", "ago()"},
		{"default", "CREATE TABLE d (a INT, x INTERVAL DEFAULT age(TIMESTAMP '2020-01-01'))", "age() with one argument"},
		{"generated", "CREATE TABLE d (a INT, ts TIMESTAMP, x INTERVAL GENERATED ALWAYS AS (age(ts)))", "age() with one argument"},
		{"generated", "CREATE TABLE d (a INT, e BIGINT GENERATED ALWAYS AS (epoch(ago(INTERVAL 1 DAY))))", "ago()"},
		{"alter default", "ALTER TABLE g ALTER COLUMN ts SET DEFAULT ago(INTERVAL 1 HOUR)", "ago()"},
		{"alter add column", "ALTER TABLE g ADD COLUMN t2 TIMESTAMPTZ DEFAULT ago(INTERVAL 1 HOUR)", "ago()"},
		{"alter type using", "ALTER TABLE g ALTER COLUMN s TYPE VARCHAR USING ago(INTERVAL 1 HOUR)::VARCHAR", "ago()"},
		{"view", "CREATE VIEW v AS SELECT ago(INTERVAL 1 HOUR) AS ts", "ago()"},
		{"view", "CREATE VIEW v AS SELECT a, age(ts) AS x FROM g", "age() with one argument"},
		{"view", "CREATE VIEW v AS SELECT hour_ago() AS ts", "ago()"},
		{"macro", "CREATE MACRO m2() AS ago(INTERVAL 1 HOUR)", "ago()"},
		{"macro", "CREATE MACRO m3(t) AS since(t)", "age() with one argument"},
		{"table macro", "CREATE MACRO tm2() AS TABLE SELECT pg_conf_load_time() AS ts", "pg_conf_load_time()"},
		// A table created earlier in the same client transaction: DuckDB
		// cannot bind the write on the leader, and the text's macros
		// still count.
		{"unbound update", "UPDATE nosuch SET ts = ago(INTERVAL 1 HOUR)", "ago()"},
		{"insert", "INSERT INTO g (a, ts) VALUES (9, ago(INTERVAL 1 HOUR))", materialize},
		{"insert", "INSERT INTO g (a, ts) SELECT a, pg_conf_load_time() FROM g", materialize},
		{"insert", "INSERT INTO g (a, x) SELECT a, age(ts) FROM g", materialize},
		{"insert", "INSERT INTO g (a, ts) VALUES (9, hour_ago())", materialize},
	} {
		plan, err := decide(t, a, tc.sql)
		switch {
		case tc.why == materialize && (err != nil || plan.Materialize == nil):
			t.Errorf("%s: %s = %+v, %v; want a Materialize plan", tc.place, tc.sql, plan, err)
		case tc.why != materialize && (!errors.Is(err, sqltext.ErrNondeterministic) || !strings.Contains(err.Error(), tc.why)):
			t.Errorf("%s: %s: error %v\nwant ErrNondeterministic naming %q", tc.place, tc.sql, err, tc.why)
		}
	}
}

// TestDeterministicMacrosPass: DuckDB's built-in macros whose bodies are
// deterministic, and age() with two arguments, stay accepted in every place.
func TestDeterministicMacrosPass(t *testing.T) {
	a := newAnalyzer(t)
	c, err := a.pool.DB().Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, s := range clockMacroSetup {
		if _, err := c.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	for _, sql := range []string{
		"UPDATE g SET a = nullif(a, 0)",
		"UPDATE g SET x = age(TIMESTAMPTZ '2030-01-01 00:00:00+00', ts)",
		"UPDATE g SET s = split_part('a,b', ',', 1)",
		"UPDATE g SET ts = date_add(ts, INTERVAL 1 DAY)",
		"UPDATE g SET s = list_first(['x'])",
		"CREATE TABLE h (a INT, b DOUBLE DEFAULT fdiv(7, 2), c DOUBLE GENERATED ALWAYS AS (fmod(a, 3)))",
		"CREATE VIEW w AS SELECT date_add(ts, INTERVAL 1 DAY) AS d, age(TIMESTAMPTZ '2030-01-01 00:00:00+00', ts) AS x FROM g",
		"CREATE MACRO m4(v) AS array_append([1], v)",
		"ALTER TABLE g ALTER COLUMN a SET DEFAULT nullif(1, 2)",
		"CREATE TABLE c AS SELECT a, split_part('a,b', ',', 2) AS s FROM g",
		"INSERT INTO g (a, s) VALUES (7, split_part('a,b', ',', 2))",
	} {
		plan, err := decide(t, a, sql)
		if err != nil || plan.Materialize != nil {
			t.Errorf("%s = %+v, %v; want accepted as a statement", sql, plan, err)
		}
	}
}

// TestBuiltinMacrosExpanded: every macro DuckDB itself defines, scalar or
// table, is seen through: the calls of its definition count as the
// statement's, as those of a user's macro do.
func TestBuiltinMacrosExpanded(t *testing.T) {
	a := newAnalyzer(t)
	ctx := context.Background()
	c, err := a.pool.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer a.pool.Put(c)
	rows, err := c.QueryStrings(ctx, `SELECT DISTINCT function_name || chr(31) || macro_definition FROM duckdb_functions()
		WHERE internal AND function_type IN ('macro', 'table_macro') AND macro_definition IS NOT NULL ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 50 {
		t.Fatalf("DuckDB lists %d built-in macro definitions", len(rows))
	}
	checked := 0
	for _, r := range rows {
		name, body, _ := strings.Cut(r, "\x1f")
		want, err := bodyCalls(sqltext.Parse(body))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := a.definedCallsOn(ctx, c, sqltext.Parse("UPDATE g SET a = "+name+"(1)"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, w := range want {
			if !slices.ContainsFunc(got, func(d definedCall) bool { return d.name == w }) {
				t.Errorf("%s: calls %v, want %s among them (its definition: %s)", name, got, w, body)
			}
		}
		checked += len(want)
	}
	if checked == 0 {
		t.Fatal("no built-in macro calls anything")
	}
}

// TestViewsOverNamedTablesRefused: a view or macro that reads a table by a
// name in a string (query_table, query, DuckDB's own histogram macro over
// query_table) is refused when it is created, as node-local: a read of it
// could otherwise reach whatever the string names, the applier's schema
// included, past the checks a client's own statement gets.
func TestViewsOverNamedTablesRefused(t *testing.T) {
	a := newAnalyzer(t)
	for _, sql := range []string{
		"CREATE VIEW v1 AS SELECT * FROM histogram('t', a)",
		"CREATE VIEW v2 AS SELECT * FROM query_table('t')",
		"CREATE VIEW v3 AS SELECT * FROM query('SELECT * FROM t')",
		"CREATE MACRO m5() AS TABLE SELECT * FROM query_table('t')",
		"CREATE MACRO m6() AS TABLE SELECT * FROM histogram_values('t', a)",
		"CREATE MACRO m7(x) AS TABLE SELECT * FROM histogram(x, a)",
	} {
		if _, err := decide(t, a, sql); !errors.Is(err, sqltext.ErrNondeterministic) {
			t.Errorf("%s: %v, want ErrNondeterministic", sql, err)
		}
	}
}
