package engine

import (
	"fmt"
	"testing"

	"github.com/duckraft/duckraft/node/wire"
)

// TestStringsAcrossLengths reads strings of every length from 0 to 40,
// across the 12 bytes DuckDB keeps inline and the 16 the Q1 encoder moves
// at once, with NULLs between them, and checks each value as read and
// after encoding and decoding the chunk in Q1 and Q3.
func TestStringsAcrossLengths(t *testing.T) {
	c := connect(t, openTest(t))
	const rows = 5000
	want := func(i int) (string, bool) {
		if i%7 == 3 {
			return "", false
		}
		s := fmt.Sprintf("%d:", i)
		for len(s) < i%41 {
			s += string(rune('a' + len(s)%26))
		}
		return s[:i%41], true
	}
	// The same strings, built in SQL.
	sql := fmt.Sprintf(`SELECT CASE WHEN i %% 7 = 3 THEN NULL ELSE left(i::VARCHAR || ':' ||
		substr(repeat('abcdefghijklmnopqrstuvwxyz', 3), (length(i::VARCHAR) + 1) %% 26 + 1, 41), (i %% 41)::INTEGER) END AS s
		FROM range(%d) t(i) ORDER BY i`, rows)
	_, chunks := collect(t, c, sql)
	check := func(how string, chunks []*wire.DataChunk) {
		t.Helper()
		i := 0
		for _, ch := range chunks {
			v := ch.Columns[0]
			for r := 0; r < ch.Rows; r, i = r+1, i+1 {
				ws, wvalid := want(i)
				got, err := v.Value(r)
				if err != nil {
					t.Fatalf("%s: row %d: %v", how, i, err)
				}
				switch {
				case !wvalid && got != nil:
					t.Fatalf("%s: row %d: got %q, want NULL", how, i, got)
				case wvalid && got != ws:
					t.Fatalf("%s: row %d: got %q, want %q", how, i, got, ws)
				}
			}
		}
		if i != rows {
			t.Fatalf("%s: %d rows, want %d", how, i, rows)
		}
	}
	check("read", chunks)
	for _, g := range []wire.Generation{wire.Q1, wire.Q3} {
		var decoded []*wire.DataChunk
		for _, ch := range chunks {
			enc, err := wire.AppendDataChunk(nil, ch, g)
			if err != nil {
				t.Fatalf("encode %v: %v", g, err)
			}
			d, err := wire.DecodeDataChunk(wire.NewReader(enc), wire.Limits{})
			if err != nil {
				t.Fatalf("decode %v: %v", g, err)
			}
			decoded = append(decoded, d)
		}
		check(fmt.Sprintf("%v round trip", g), decoded)
	}
}
