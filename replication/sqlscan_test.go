package replication

import (
	"context"
	"errors"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/wal"
)

func TestCheckStatement(t *testing.T) {
	tests := []struct {
		sql     string
		refused bool
	}{
		{"INSERT INTO t VALUES (1)", false},
		{"  (SELECT 1)", false},
		{"INSERT INTO t VALUES ('a;b')", false},
		{"INSERT INTO t VALUES (1);  \n", false},
		{"INSERT INTO t VALUES (1); -- trailing comment", false},
		{`SELECT $$x; COMMIT$$, "col;umn", E'it\'s; here'`, false},
		{"/* COMMIT */ INSERT INTO t VALUES (1)", false},
		{"COMMIT", true},
		{"-- hi\n rollback", true},
		{"/* a /* nested */ */ Begin Transaction", true},
		{"SET threads = 4", true},
		{"USE other", true},
		{"ATTACH 'x.db'", true},
		{"INSERT INTO t VALUES (1); COMMIT", true},
		{"SELECT 1;SELECT 2", true},
		{"", true},
		{"  -- only a comment", true},
		{"SELECT 1;;", false},
		// DuckDB reads \f and \v as space, and runs COMMITé as COMMIT.
		{"\fCOMMIT", true},
		{"\vSET threads = 4", true},
		{"SELECT 1;\f\v", false},
		{"COMMITé", true},
		{"ROLLBACK中", true},
		// A dollar quote's tag may hold non-ASCII letters, and 1x$a$ is
		// 1 AS x$a$, not 1x and a dollar quote.
		{"SELECT 1x$a$; COMMIT; SELECT 1 AS y$a$", true},
		{"SELECT 1_$a$; COMMIT; SELECT 1 AS y$a$", true},
		{"SELECT $é$;COMMIT$é$", false},
		{`SELECT a$e'\'; COMMIT; SELECT '\'`, true},
	}
	for _, tt := range tests {
		err := checkStatement(sqltext.Parse(tt.sql))
		if got := err != nil; got != tt.refused || err != nil && !errors.Is(err, ErrRefused) {
			t.Errorf("checkStatement(%q) = %v, want refused %v", tt.sql, err, tt.refused)
		}
	}
}

func TestInlineParams(t *testing.T) {
	tests := []struct {
		sql    string
		params []wal.Param
		want   string
	}{
		{"SELECT ?, ?", []wal.Param{wal.Int64(-1), wal.String("it's")}, "SELECT -1::BIGINT, 'it''s'"},
		{"SELECT $2, $1, '?', \"$1\"", []wal.Param{wal.Bool(true), wal.Null()}, "SELECT NULL, true, '?', \"$1\""},
		{"SELECT ?", []wal.Param{wal.Blob([]byte{0, 0xff})}, `SELECT '\x00\xFF'::BLOB`},
		{"SELECT ?", []wal.Param{wal.Float64(math.Inf(-1))}, "SELECT '-inf'::DOUBLE"},
		{"SELECT ?", []wal.Param{wal.Float64(0.1)}, "SELECT '0.1'::DOUBLE"},
		{"SELECT ?", []wal.Param{wal.Uint64(math.MaxUint64)}, "SELECT 18446744073709551615::UBIGINT"},
		{"SELECT ?", []wal.Param{wal.Timestamp(1)}, "SELECT make_timestamp(1::BIGINT)"},
		{"SELECT ?", []wal.Param{wal.Date(1)}, "SELECT DATE '1970-01-02'"},
		{"SELECT ?", []wal.Param{wal.UUID([16]byte{15: 1})}, "SELECT '00000000-0000-0000-0000-000000000001'::UUID"},
		{"SELECT $10", make([]wal.Param, 10), "SELECT NULL"},
		{"SELECT ? /* ? */, $$?$$, E'\\'?', -- ?\n$1", []wal.Param{wal.Int64(1)}, "SELECT 1::BIGINT /* ? */, $$?$$, E'\\'?', -- ?\n1::BIGINT"},
		{"SELECT a$1, $name, x$$1, $1", []wal.Param{wal.Bool(false)}, "SELECT a$1, $name, x$$1, false"},
		// DuckDB reads ?2 as $2; the applier has always read ? then 2.
		{"SELECT ?2", []wal.Param{wal.Int64(1)}, "SELECT 1::BIGINT2"},
	}
	for _, tt := range tests {
		got, err := inlineParams(sqltext.Parse(tt.sql), tt.params)
		if err != nil || got != tt.want {
			t.Errorf("inlineParams(%q) = %q, %v; want %q", tt.sql, got, err, tt.want)
		}
	}
	for _, sql := range []string{"SELECT ?, ?", "SELECT $2", "SELECT $0", "SELECT $99999999999999999999"} {
		if _, err := inlineParams(sqltext.Parse(sql), []wal.Param{wal.Null()}); err == nil {
			t.Errorf("inlineParams(%q) accepted", sql)
		}
	}
}

