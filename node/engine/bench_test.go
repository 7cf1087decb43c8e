package engine

import (
	"context"
	"testing"
	"time"
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
