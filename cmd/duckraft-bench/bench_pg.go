package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgreSQL is the peer the benchmarks run side by side with duckraft:
// scripts/bench-peers.sh starts a primary with a synchronous standby on
// loopback and prints its connection string for --pg.

// pgConnect opens one session. Statements go as simple-protocol text:
// every benchmark write is a new literal text, as it is for duckraft, so
// caching a prepared statement per text would only cost PostgreSQL a
// round trip more.
func pgConnect(ctx context.Context, dsn string, simple bool) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("--pg: %w", err)
	}
	if simple {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return c, nil
}

// openPGWrites gives bench writes its PostgreSQL sessions, on a bench
// table made empty first.
func openPGWrites(ctx context.Context, dsn string) (*writeSystem, error) {
	c, err := pgConnect(ctx, dsn, true)
	if err != nil {
		return nil, err
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "DROP TABLE IF EXISTS bench"); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE bench(thread INTEGER, seq BIGINT, payload VARCHAR)"); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return &writeSystem{
		name: "postgres",
		sessions: func(ctx context.Context, n int) ([]func(string) error, func(), error) {
			var conns []*pgx.Conn
			closeAll := func() {
				for _, c := range conns {
					c.Close(context.Background())
				}
			}
			var out []func(string) error
			for range n {
				c, err := pgConnect(ctx, dsn, true)
				if err != nil {
					closeAll()
					return nil, nil, err
				}
				conns = append(conns, c)
				out = append(out, func(q string) error { _, err := c.Exec(ctx, q); return err })
			}
			return out, closeAll, nil
		},
		close: func() {},
	}, nil
}

// pgLineitemSQL is lineitemSQL in PostgreSQL's dialect: the same rows,
// value for value.
const pgLineitemSQL = `CREATE TABLE lineitem AS
SELECT
  (i / 4 + 1)::BIGINT AS l_orderkey,
  (i * 7919 % 200000 + 1)::BIGINT AS l_partkey,
  (i * 104729 % 10000 + 1)::BIGINT AS l_suppkey,
  (i % 7 + 1)::INTEGER AS l_linenumber,
  ((i % 50) + 1)::DECIMAL(15,2) AS l_quantity,
  ((i * 37 % 100000) / 100.0 + 900)::DECIMAL(15,2) AS l_extendedprice,
  ((i % 11) / 100.0)::DECIMAL(15,2) AS l_discount,
  ((i % 9) / 100.0)::DECIMAL(15,2) AS l_tax,
  (ARRAY['A','N','R'])[i % 3 + 1]::VARCHAR AS l_returnflag,
  (ARRAY['F','O'])[i % 2 + 1]::VARCHAR AS l_linestatus,
  (DATE '1992-01-02' + (i % 2526)::INTEGER) AS l_shipdate,
  (DATE '1992-01-31' + (i % 2466)::INTEGER) AS l_commitdate,
  (DATE '1992-01-03' + (i % 2555)::INTEGER) AS l_receiptdate,
  (ARRAY['DELIVER IN PERSON','COLLECT COD','NONE','TAKE BACK RETURN'])[i % 4 + 1]::VARCHAR AS l_shipinstruct,
  (ARRAY['REG AIR','AIR','RAIL','SHIP','TRUCK','MAIL','FOB'])[i % 7 + 1]::VARCHAR AS l_shipmode,
  ('carefully regular ' || (ARRAY['deposits','requests','accounts','packages','ideas'])[i % 5 + 1] || ' haggle ' || (i % 1000)::VARCHAR)::VARCHAR AS l_comment
FROM generate_series(0::BIGINT, ROWS - 1) t(i)`

// pgLoadLineitem makes PostgreSQL's lineitem hold rows rows, unless it
// already does.
func pgLoadLineitem(ctx context.Context, dsn string, rows int) error {
	c, err := pgConnect(ctx, dsn, true)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	var n int64
	if err := c.QueryRow(ctx, "SELECT count(*) FROM lineitem").Scan(&n); err == nil && n == int64(rows) {
		return nil
	}
	if _, err := c.Exec(ctx, "DROP TABLE IF EXISTS lineitem"); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if _, err := c.Exec(ctx, strings.Replace(pgLineitemSQL, "ROWS", strconv.Itoa(rows), 1)); err != nil {
		return fmt.Errorf("postgres: load lineitem: %w", err)
	}
	_, err = c.Exec(ctx, "VACUUM ANALYZE lineitem")
	return err
}

// scanPG reads query through pgx's extended protocol, which asks for every
// column in binary. The values stay the raw binary PostgreSQL sent, as the
// Quack client's chunks stay DuckDB vectors: neither converts to Go values.
func scanPG(dsn, query string) (scanReport, error) {
	ctx := context.Background()
	c, err := pgConnect(ctx, dsn, false)
	if err != nil {
		return scanReport{}, err
	}
	defer c.Close(ctx)
	start := time.Now()
	rows, err := c.Query(ctx, query)
	if err != nil {
		return scanReport{}, err
	}
	defer rows.Close()
	var r scanReport
	for rows.Next() {
		r.Rows++
		for _, v := range rows.RawValues() {
			r.Bytes += int64(len(v))
		}
	}
	if err := rows.Err(); err != nil {
		return scanReport{}, err
	}
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// pgVersion is the peer's server_version, or "" without a peer.
func pgVersion(ctx context.Context, dsn string) string {
	if dsn == "" {
		return ""
	}
	c, err := pgConnect(ctx, dsn, true)
	if err != nil {
		return ""
	}
	defer c.Close(ctx)
	var v string
	if err := c.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return ""
	}
	var sync string
	if err := c.QueryRow(ctx, "SHOW synchronous_standby_names").Scan(&sync); err == nil && sync != "" {
		v += " (synchronous standby " + sync + ")"
	}
	return v
}
