package hunter

import (
	"context"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/engine"
)

// testFunctions stand for duckdb_functions(): two volatile scalars, a
// macro over the clock, and two table functions, one with a named
// parameter.
var testFunctions = []Function{
	{Name: "random", Overloads: [][]Param{nil}},
	{Name: "ago", Macro: true, Overloads: [][]Param{{{Name: "i", Positional: true}}}},
	{Name: "sleep_ms", Overloads: [][]Param{{{Name: "milliseconds", Type: "BIGINT", Positional: true}}}},
	{Name: "range", Table: true, Overloads: [][]Param{{{Name: "col0", Type: "BIGINT", Positional: true}}}},
	{Name: "test_all_types", Table: true, Overloads: [][]Param{{{Name: "use_large_enum", Type: "BOOLEAN"}}}},
}

func generate(seed int64, n int) []Statement {
	g := NewGenerator(seed, testFunctions)
	out := make([]Statement, n)
	for i := range out {
		out[i] = g.Next()
		g.Result(out[i], i%5 != 0)
	}
	return out
}

// A seed always generates the same statements, and another seed others:
// a finding is replayed from its seed.
func TestGeneratorIsSeeded(t *testing.T) {
	a, b, c := generate(1, 2000), generate(1, 2000), generate(2, 2000)
	same := 0
	for i := range a {
		if a[i].SQL != b[i].SQL {
			t.Fatalf("seed 1, statement %d: %q then %q", i, a[i].SQL, b[i].SQL)
		}
		if a[i].SQL == c[i].SQL {
			same++
		}
	}
	if same == len(a) {
		t.Fatal("seeds 1 and 2 generate the same statements")
	}
}

// The generator reaches every placement and every spelling of a name, and
// keeps the tables it writes bounded.
func TestGeneratorCoversPlacementsAndSpellings(t *testing.T) {
	sts := generate(3, 5000)
	seen := map[string]bool{}
	all := ""
	for _, st := range sts {
		seen[st.Placement] = true
		all += st.SQL + "\n"
	}
	for _, p := range placements {
		if !seen[p.name] {
			t.Errorf("placement %s never generated", p.name)
		}
	}
	for _, want := range []string{`"random"(`, "main.random(", "system.main.random(", `"system"."main"."range"(`,
		"RANDOM(", `main."sleep_ms"(`, "ago(INTERVAL 1 DAY)", "age(TIMESTAMP", "use_large_enum := ", "USING SAMPLE", "TABLESAMPLE", "rowid",
		"DEFAULT", "GENERATED ALWAYS", "CREATE MACRO", "CREATE VIEW", "CREATE TABLE", "CALL "} {
		if !strings.Contains(all, want) {
			t.Errorf("no statement contains %q", want)
		}
	}
	g := NewGenerator(4, testFunctions)
	for range 5000 {
		g.Result(g.Next(), true)
		if len(g.pool) > len(baseTables)+maxExtraTables+1 {
			t.Fatalf("%d tables in the pool", len(g.pool))
		}
	}
}

func TestReason(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{`Binder Error: Referenced column "x" not found in FROM clause!` + "\nLINE 1: ...", "Binder Error: Referenced column ? not found in FROM clause!"},
		{"duckraft: not deterministic across replicas: random() in UPDATE would give", "duckraft: not deterministic across replicas: f() in UPDATE would give"},
		{"entry 16: Catalog Error: Table with name c5 does not exist!", "entry N: Catalog Error: Table with name OBJ does not exist!"},
	} {
		if got := Reason(tc.msg); got != tc.want {
			t.Errorf("Reason(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}

// A skipped placement is never generated.
func TestGeneratorSkips(t *testing.T) {
	g := NewGenerator(5, testFunctions, "alter-set-default", "rowid")
	for range 3000 {
		st := g.Next()
		g.Result(st, true)
		if st.Placement == "alter-set-default" || st.Placement == "rowid" {
			t.Fatalf("skipped placement generated: %s", st.SQL)
		}
	}
}

// Macros, DuckDB's own among them, and age() with one argument are called
// in every place a write evaluates or stores an expression.
func TestGeneratorCallsMacrosEverywhere(t *testing.T) {
	seen := map[string]map[string]bool{}
	for _, st := range generate(6, 20000) {
		if seen[st.Func] == nil {
			seen[st.Func] = map[string]bool{}
		}
		seen[st.Func][st.Placement] = true
	}
	for _, fn := range []string{"ago", "age"} {
		for _, p := range []string{"update-set", "update-where", "delete-where", "insert-values", "insert-select", "subquery",
			"create-table-as", "column-default", "alter-set-default", "generated-column", "macro", "view", "trigger"} {
			if !seen[fn][p] {
				t.Errorf("%s() never generated in placement %s", fn, p)
			}
		}
	}
}

// The hunter's function list, from a real DuckDB, holds DuckDB's own
// macros that read the clock, as scalars with their parameters.
func TestFunctionsQueryListsMacros(t *testing.T) {
	db, err := engine.Open("", engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rows, err := c.QueryStrings(context.Background(), "SELECT function_name || ' ' || function_type || ' ' || \"3\" FROM ("+functionsQuery+") AS f(function_name, function_type, \"3\", \"4\")")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ago macro i", "pg_conf_load_time macro ", "pg_postmaster_start_time macro ", "now scalar ", "histogram table_macro "} {
		found := false
		for _, r := range rows {
			found = found || strings.HasPrefix(r, want)
		}
		if !found {
			t.Errorf("the hunter's function list lacks %q", want)
		}
	}
}
