package sqltext

import (
	"errors"
	"strings"
	"testing"
)

// TestQuotedCalls: DuckDB resolves a quoted function name ("random"(),
// main."random"()) to the function, so the lexer's rules count it as a call
// of that function.
func TestQuotedCalls(t *testing.T) {
	refused := []struct{ sql, why string }{
		{`UPDATE t SET x = "random"()`, "random() in UPDATE"},
		{`UPDATE t SET x = main."random"()`, "random() in UPDATE"},
		{`UPDATE t SET x = "RANDOM"()`, "random() in UPDATE"},
		{`DELETE FROM t WHERE "uuid"() IS NULL`, "uuid() in DELETE"},
		{`CREATE TABLE t AS SELECT "random"() AS r`, "create the table with its column types first"},
		{`CREATE TABLE t (a INT, b DOUBLE DEFAULT "random"())`, "random() in a column default"},
		{`CREATE TABLE t (a INT, b TIMESTAMPTZ DEFAULT "now"())`, "now() in a column default"},
		{`CREATE MACRO r() AS "gen_random_uuid"()`, "gen_random_uuid() in a stored view, macro"},
		{`UPDATE t SET x = 1 FROM "read_csv"('x.csv') u`, "read_csv() reads files"},
		{`INSERT INTO t SELECT system.main."now"()`, "without a qualifier"},
		{`CREATE VIEW v AS SELECT rowid AS r, a FROM t`, "rowid in a stored view"},
		{`CREATE VIEW v AS SELECT a FROM t USING SAMPLE 5 ROWS`, "sampling in a stored view"},
		{`CREATE MACRO tm() AS TABLE SELECT a FROM t TABLESAMPLE reservoir(5 ROWS)`, "sampling in a stored view"},
		{`UPDATE t SET b = (SELECT count(*) FROM pragma_database_size())`, "pragma_database_size() reads files local"},
		{`DELETE FROM t WHERE a < (SELECT count(*) FROM duckdb_tables())`, "duckdb_tables() reads files local"},
		{`INSERT INTO t VALUES (current_schema())`, "current_schema() depends on the client's session"},
		{`UPDATE t SET db = "current_database"()`, "current_database() depends"},
		{`CREATE MACRO tm() AS TABLE SELECT "rowid" FROM t`, "rowid in a stored view"},
	}
	for _, tt := range refused {
		_, err := Deterministic(Parse(tt.sql), leaderTime, testVolatile)
		if !errors.Is(err, ErrNondeterministic) || !strings.Contains(err.Error(), tt.why) {
			t.Errorf("Deterministic(%q) error = %v\nwant ErrNondeterministic with %q", tt.sql, err, tt.why)
		}
	}
	rewritten := []struct{ sql, want string }{
		{`UPDATE t SET at = "now"()`, "UPDATE t SET at = TIMESTAMPTZ '2026-11-30 20:11:50.123456+00'"},
		{`UPDATE t SET "current_date" = 1`, `UPDATE t SET "current_date" = 1`},
		{`UPDATE t SET x = "random"`, `UPDATE t SET x = "random"`}, // a column
	}
	for _, tt := range rewritten {
		plan, err := Deterministic(Parse(tt.sql), leaderTime, testVolatile)
		if err != nil || plan.SQL != tt.want {
			t.Errorf("Deterministic(%q) = %q, %v; want %q", tt.sql, plan.SQL, err, tt.want)
		}
	}
	plan, err := Deterministic(Parse(`INSERT INTO t VALUES ("uuid"())`), leaderTime, testVolatile)
	if err != nil || plan.Materialize == nil {
		t.Errorf(`Deterministic(INSERT … "uuid"()) = %+v, %v; want a Materialize plan`, plan, err)
	}
}

// duckdbSpaces are the non-ASCII characters DuckDB 1.5.6 accepts between
// two keywords (INSERT<c>INTO t VALUES (1)), found by trying every code
// point of the Basic Multilingual Plane.
var duckdbSpaces = []rune{
	0x00a0, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a,
	0x200b, 0x202f, 0x205f, 0x2060, 0x3000, 0xfeff,
}

// TestUnicodeSpaces: DuckDB reads U+00A0 and the other duckdbSpaces as
// white space, so SELECT\u00a0random() calls random; the lexer must split
// there too. Inside strings they stay.
func TestUnicodeSpaces(t *testing.T) {
	for _, r := range duckdbSpaces {
		sp := string(r)
		sql := "UPDATE" + sp + "t" + sp + "SET" + sp + "x" + sp + "=" + sp + "random()"
		if _, err := Deterministic(Parse(sql), leaderTime, testVolatile); !errors.Is(err, ErrNondeterministic) {
			t.Errorf("Deterministic(%q) error = %v, want ErrNondeterministic", sql, err)
		}
		toks, err := Lex("SELECT" + sp + "'a" + sp + "b'")
		if err != nil {
			t.Fatal(err)
		}
		if len(toks) != 3 || toks[1].Kind != TokSpace || toks[2].Text != "'a"+sp+"b'" {
			t.Errorf("Lex with %U = %+v, want word, space, string", r, toks)
		}
	}
	// U+0085 is no space to DuckDB: it stays part of the word.
	if toks, _ := Lex("a\u0085b"); len(toks) != 1 {
		t.Errorf("Lex(a U+0085 b) = %+v, want one word", toks)
	}
}

func TestReadsRows(t *testing.T) {
	for sql, want := range map[string]bool{
		"INSERT INTO t VALUES (1)":                                false,
		"INSERT INTO t SELECT * FROM u":                           true,
		"INSERT INTO t TABLE u":                                   true,
		"INSERT INTO t FROM u":                                    true,
		"CREATE TABLE c AS TABLE u":                               true,
		"CREATE TABLE c (a INT)":                                  false,
		"CREATE OR REPLACE TABLE c (a INT)":                       false,
		"DROP TABLE c":                                            false,
		"COMMENT ON TABLE c IS 'x'":                               false,
		"ALTER TABLE t ADD COLUMN id BIGINT DEFAULT nextval('s')": true,
		"MERGE INTO t USING u ON t.k = u.k WHEN NOT MATCHED THEN INSERT VALUES (nextval('s'))": true,
		"UPDATE t SET a = 1":                    true,
		"DELETE FROM t":                         true,
		"INSERT INTO t VALUES ('SELECT')":       false,
		"INSERT\u00a0INTO t\u00a0SELECT\u00a01": true,
		"INSERT INTO t VALUES ('x":              true,
	} {
		if got := Parse(sql).ReadsRows(); got != want {
			t.Errorf("ReadsRows(%q) = %v, want %v", sql, got, want)
		}
	}
}
