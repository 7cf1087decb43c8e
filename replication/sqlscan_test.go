package replication

import (
	"errors"
	"math"
	"testing"

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
	}
	for _, tt := range tests {
		err := checkStatement(tt.sql)
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
	}
	for _, tt := range tests {
		got, err := inlineParams(tt.sql, tt.params)
		if err != nil || got != tt.want {
			t.Errorf("inlineParams(%q) = %q, %v; want %q", tt.sql, got, err, tt.want)
		}
	}
	if _, err := inlineParams("SELECT ?, ?", []wal.Param{wal.Null()}); err == nil {
		t.Error("missing parameter accepted")
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
	}
	for _, tt := range tests {
		if got := hasWord(tt.sql, "RETURNING"); got != tt.want {
			t.Errorf("hasWord(%q) = %v, want %v", tt.sql, got, tt.want)
		}
	}
}
