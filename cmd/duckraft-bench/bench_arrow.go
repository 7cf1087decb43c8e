//go:build duckdb_arrow

package main

import (
	"context"
	"time"

	"github.com/duckdb/duckdb-go/v2"
)

// scanArrow scans query in-process through duckdb-go's Arrow interface: the
// baseline a Quack server is measured against.
func scanArrow(path, query string) (scanReport, error) {
	ctx := context.Background()
	connector, err := duckdb.NewConnector(path+"?access_mode=READ_ONLY", nil)
	if err != nil {
		return scanReport{}, err
	}
	defer connector.Close()
	conn, err := connector.Connect(ctx)
	if err != nil {
		return scanReport{}, err
	}
	defer conn.Close()
	ar, err := duckdb.NewArrowFromConn(conn)
	if err != nil {
		return scanReport{}, err
	}
	start := time.Now()
	rdr, err := ar.QueryContext(ctx, query)
	if err != nil {
		return scanReport{}, err
	}
	defer rdr.Release()
	var r scanReport
	for rdr.Next() {
		rec := rdr.RecordBatch()
		r.Rows += rec.NumRows()
		for _, col := range rec.Columns() {
			for _, b := range col.Data().Buffers() {
				if b != nil {
					r.Bytes += int64(b.Len())
				}
			}
		}
	}
	if err := rdr.Err(); err != nil {
		return scanReport{}, err
	}
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}
