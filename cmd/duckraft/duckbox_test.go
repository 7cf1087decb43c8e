package main

import (
	"context"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/client"
)

// connect opens a client connection to a server of startServer.
func connect(t *testing.T, addr string) *client.Conn {
	t.Helper()
	c, err := client.Connect(context.Background(), addr, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestNestedValuesAsDuckDBPrintsThem: a cell of every nested kind reads
// as DuckDB 2.0's own cast to VARCHAR of the same value, asked of the real
// DuckDB behind the server: lists, arrays, structs, maps, unions, their
// combinations, strings that DuckDB quotes inside them, NULLs, wide
// characters and JSON.
func TestNestedValuesAsDuckDBPrintsThem(t *testing.T) {
	c := connect(t, startServer(t))
	exprs := []string{
		"[1, 2, 3]",
		"['a', 'b c', NULL]",
		"['it''s', 'a,b', '[x]', '', ' pad ', 'NULL', 'null']",
		"{'a': 1, 'b': ['x', 'y']}",
		"{'a''b': 1, 'c d': 'e:f'}",
		"MAP {'k': [1, 2], 'l': NULL}",
		"MAP {'a b': {'x': 1}, 'c=d': {'x': 2}}",
		"MAP {1: 'v', 2: 'w,x'}",
		"[{'a': 1}, {'a': NULL}, NULL]",
		"[[1, 2], [], NULL]",
		"{'s': 'ünï 🦆 中文', 'n': 1.5}",
		"[1, 2, 3]::INTEGER[3]",
		"union_value(t := 'x')",
		"[1.5::DOUBLE, -0.0::DOUBLE, 1e300]",
		"[DATE '2024-01-01', NULL]",
		"{'k': MAP {1: ['v']}}",
		"'{\"a\": [1, 2], \"b\": {\"c\": null}}'::JSON",
		"[repeat('long', 10)]",
		"{'t': '\t', 'n': 'a\nb'}",
	}
	for _, e := range exprs {
		t.Run(e, func(t *testing.T) {
			rows, err := c.Query(context.Background(), "SELECT "+e+" AS v, ("+e+")::VARCHAR AS s")
			if err != nil {
				t.Fatal(err)
			}
			ch, err := rows.NextChunk()
			if err != nil || ch == nil || ch.Rows != 1 {
				t.Fatalf("chunk %v, %v", ch, err)
			}
			if got, want := cell(ch.Columns[0], 0), cell(ch.Columns[1], 0); got != want {
				t.Errorf("cell %q, DuckDB's VARCHAR %q", got, want)
			}
			for {
				if ch, err := rows.NextChunk(); err != nil || ch == nil {
					break
				}
			}
		})
	}
}

// render prints the result of sql in duckbox mode fitted to a terminal
// cols wide (0: not a terminal).
func render(t *testing.T, c *client.Conn, sql string, cols int) string {
	t.Helper()
	rows, err := c.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	dp := duckboxPrinter{w: &b, maxRows: maxRows}
	if cols > 0 {
		dp.width = func() int { return cols }
	}
	if err := dp.print(rows, nil); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestDuckboxFitsTheTerminal prints real results in duckbox mode as
// DuckDB 2.0's shell prints them on a terminal of a given width (facts of
// its box renderer): a long value of a short result wrapped over lines, a
// nested one laid out as DuckDB lays it out (a struct's fields one per
// line, NULL in it as null), the type header wrapped too; in a longer
// result cut with "…" at the width of the terminal, wide characters
// counted twice; middle columns left out with the counts under the box;
// large numbers read out; and no width limit when the output is not a
// terminal. Every line of a box is as wide as every other.
func TestDuckboxFitsTheTerminal(t *testing.T) {
	c := connect(t, startServer(t))
	x76 := strings.Repeat("x", 76)
	cases := []struct {
		name  string
		sql   string
		cols  int // 0: not a terminal
		width int // of every line of the box
		want  string
	}{
		{"long value wraps", "SELECT repeat('x', 200) AS long", 80, 80,
			"├" + strings.Repeat("─", 78) + "┤\n│ " + x76 + " │\n│ " + x76 + " │\n│ " + strings.Repeat("x", 48) + strings.Repeat(" ", 28) + " │\n└"},
		{"nested value laid out", "SELECT {'name': 'duck', 'tags': ['a', 'b', NULL], 'address': {'street': 'Main Street 1', 'city': 'Amsterdam'}, 'n': 12345} AS s, repeat('x', 60) AS t", 80, 80,
			"│ struct(name varchar, tags varchar[], │                varchar                │\n" +
				"│  address struct(street varchar, city │                                       │\n" +
				"│         varchar), n integer)         │                                       │\n" +
				"├──────────────────────────────────────┼───────────────────────────────────────┤\n" +
				"│ {                                    │ xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx │\n" +
				"│   'name': duck,                      │ xxxxxxxxxxxxxxxxxxxxxxx               │\n" +
				"│   'tags': [a, b, null],              │                                       │\n" +
				"│   'address': {                       │                                       │\n" +
				"│     'street': Main Street 1,         │                                       │\n" +
				"│     'city': Amsterdam                │                                       │\n" +
				"│   },                                 │                                       │\n" +
				"│   'n': 12345                         │                                       │\n" +
				"│ }                                    │                                       │\n" +
				"└──────────────────────────────────────┴───────────────────────────────────────┘\n"},
		{"list of structs one per line", "SELECT [{'k': i, 'v': repeat('w', i)} FOR i IN range(12)] AS l", 80, 80,
			"│ [" + strings.Repeat(" ", 75) + " │\n│  {'k': 0, 'v': ''}," + strings.Repeat(" ", 57) + " │\n"},
		{"rows separated when values wrap", "SELECT i, repeat(i::VARCHAR, 120) AS s FROM range(1, 3) r(i)", 80, 80,
			"│     1 │ " + strings.Repeat("1", 68) + " │\n│       │ " + strings.Repeat("1", 52) + strings.Repeat(" ", 16) + " │\n├───────┼"},
		{"wide characters cut in a long result", "SELECT repeat('中', 50) AS wide FROM range(50)", 80, 80,
			"│ " + strings.Repeat("中", 37) + "…  │\n"},
		{"middle columns left out", "SELECT i AS c1, i AS c2, i AS c3, i AS c4, i AS c5, i AS c6, i AS c7, i AS c8, i AS c9, i AS c10, i AS c11, i AS c12, i AS c13, i AS c14, i AS c15, i AS c16, repeat('z', 30) AS c17 FROM range(100) r(i)", 80, 80,
			"│  c1   │  c2   │  c3   │ … │  c14  │  c15  │  c16  │           c17            │\n" +
				"│ int64 │ int64 │ int64 │ … │ int64 │ int64 │ int64 │         varchar          │\n" +
				"├───────┼───────┼───────┼───┼───────┼───────┼───────┼──────────────────────────┤\n" +
				"│     0 │     0 │     0 │ … │     0 │     0 │     0 │ zzzzzzzzzzzzzzzzzzzzzzz… │\n"},
		{"counts under the box", "SELECT i AS c1, i AS c2, i AS c3, i AS c4, i AS c5, i AS c6, i AS c7, i AS c8, i AS c9, i AS c10, i AS c11, i AS c12, i AS c13, i AS c14, i AS c15, i AS c16, repeat('z', 30) AS c17 FROM range(100) r(i)", 80, 80,
			"┘\n  100 rows (40 shown)" + strings.Repeat(" ", 37) + "17 columns (7 shown)\n"},
		{"large numbers read out", "SELECT 1234567 AS a, 9876543210 AS b", 80, 35,
			"│    1234567     │   9876543210   │\n│ (1.23 million) │ (9.88 billion) │\n"},
		{"a million rows", "SELECT * FROM range(1000000)", 80, 21,
			"└───────────────────┘\n  1.00 million rows\n     (40 shown)     \n   (1000000 total)  \n"},
		{"no limit off a terminal", "SELECT repeat('x', 200) AS long, 1234567 AS n", 0, 214,
			"│ " + strings.Repeat("x", 200) + " │ 1234567 │\n└"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := render(t, c, tc.sql, tc.cols)
			if !strings.Contains(out, tc.want) {
				t.Errorf("output:\n%s\nwant it to hold:\n%s", out, tc.want)
			}
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "┌") || strings.HasPrefix(line, "│") || strings.HasPrefix(line, "├") || strings.HasPrefix(line, "└") {
					if w := width(line); w != tc.width {
						t.Errorf("line %d columns wide, want %d: %q", w, tc.width, line)
					}
				}
			}
		})
	}
}
