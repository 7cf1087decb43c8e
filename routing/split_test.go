package routing

import (
	"testing"

	"github.com/duckraft/duckraft/node/sqltext"
)

func TestSplitTableTokens(t *testing.T) {
	for sql, want := range map[string]string{
		`SELECT * FROM "a.b"`:                        `"a.b"`,
		"select*from t":                              "t",
		"SELECT * /* all */ FROM main . t -- x\n;":   "main . t",
		`Select * From "db"."main"."t""s";`:          `"db"."main"."t""s"`,
		"\vSELECT * FROM Main.T\v; -- done":          "Main.T",
		"SELECT * FROM a$b":                          "a$b",
		"SELECT * FROM main /* schema */ . lineitem": "main /* schema */ . lineitem",
	} {
		if got, ok := splitTable(sqltext.Parse(sql)); !ok || got != want {
			t.Errorf("%q: %q %v, want %q", sql, got, ok, want)
		}
	}
	for _, sql := range []string{
		"SELECT * FROM t; SELECT 1", "SELECT * FROM t;;", "SELECT * FROM a.b.c.d", "SELECT * FROM t.",
		"SELECT * FROM .t", "SELECT * FROM t..u", `SELECT * FROM ""`, `SELECT * FROM "t`, "SELECT * FROM 't'",
		"SELECT * FROM $1", "SELECT * FROM t AS x", "SELECT ** FROM t", "SELECT * FROM",
		// Bare names are ASCII: DuckDB reads U+00A0 as space, sqltext's lexer
		// as part of a word.
		"SELECT * FROM größe", "SELECT * FROM t\u00a0LIMIT\u00a05",
	} {
		if got, ok := splitTable(sqltext.Parse(sql)); ok {
			t.Errorf("%q split as %q", sql, got)
		}
	}
}

func TestSplitSettingTokens(t *testing.T) {
	for sql, want := range map[string]int{
		"SET duckraft_split_scan = '4'":               4,
		"set session DUCKRAFT_SPLIT_SCAN to 0 -- off": 0,
		"SET duckraft_split_scan=007;":                7,
		"SET /* r */ duckraft_split_scan TO '16' ; ":  16,
	} {
		if got, ok, err := splitSetting(sqltext.Parse(sql)); !ok || err != nil || got != want {
			t.Errorf("%q: %d %v %v, want %d", sql, got, ok, err, want)
		}
	}
	for _, sql := range []string{"SET duckraft_split_scan = 17", "SET duckraft_split_scan = 99999999999999999999"} {
		if _, ok, err := splitSetting(sqltext.Parse(sql)); !ok || err == nil {
			t.Errorf("%q: recognised %v, error %v; want out of range", sql, ok, err)
		}
	}
	for _, sql := range []string{
		"SET duckraft_split_scan = 3 ; SELECT 1", "SET duckraft_split_scan = '3", "SET duckraft_split_scan = 3'",
		"SET duckraft_split_scan = -1", "SET duckraft_split_scan = 1_0", "SET duckraft_split_scan = 3.0",
		"SET duckraft_split_scan = ''", "SET duckraft_split_scan TO3", "SET duckraft_split_scan = E'3'",
		"SET duckraft_split_scan = ' 3'", "SET duckraft_split_scan = 3;;",
	} {
		if n, ok, err := splitSetting(sqltext.Parse(sql)); ok {
			t.Errorf("%q recognised: %d %v", sql, n, err)
		}
	}
}
