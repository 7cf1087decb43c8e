package node_test

import (
	"context"
	"testing"

	"github.com/duckraft/duckraft/node/wire"
)

// BenchmarkBulkScan streams a 1M-row, 16-column lineitem-shaped table from
// an in-process server to the Go client over loopback.
func BenchmarkBulkScan(b *testing.B) {
	addr, _ := startServer(b, nil)
	c := connect(b, addr, wire.Q1)
	exec(b, c, `CREATE TABLE lineitem AS SELECT
	  (i // 4 + 1)::BIGINT AS l_orderkey, (i * 7919 % 200000 + 1)::BIGINT AS l_partkey,
	  (i * 104729 % 10000 + 1)::BIGINT AS l_suppkey, (i % 7 + 1)::INTEGER AS l_linenumber,
	  ((i % 50) + 1)::DECIMAL(15,2) AS l_quantity, ((i * 37 % 100000) / 100.0 + 900)::DECIMAL(15,2) AS l_extendedprice,
	  ((i % 11) / 100.0)::DECIMAL(15,2) AS l_discount, ((i % 9) / 100.0)::DECIMAL(15,2) AS l_tax,
	  (['A','N','R'])[i % 3 + 1] AS l_returnflag, (['F','O'])[i % 2 + 1] AS l_linestatus,
	  (DATE '1992-01-02' + (i % 2526)::INTEGER) AS l_shipdate, (DATE '1992-01-31' + (i % 2466)::INTEGER) AS l_commitdate,
	  (DATE '1992-01-03' + (i % 2555)::INTEGER) AS l_receiptdate,
	  (['DELIVER IN PERSON','COLLECT COD','NONE','TAKE BACK RETURN'])[i % 4 + 1] AS l_shipinstruct,
	  (['REG AIR','AIR','RAIL','SHIP','TRUCK','MAIL','FOB'])[i % 7 + 1] AS l_shipmode,
	  'carefully regular ' || (['deposits','requests','accounts','packages','ideas'])[i % 5 + 1] || ' haggle ' || (i % 1000)::VARCHAR AS l_comment
	FROM range(1000000) t(i)`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rows, err := c.Query(context.Background(), "SELECT * FROM lineitem")
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			chunk, err := rows.NextChunk()
			if err != nil {
				b.Fatal(err)
			}
			if chunk == nil {
				break
			}
			n += chunk.Rows
		}
		rows.Close()
		if n != 1000000 {
			b.Fatalf("%d rows", n)
		}
	}
	b.ReportMetric(float64(b.N)*1e6/b.Elapsed().Seconds(), "rows/s")
}
