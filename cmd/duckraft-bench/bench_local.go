package main

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/duckdb/duckdb-go/v2"
)

// localDuckDB is the baseline of bench writes: the same single-row INSERT
// transactions on a DuckDB file in this process, without network or
// replication. Each is one DuckDB commit, with DuckDB's WAL fsync.
type localDuckDB struct {
	db *sql.DB
}

func openLocalDuckDB(path string) (*localDuckDB, error) {
	db, err := sql.Open("duckdb", path)
	if err != nil {
		return nil, fmt.Errorf("open local DuckDB: %w", err)
	}
	if _, err := db.Exec(benchTableSQL); err != nil {
		db.Close()
		return nil, fmt.Errorf("create local bench table: %w", err)
	}
	return &localDuckDB{db: db}, nil
}

func (l *localDuckDB) Close() error { return l.db.Close() }

// writeSystem gives bench writes sessions of its own connections, each
// inserting one row per autocommitted statement.
func (l *localDuckDB) writeSystem() *writeSystem {
	return &writeSystem{
		name: "duckdb",
		sessions: func(ctx context.Context, n int) ([]func(string) error, func(), error) {
			var conns []*sql.Conn
			closeAll := func() {
				for _, c := range conns {
					c.Close()
				}
			}
			var out []func(string) error
			for range n {
				c, err := l.db.Conn(ctx)
				if err != nil {
					closeAll()
					return nil, nil, err
				}
				conns = append(conns, c)
				out = append(out, func(q string) error { _, err := c.ExecContext(ctx, q); return err })
			}
			return out, closeAll, nil
		},
	}
}
