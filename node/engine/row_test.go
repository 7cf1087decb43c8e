package engine

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"

	"github.com/duckraft/duckraft/node/sqlquote"
)

func TestQueryRow(t *testing.T) {
	ctx := context.Background()
	c := connect(t, openTest(t))
	exec(t, c, "CREATE TABLE t (i BIGINT, s VARCHAR, b BLOB, l VARCHAR[]); INSERT INTO t VALUES (1, 'one', '\\x01'::BLOB, ['a', 'b']), (2, NULL, NULL, NULL)")

	row, err := c.QueryRow(ctx, "SELECT * FROM t ORDER BY i")
	if err != nil {
		t.Fatal(err)
	}
	want := []any{int64(1), "one", []byte{1}, []any{"a", "b"}}
	if !reflect.DeepEqual(row, want) {
		t.Errorf("first row %#v, want %#v", row, want)
	}
	// The values are copies: reading another result leaves them alone.
	if _, err := c.QueryRow(ctx, "SELECT 'xxx', '\\x02'::BLOB, ['c', 'd'] FROM range(3000)"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(row, want) {
		t.Errorf("first row changed to %#v by the next query", row)
	}

	row, err = c.QueryRow(ctx, "SELECT * FROM t WHERE i = 2")
	if err != nil || !reflect.DeepEqual(row, []any{int64(2), nil, nil, nil}) {
		t.Errorf("NULL row %#v, %v", row, err)
	}
	// Several statements: the row is the last one's; a result of many chunks
	// is left unread.
	row, err = c.QueryRow(ctx, "INSERT INTO t VALUES (3, 'three', NULL, NULL); SELECT count(*)::BIGINT FROM t")
	if err != nil || !reflect.DeepEqual(row, []any{int64(3)}) {
		t.Errorf("multi-statement row %#v, %v", row, err)
	}
	row, err = c.QueryRow(ctx, "SELECT range FROM range(100000)")
	if err != nil || !reflect.DeepEqual(row, []any{int64(0)}) {
		t.Errorf("first of many rows %#v, %v", row, err)
	}

	if row, err := c.QueryRow(ctx, "SELECT * FROM t WHERE i > 100"); !errors.Is(err, ErrNoRows) || row != nil {
		t.Errorf("empty result: %#v, %v, want ErrNoRows", row, err)
	}
	var e *Error
	if _, err := c.QueryRow(ctx, "SELECT * FROM nope"); !errors.As(err, &e) || e.Type != "Catalog" {
		t.Errorf("missing table: %v", err)
	}
	if _, err := c.QueryRow(ctx, "SELECT CASE WHEN range = 3000 THEN error('boom') END FROM range(5000) ORDER BY range DESC"); !errors.As(err, &e) || RawMessage(err) != "boom" {
		t.Errorf("error while executing: %v", err)
	}

	// The Result is closed on return: a context cancelled afterwards does not
	// reach the next statement, and the connection takes another one.
	cctx, cancel := context.WithCancel(ctx)
	if _, err := c.QueryRow(cctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	cancel()
	if n := queryInt64(t, c, "SELECT 42::BIGINT"); n != 42 {
		t.Errorf("after QueryRow: %d", n)
	}
	if _, err := c.QueryRow(cctx, "SELECT 1"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

func TestQueryStrings(t *testing.T) {
	ctx := context.Background()
	c := connect(t, openTest(t))

	got, err := c.QueryStrings(ctx, "SELECT range::VARCHAR, range FROM range(5000)")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5000 {
		t.Fatalf("%d strings, want 5000 over several chunks", len(got))
	}
	for i, s := range got {
		if s != strconv.Itoa(i) {
			t.Fatalf("row %d: %q", i, s)
		}
	}

	got, err = c.QueryStrings(ctx, "SELECT * FROM (VALUES ('b'), (NULL), ('a')) v(s)")
	if err != nil || !reflect.DeepEqual(got, []string{"b", "", "a"}) {
		t.Errorf("with a NULL: %q, %v", got, err)
	}
	exec(t, c, "CREATE TYPE mood AS ENUM ('sad', 'happy')")
	got, err = c.QueryStrings(ctx, "SELECT 'happy'::mood UNION ALL SELECT 'x'::CHAR")
	if err != nil || !reflect.DeepEqual(got, []string{"happy", "x"}) {
		t.Errorf("ENUM and CHAR: %q, %v", got, err)
	}
	if got, err := c.QueryStrings(ctx, "SELECT 'x' WHERE false"); err != nil || got != nil {
		t.Errorf("empty result: %q, %v", got, err)
	}
	if _, err := c.QueryStrings(ctx, "SELECT 1 AS n"); err == nil {
		t.Error("an INTEGER column was read as strings")
	}
	var e *Error
	if _, err := c.QueryStrings(ctx, "SELECT * FROM nope"); !errors.As(err, &e) || e.Type != "Catalog" {
		t.Errorf("missing table: %v", err)
	}
}

// TestSQLQuoteRoundTrip checks sqlquote against DuckDB's own parser: a quoted
// literal reads back as the string, a quoted identifier names it exactly.
func TestSQLQuoteRoundTrip(t *testing.T) {
	ctx := context.Background()
	c := connect(t, openTest(t))
	for _, s := range []string{"plain", "it's", "''", `say "hi"`, `""`, `back\slash`, "Mixed Case", "select", "ünï\ncode", "x'); DROP TABLE t; --"} {
		row, err := c.QueryRow(ctx, "SELECT "+sqlquote.Literal(s))
		if err != nil || row[0] != s {
			t.Errorf("Literal(%q) reads back as %#v, %v", s, row, err)
		}
		exec(t, c, "CREATE TABLE "+sqlquote.Ident(s)+" ("+sqlquote.Ident(s)+" INTEGER)")
		row, err = c.QueryRow(ctx, "SELECT table_name, (SELECT column_name FROM duckdb_columns() WHERE table_name = "+sqlquote.Literal(s)+") FROM duckdb_tables()")
		if err != nil || row[0] != s || row[1] != s {
			t.Errorf("Ident(%q) names %#v, %v", s, row, err)
		}
		exec(t, c, "DROP TABLE "+sqlquote.Ident(s))
	}
}