func TestHasWord(t *testing.T) {
	tests := []struct {
		sql  string
		want bool
	}{
		{"INSERT INTO t VALUES (1) RETURNING *", true},
		{"insert into t values (1) returning(i)", true},
		{"DELETE FROM t WHERE i = 1 RETURNING", true},
		{"INSERT INTO t VALUES ('RETURNING')", false},
		{`INSERT INTO t("returning") VALUES (1)`, false},
		{"INSERT INTO t VALUES (1) -- RETURNING *", false},
		{"INSERT INTO returning_log VALUES (1)", false},
		{"INSERT INTO t(not_returning) VALUES (1)", false},
		{"INSERT INTO t VALUES (1) /* c */ Returning*", true},
		{"SELECT $$ RETURNING $$, E'\\' RETURNING'", false},
		{"SELECT 1 AS x$returning, 2 AS returning$x, $returning", false},
	}
	for _, tt := range tests {
		if got := hasWord(sqltext.Parse(tt.sql), "RETURNING"); got != tt.want {
			t.Errorf("hasWord(%q) = %v, want %v", tt.sql, got, tt.want)
		}
	}
}

// TestCheckStatementKeepsTransaction runs every text checkStatement accepts,
// tricky ones and ones pieced together at random, in a DuckDB transaction
// and checks that none ends it: the guarantee the applier relies on.
func TestCheckStatementKeepsTransaction(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	c, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Exec(ctx, "CREATE TABLE t(i INTEGER)"); err != nil {
		t.Fatal(err)
	}
	texts := []string{
		"\fCOMMIT", "\vROLLBACK", "COMMITé", "ROLLBACK中 ", "COMMIT TRANSACTIONé;",
		"SELECT 1x$a$; COMMIT; SELECT 1 AS y$a$", "SELECT 1_$a$; COMMIT; SELECT 1 AS y$a$",
		"SELECT 1e5e5$a$; COMMIT; SELECT 1 AS y$a$", "SELECT 1.e$a$;COMMIT;SELECT 1 AS y$a$",
		"SELECT $é$;COMMIT$é$", `SELECT a$e'\'; COMMIT; SELECT '\'`,
		"/* a /* b */ COMMIT */ SELECT 1", "SELECT 'a;COMMIT', \"b;COMMIT\", E'\\';COMMIT;'",
		"SELECT 1 -- ;COMMIT", "INSERT INTO t VALUES (1);\f",
	}
	frags := []string{"SELECT ", "INSERT INTO t VALUES (1)", "COMMIT", "ROLLBACK", "END", "BEGIN", "SET threads = 1",
		" ", "\n", "\f", "\v", ";", "'", "\"", "E'", "\\", "$", "$$", "$a$", "$é$", "é", "中", "1", "1x", "1_", "1e5",
		"a", "_", "y", "--", "\n", "/*", "*/", "(", ")", "AS ", ","}
	r := rand.New(rand.NewSource(1))
	for range 3000 {
		var b strings.Builder
		for range 1 + r.Intn(8) {
			b.WriteString(frags[r.Intn(len(frags))])
		}
		texts = append(texts, b.String())
	}
	for _, sql := range texts {
		if checkStatement(sqltext.Parse(sql)) != nil {
			continue
		}
		if err := c.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		c.Exec(ctx, sql)
		if !c.InTransaction() {
			t.Errorf("checkStatement accepted %q, which ended the transaction", sql)
			continue
		}
		if err := c.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
