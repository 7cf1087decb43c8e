package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"

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
	if _, err := db.Exec("CREATE TABLE bench(thread INTEGER, seq BIGINT, payload VARCHAR)"); err != nil {
		db.Close()
		return nil, fmt.Errorf("create local bench table: %w", err)
	}
	return &localDuckDB{db: db}, nil
}

func (l *localDuckDB) Close() error { return l.db.Close() }

// writeRound runs threads goroutines, each on its own connection inserting
// one row per autocommitted statement, for d.
func (l *localDuckDB) writeRound(ctx context.Context, threads int, d time.Duration) (roundResult, error) {
	conns := make([]*sql.Conn, threads)
	for i := range conns {
		c, err := l.db.Conn(ctx)
		if err != nil {
			return roundResult{}, err
		}
		defer c.Close()
		conns[i] = c
	}
	return runClients(threads, d, func(i, seq int) error {
		_, err := conns[i].ExecContext(ctx, insertRow(i, seq))
		return err
	}), nil
}
