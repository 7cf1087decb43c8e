package engine

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/duckraft/duckraft/node/wire"
)

// lineitemSQL generates a TPC-H lineitem-shaped table: the same 16 columns
// and types, value distributions close enough for scan throughput.
const lineitemSQL = `CREATE TABLE lineitem AS SELECT
	(i // 4 + 1)::BIGINT AS l_orderkey,
	(i * 7919 % 200000 + 1)::BIGINT AS l_partkey,
	(i * 104729 % 10000 + 1)::BIGINT AS l_suppkey,
	(i % 4 + 1)::INTEGER AS l_linenumber,
	(i % 50 + 1)::DECIMAL(15,2) AS l_quantity,
	(900 + (i % 100000) * 1.37)::DECIMAL(15,2) AS l_extendedprice,
	((i % 11) / 100)::DECIMAL(15,2) AS l_discount,
	((i % 9) / 100)::DECIMAL(15,2) AS l_tax,
	['A', 'N', 'R'][i % 3 + 1] AS l_returnflag,
	['F', 'O'][i % 2 + 1] AS l_linestatus,
	DATE '1992-01-02' + (i % 2526)::INTEGER AS l_shipdate,
	DATE '1992-01-31' + (i % 2466)::INTEGER AS l_commitdate,
	DATE '1992-01-03' + (i % 2555)::INTEGER AS l_receiptdate,
	['DELIVER IN PERSON', 'COLLECT COD', 'NONE', 'TAKE BACK RETURN'][i % 4 + 1] AS l_shipinstruct,
	['REG AIR', 'AIR', 'RAIL', 'SHIP', 'TRUCK', 'MAIL', 'FOB'][i % 7 + 1] AS l_shipmode,
	left(md5(i::VARCHAR) || md5((i + 1)::VARCHAR), (10 + i % 34)::INTEGER) AS l_comment
FROM range(6000000) t(i)`

// BenchmarkQueryScan streams a 6M-row lineitem table through Result.Next.
// MB/s counts the bytes of the wire vectors produced (data, validity,
// string offsets and bytes).
func BenchmarkQueryScan(b *testing.B) {
	db, err := Open("", Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	c, err := db.Connect()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Exec(context.Background(), lineitemSQL); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, sql string }{
		{"all_columns", "SELECT * FROM lineitem"},
		{"fixed_width", "SELECT l_orderkey, l_partkey, l_quantity, l_extendedprice, l_shipdate FROM lineitem"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var rows, bytes int64
			start := time.Now()
			for b.Loop() {
				r, n := scan(b, c, bc.sql)
				rows += r
				bytes = n
			}
			b.SetBytes(bytes)
			b.ReportMetric(float64(rows)/time.Since(start).Seconds(), "rows/s")
		})
	}
}

// scan reads a query to the end and returns its rows and wire bytes.
func scan(b *testing.B, c *Conn, sql string) (rows, bytes int64) {
	res, err := c.Query(context.Background(), sql)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Close()
	for {
		chunk, err := res.Next()
		if err != nil {
			b.Fatal(err)
		}
		if chunk == nil {
			return rows, bytes
		}
		rows += int64(chunk.Rows)
		for _, v := range chunk.Columns {
			bytes += int64(len(v.Data) + len(v.Validity) + len(v.Bytes) + 4*len(v.Offsets))
		}
	}
}

// BenchmarkAppendVariant appends 100k mixed VARIANT rows (integers,
// objects, lists, JSON documents) and, side by side, the same bytes as a
// STRUCT column of VARIANT's internal layout, which skips checkVariant:
// the ratio is the cost of the check and of the VARIANT type; check_only
// is checkVariant alone.
func BenchmarkAppendVariant(b *testing.B) {
	db, err := Open("", Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	c, err := db.Connect()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Exec(ctx, `CREATE TABLE src AS SELECT CASE WHEN i % 4 = 0 THEN i::VARIANT
		WHEN i % 4 = 1 THEN {'k': i, 's': repeat('x', (i % 30)::INTEGER)}::VARIANT
		WHEN i % 4 = 2 THEN [i, NULL, i * 2]::VARIANT
		ELSE ('{"j": [' || i || ', "a string longer than twelve bytes"], "n": {"m": true}}')::JSON::VARIANT END AS v
		FROM range(100000) r(i)`); err != nil {
		b.Fatal(err)
	}
	var chunks []*wire.DataChunk
	res, err := c.Query(ctx, "FROM src")
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for {
		ch, err := res.Next()
		if err != nil {
			b.Fatal(err)
		}
		if ch == nil {
			break
		}
		ch = cloneChunk(ch)
		chunks = append(chunks, ch)
		enc, _ := wire.AppendDataChunk(nil, ch, wire.Q3)
		size += int64(len(enc))
	}
	res.Close()
	asStruct := make([]*wire.DataChunk, len(chunks))
	for i, ch := range chunks {
		col := *ch.Columns[0]
		col.Type = structOf(variantFields...)
		asStruct[i] = &wire.DataChunk{Rows: ch.Rows, Columns: []*wire.Vector{&col}}
	}
	b.Run("check_only", func(b *testing.B) {
		start, rows := time.Now(), 0
		for b.Loop() {
			for _, ch := range chunks {
				if err := checkVariant(ch.Columns[0], 0, ch.Rows); err != nil {
					b.Fatal(err)
				}
				rows += ch.Rows
			}
		}
		b.SetBytes(size)
		b.ReportMetric(float64(rows)/time.Since(start).Seconds(), "rows/s")
	})
	for _, bc := range []struct {
		name, typ string
		chunks    []*wire.DataChunk
	}{
		{"variant", "VARIANT", chunks},
		{"same_bytes_as_struct", typeName(structOf(variantFields...)), asStruct},
	} {
		b.Run(bc.name, func(b *testing.B) {
			start, rows := time.Now(), 0
			for b.Loop() {
				if _, err := c.Exec(ctx, "CREATE OR REPLACE TABLE dst(v "+bc.typ+")"); err != nil {
					b.Fatal(err)
				}
				for _, ch := range bc.chunks {
					if err := c.Append("", "dst", ch); err != nil {
						b.Fatal(err)
					}
					rows += ch.Rows
				}
			}
			b.SetBytes(size)
			b.ReportMetric(float64(rows)/time.Since(start).Seconds(), "rows/s")
		})
	}
}

// BenchmarkReadStrings reads one 2048-row VARCHAR vector laid out as
// DuckDB's string_t, a third of the strings too long to be inline, as
// lineitem's comments are.
func BenchmarkReadStrings(b *testing.B) {
	const n = 2048
	raw := make([][stringSize]byte, n)
	long := make([][]byte, 0, n)
	for i := range raw {
		s := []byte(fmt.Sprintf("final %d", i))
		if i%3 == 0 {
			s = []byte(fmt.Sprintf("carefully final deposits %d", i))
		}
		*(*uint32)(unsafe.Pointer(&raw[i])) = uint32(len(s))
		if len(s) <= stringInline {
			copy(raw[i][4:], s)
			continue
		}
		copy(raw[i][4:8], s)
		*(**byte)(unsafe.Pointer(&raw[i][8])) = &s[0]
		long = append(long, s)
	}
	r := &reader{vec: wire.Vector{Type: wire.LogicalType{ID: wire.TypeVarchar}}}
	for b.Loop() {
		r.readStrings(unsafe.Pointer(&raw[0]), n)
	}
	runtime.KeepAlive(long)
}
