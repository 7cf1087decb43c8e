package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestOutputModes prints results in DuckDB's shell modes against a real
// Quack server (real DuckDB): duckbox shows 40 rows of a longer result,
// its first and last 20 around three rows of "·", and the count under
// the box (DuckDB 2.0's footer); lists and structs are JSON values in json mode.
func TestOutputModes(t *testing.T) {
	addr := startServer(t)
	cases := []struct {
		name, mode, sql, want string
	}{
		{"duckbox 100 rows", "duckbox", "SELECT * FROM range(100)", "┌────────────┐\n│   range    │\n│   int64    │\n├────────────┤\n" +
			rowsOf(0, 20) + "│          · │\n│          · │\n│          · │\n" + rowsOf(80, 100) +
			"└────────────┘\n   100 rows \n  (40 shown) \n"},
		{"duckbox 43 rows all shown", "duckbox", "SELECT * FROM range(43)", "│    41 │\n│    42 │\n└───────┘\n"},
		{"duckbox empty", "duckbox", "SELECT 1 AS a WHERE false", "┌────────┐\n│   a    │\n│ int32  │\n└────────┘\n  0 rows\n"},
		{"duckbox text left, numbers right", "duckbox", "SELECT 'duck' AS s, 12345 AS n UNION ALL SELECT 'x', 1 ORDER BY n", "┌─────────┬───────┐\n│    s    │   n   │\n│ varchar │ int32 │\n├─────────┼───────┤\n│ x       │     1 │\n│ duck    │ 12345 │\n└─────────┴───────┘\n"},
		{"box", "box", "SELECT 'a' AS name, 1 AS n", "┌──────┬───┐\n│ name │ n │\n├──────┼───┤\n│ a    │ 1 │\n└──────┴───┘\n"},
		{"table", "table", "SELECT 'a' AS name, 1 AS n", "+------+---+\n| name | n |\n+------+---+\n| a    | 1 |\n+------+---+\n"},
		{"markdown", "markdown", "SELECT 'a|b' AS name, 1 AS n", "| name | n |\n|------|--:|\n| a\\|b | 1 |\n"},
		{"line", "line", "SELECT 1 AS a, 'x' AS longer UNION ALL SELECT 2, 'y' ORDER BY a", "     a = 1\nlonger = x\n\n     a = 2\nlonger = y\n"},
		{"list", "list", "SELECT 1 AS a, NULL AS b", "a|b\n1|NULL\n"},
		{"jsonlines", "jsonlines", "SELECT * FROM range(2) r(i)", "{\"i\":0}\n{\"i\":1}\n"},
		{"json nested", "json", "SELECT [1, 2] AS l, {'a': 'x', 'b': [NULL]} AS s, MAP {'k': 2} AS m", "[\n{\"l\":[1,2],\"s\":{\"a\":\"x\",\"b\":[null]},\"m\":{\"k\":2}}\n]\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := cliRun(t, "", "--server", addr, "--token", token, "--format", tc.mode, "-c", tc.sql)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(stdout, tc.want) {
				t.Errorf("output:\n%s\nwant it to hold:\n%s", stdout, tc.want)
			}
		})
	}
}

// rowsOf is duckbox's rows of range(from, to) in a column 10 wide.
func rowsOf(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "│ %10d │\n", i)
	}
	return b.String()
}
