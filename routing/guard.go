package routing

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/routing/access"
	"github.com/duckraft/duckraft/routing/classify"
)

// newGuard returns the Executor's access.Guard: no client statement may
// name the applier's schema (replication.MetaSchema) or read or write the
// node's own files: Config.ProtectedPaths, the DuckDB file with its WAL
// and temporary directory (which DuckDB keeps readable even with
// enable_external_access off: its allowed_paths and allowed_directories),
// DuckDB's directory of persistent secrets, and this process's /proc
// entries (its environment and command line hold the token and the
// cluster key when they are given there).
func newGuard(cfg Config) (*access.Guard, error) {
	protected := append([]string(nil), cfg.ProtectedPaths...)
	pid := strconv.Itoa(os.Getpid())
	protected = append(protected, "/proc/self", "/proc/thread-self", "/proc/"+pid)
	if cfg.DB != nil && cfg.DB.Path() != "" {
		// An in-memory database (a router's) has no files, and DuckDB
		// then lists the working directory among its allowed paths.
		paths, err := duckdbPaths(cfg.DB)
		if err != nil {
			return nil, err
		}
		protected = append(protected, paths...)
	}
	g, err := access.NewGuard([]string{replication.MetaSchema}, protected)
	if err != nil {
		return nil, fmt.Errorf("routing: %w", err)
	}
	return g, nil
}

// duckdbPaths lists the files and directories of db that DuckDB itself
// reads and writes.
func duckdbPaths(db *engine.DB) ([]string, error) {
	c, err := db.Connect()
	if err != nil {
		return nil, fmt.Errorf("routing: %w", err)
	}
	defer c.Close()
	paths, err := c.QueryStrings(context.Background(), `SELECT unnest(current_setting('allowed_paths')
		|| current_setting('allowed_directories') || [current_setting('temp_directory'), current_setting('secret_directory')])`)
	if err != nil {
		return nil, fmt.Errorf("routing: DuckDB's own files: %w", err)
	}
	p := db.Path()
	return append(paths, p, p+".wal", p+".wal.recovery", p+".wal.checkpoint", p+".tmp"), nil
}

// checkAccess refuses a text holding a statement the node's guard refuses
// (access.Guard.Check), whatever the session's role.
func (e *Executor) checkAccess(stmts []classify.Statement) error {
	for _, stmt := range stmts {
		if err := e.guard.Check(stmt.Statement); err != nil {
			return err
		}
	}
	return nil
}
