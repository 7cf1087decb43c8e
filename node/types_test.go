package node_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/wire"
)

// typeCases are SQL literals of every DuckDB 2.0 type but TUPLE (which
// DuckDB's C API reports as a STRUCT), each with a NULL.
var typeCases = []struct {
	sqlType string
	literal string
}{
	{"BOOLEAN", "true"},
	{"TINYINT", "-128"},
	{"SMALLINT", "-32768"},
	{"INTEGER", "-2147483648"},
	{"BIGINT", "-9223372036854775808"},
	{"HUGEINT", "'-170141183460469231731687303715884105728'"},
	{"UTINYINT", "255"},
	{"USMALLINT", "65535"},
	{"UINTEGER", "4294967295"},
	{"UBIGINT", "18446744073709551615"},
	{"UHUGEINT", "'340282366920938463463374607431768211455'"},
	{"FLOAT", "1.5"},
	{"DOUBLE", "3.141592653589793"},
	{"DECIMAL(4,1)", "123.4"},
	{"DECIMAL(9,2)", "1234567.89"},
	{"DECIMAL(18,3)", "'123456789012345.678'"},
	{"DECIMAL(38,10)", "'1234567890123456789012345678.0123456789'"},
	{"VARCHAR", "'a string longer than twelve bytes'"},
	{"BLOB", `'\xDE\xAD\xBE\xEF'`},
	{"BIT", "'010110'"},
	{"BIGNUM", "'-123456789012345678901234567890'"},
	{"DATE", "'2024-02-29'"},
	{"TIME", "'12:34:56.789012'"},
	{"TIMESTAMP_S", "'2024-02-29 12:34:56'"},
	{"TIMESTAMP_MS", "'2024-02-29 12:34:56.789'"},
	{"TIMESTAMP", "'2024-02-29 12:34:56.789012'"},
	{"TIMESTAMP_NS", "'2024-02-29 12:34:56.789012345'"},
	{"TIMESTAMPTZ", "'2024-02-29 12:34:56.789012+00'"},
	{"TIMETZ", "'12:34:56+05:30'"},
	{"INTERVAL", "INTERVAL '1 year 2 months 3 days 04:05:06.789'"},
	{"UUID", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'"},
	{"ENUM('sad', 'ok', 'happy')", "'happy'"},
	{"INTEGER[]", "[1, NULL, 3]"},
	{"VARCHAR[][]", "[['a'], [], NULL, ['b', NULL]]"},
	{"STRUCT(a INTEGER, b VARCHAR)", "{'a': 1, 'b': NULL}"},
	{"MAP(VARCHAR, INTEGER)", "MAP {'k1': 1, 'k2': NULL}"},
	{"INTEGER[3]", "[1, 2, NULL]"},
	{"UNION(i INTEGER, s VARCHAR)", "'text'"},
	{"STRUCT(l INTEGER[], m MAP(INTEGER, VARCHAR))", "{'l': [1, 2], 'm': MAP {1: 'x'}}"},
	{"TIME_NS", "'12:34:56.789012345'"},
	{"GEOMETRY", "'POINT (1 2)'"},
	{"VARIANT", "42"},
	{"VARIANT", "{'a': [1, 2], 'b': 'x'}"},
}

// appendErrors are the errors an append of a type gets. DuckDB's C API
// cannot create a VARIANT column type, so its appender takes none: VARIANT
// values reach clients, and clients cannot append them.
var appendErrors = map[string]string{"VARIANT": "type VARIANT cannot be created through the DuckDB C API"}

// noText are the types whose values the Go client does not render as text.
var noText = map[string]bool{"GEOMETRY": true, "VARIANT": true}

// TestEveryTypeRoundTrips sends every type from server to client, then back
// from client to server with APPEND, and checks that DuckDB sees the same
// values: the client's text of each cell must equal DuckDB's own CAST to
// VARCHAR.
func TestEveryTypeRoundTrips(t *testing.T) {
	addr, _ := startServer(t, nil)
	for _, g := range generations {
		c := connect(t, addr, g)
		for i, tc := range typeCases {
			t.Run(fmt.Sprintf("Q%d/%s", g, tc.sqlType), func(t *testing.T) {
				table := fmt.Sprintf("src_%d_%d", g, i)
				exec(t, c, fmt.Sprintf("CREATE TABLE %s(id INTEGER, v %s)", table, tc.sqlType))
				exec(t, c, fmt.Sprintf("INSERT INTO %s VALUES (1, (%s)::%s), (2, NULL)", table, tc.literal, tc.sqlType))

				// Server → client: compare the client's text with DuckDB's.
				rows, err := c.Query(context.Background(), fmt.Sprintf("SELECT v, v::VARCHAR FROM %s ORDER BY id", table))
				if err != nil {
					t.Fatal(err)
				}
				chunk, err := rows.NextChunk()
				rows.Close()
				if err != nil || chunk == nil || chunk.Rows != 2 {
					t.Fatalf("got %v, %v", chunk, err)
				}
				// The Go client renders neither GEOMETRY (WKB on the wire,
				// WKT in DuckDB's text) nor VARIANT (DuckDB 2.0's encoding)
				// as text; their bytes still travel both ways, below.
				if !noText[tc.sqlType] {
					got, err := chunk.Columns[0].Text(0)
					if err != nil {
						t.Fatal(err)
					}
					want, _ := chunk.Columns[1].Text(0)
					if got != want && !(tc.sqlType == "BLOB") {
						t.Errorf("client renders %q, DuckDB %q", got, want)
					}
				}
				if chunk.Columns[0].IsValid(1) {
					t.Error("NULL row arrived valid")
				}

				// Client → server: append the values read (APPEND in Q1,
				// SEND_DATA in Q3) and compare in SQL.
				dst := fmt.Sprintf("dst_%d_%d", g, i)
				exec(t, c, fmt.Sprintf("CREATE TABLE %s(v %s)", dst, tc.sqlType))
				only := &wire.DataChunk{Rows: 2, Columns: []*wire.Vector{chunk.Columns[0]}}
				err = c.Append(context.Background(), "main", dst, only)
				switch {
				case appendErrors[tc.sqlType] != "":
					if want := appendErrors[tc.sqlType]; err == nil || !strings.Contains(err.Error(), want) {
						t.Fatalf("append: %v, want an error with %q", err, want)
					}
					return
				case err != nil:
					t.Fatalf("append: %v", err)
				}
				check := queryRows(t, c, fmt.Sprintf(
					"SELECT count(*) FROM %s WHERE v IS NOT DISTINCT FROM (SELECT v FROM %s WHERE id = 1) OR v IS NULL", dst, table))
				if check[0][0] != int64(2) {
					t.Fatalf("appended values differ from the source: %v", queryRows(t, c, "FROM "+dst))
				}
			})
		}
	}
}
