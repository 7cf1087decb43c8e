package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

func newTestParser(t testing.TB) *Parser {
	t.Helper()
	p, err := NewParser()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestParse(t *testing.T) {
	p := newTestParser(t)
	for _, tt := range []struct {
		sql    string
		n      int
		sel    bool
		funcs  []string
		errMsg string
	}{
		{sql: "SELECT 1", n: 1, sel: true},
		{sql: "SELECT nextval('s'), a + 1 FROM t WHERE b = 'nextval('", n: 1, sel: true, funcs: []string{"nextval", "+"}},
		{sql: `SELECT "NextVal"('s')`, n: 1, sel: true, funcs: []string{"nextval"}},
		{sql: "SELECT ('s').nextval()", n: 1, sel: true, funcs: []string{"nextval"}},
		{sql: "SELECT sum(a) OVER (), count(*) FROM t", n: 1, sel: true, funcs: []string{"sum", "count_star"}},
		{sql: "FROM dbgen(sf = 0)", n: 1, sel: true, funcs: []string{"dbgen"}},
		{sql: "SELECT 1; SELECT setseed(0.5);", n: 2, sel: true, funcs: []string{"setseed"}},
		{sql: "DESCRIBE t", n: 1, sel: true},
		{sql: "SUMMARIZE SELECT random()", n: 1, sel: true, funcs: []string{"random"}},
		{sql: "SHOW TABLES", n: 1, sel: true},
		{sql: "PIVOT t ON b IN ('x') USING sum(a)", n: 1, sel: true, funcs: []string{"sum"}},
		{sql: "INSERT INTO t VALUES (nextval('s'))", n: 1},
		{sql: "SELECT 1; INSERT INTO t VALUES (';'); -- x;\n COMMIT", n: 3},
		// DuckDB 1.5 first created an ENUM of b's values, in a statement of
		// its own; 2.0 plans it as one statement, still not a plain SELECT.
		{sql: "PIVOT t ON b USING sum(a)", n: 1},
		{sql: "SELECT 'a;b', $$c;d$$ /* ; */", n: 1, sel: true},
		{sql: " ; -- nothing\n", n: 0, sel: true},
		{sql: "SELEC 1", errMsg: "syntax error"},
		{sql: "SELECT * INTO t2 FROM t", errMsg: "syntax error at or near \"INTO\""},
		{sql: "INSERT INTO t VALUES (1; SELECT 2", errMsg: "syntax error"},
		{sql: "SELECT 1 -- \x00\n, nextval('s')", errMsg: "NUL byte"},
	} {
		got, err := p.Parse(tt.sql)
		if tt.errMsg != "" {
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(e.Message, tt.errMsg) {
				t.Errorf("Parse(%q) error = %v; want an error with %q", tt.sql, err, tt.errMsg)
			}
			if _, err := p.Count(tt.sql); !errors.As(err, &e) || !strings.Contains(e.Message, tt.errMsg) {
				t.Errorf("Count(%q) error = %v; want an error with %q", tt.sql, err, tt.errMsg)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.sql, err)
			continue
		}
		funcs := slices.Clone(got.Functions)
		slices.Sort(funcs)
		want := slices.Clone(tt.funcs)
		slices.Sort(want)
		if got.Statements != tt.n || got.Select != tt.sel || !reflect.DeepEqual(funcs, want) {
			t.Errorf("Parse(%q) = %d statements, select %v, functions %q; want %d, %v, %q",
				tt.sql, got.Statements, got.Select, got.Functions, tt.n, tt.sel, tt.funcs)
		}
		if got.Select != (got.JSON != "") {
			t.Errorf("Parse(%q): select %v with JSON %.30q", tt.sql, got.Select, got.JSON)
		}
		if n, err := p.Count(tt.sql); err != nil || n != tt.n {
			t.Errorf("Count(%q) = %d, %v; want %d", tt.sql, n, err, tt.n)
		}
	}
}

// TestSkimMatchesDecode checks the one-pass reader of json_serialize_sql's
// answer against a full decode, on trees with escapes in names and strings
// that spell keys.
func TestSkimMatchesDecode(t *testing.T) {
	p := newTestParser(t)
	for _, sql := range []string{
		`SELECT 'a"b\' AS "function_name", "x""y"(1), '{"function_name":"nextval"}' AS j`,
		`SELECT '"function_name":"nextval"', "a\b"('\"')`,
		`WITH c AS (SELECT lower(x) AS y FROM t) SELECT upper(y), list_transform([1], v -> v + 1) FROM c`,
		`SELECT (SELECT max(a) FROM t), exists(SELECT 1), CASE WHEN a THEN nextval('s') END FROM t`,
		`SELECT 1; SELECT 2; FROM t`,
	} {
		got, err := p.Parse(sql)
		if err != nil {
			t.Fatalf("Parse(%q): %v", sql, err)
		}
		var tree struct {
			Statements []any `json:"statements"`
		}
		if err := json.Unmarshal([]byte(got.JSON), &tree); err != nil {
			t.Fatal(err)
		}
		var want []string
		var walk func(any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				if name, ok := v["function_name"].(string); ok && !slices.Contains(want, strings.ToLower(name)) {
					want = append(want, strings.ToLower(name))
				}
				for _, c := range v {
					walk(c)
				}
			case []any:
				for _, c := range v {
					walk(c)
				}
			}
		}
		walk(tree.Statements)
		funcs := slices.Clone(got.Functions)
		slices.Sort(funcs)
		slices.Sort(want)
		if got.Statements != len(tree.Statements) || !reflect.DeepEqual(funcs, want) {
			t.Errorf("Parse(%q) = %d statements, functions %q; decode finds %d, %q",
				sql, got.Statements, funcs, len(tree.Statements), want)
		}
	}
	for _, bad := range []string{`{"error":false,"statements":[{"a":"b`, `{"error":false,"statements":[}`, `{"error":true}`} {
		if _, ok := skim(bad); ok {
			t.Errorf("skim(%q) accepted", bad)
		}
	}
}

func TestParserSideEffectFunctions(t *testing.T) {
	p := newTestParser(t)
	names, err := p.SideEffectFunctions()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"nextval", "setseed", "random"} {
		if !slices.Contains(names, want) {
			t.Errorf("SideEffectFunctions() = %q; missing %s", names, want)
		}
	}
}

func TestParserConcurrent(t *testing.T) {
	p := newTestParser(t)
	var wg sync.WaitGroup
	for g := range 2 * maxIdleParseConns {
		wg.Go(func() {
			for i := range 20 {
				sql := fmt.Sprintf("SELECT nextval('s%d'), %d", g, i)
				got, err := p.Parse(sql)
				if err != nil || got.Statements != 1 || !slices.Equal(got.Functions, []string{"nextval"}) {
					t.Errorf("Parse(%q) = %+v, %v", sql, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	p.Close()
	if _, err := p.Parse("SELECT 1"); err == nil {
		t.Error("Parse after Close: no error")
	}
}
