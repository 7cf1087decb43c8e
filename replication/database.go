package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/duckraft/duckraft/node/engine"
)

// OpenDatabase opens the node's DuckDB file at path.
//
// DuckDB's own write-ahead log is redundant here: every change to the
// database comes from a Raft entry, and the applied index commits in the
// same DuckDB transaction as the entry's statements. So when DuckDB cannot
// replay its WAL, the node need not stay down: the WAL is set aside (renamed,
// kept for inspection) and the database opens at its last checkpoint, whose
// applied index tells Raft where to resume; if the log no longer reaches
// back that far, Open restores the latest snapshot first (needRestore).
//
// DuckDB writes WAL records it cannot replay (1.5.6: an ALTER TABLE that
// stores an expression calling a function or operator, SET DEFAULT 1 + 2,
// ADD COLUMN … DEFAULT abs(1); 2.0.0 still ALTER … TYPE … USING f(x)),
// which fail at the next start with "Failure while replaying WAL file".
// A node killed before DuckDB's next checkpoint would otherwise never start.
//
// A database not closed by CloseDatabase is read in full first, and one
// DuckDB finds corrupt is set aside for an empty one: the Raft log, synced
// on a quorum, and the snapshot rebuild it (TestDuckDBFileLoss).
func OpenDatabase(path string, opts engine.Options, log *slog.Logger) (*engine.DB, error) {
	db, err := openReplaying(path, opts, log)
	if path == "" {
		return db, err
	}
	if err == nil {
		if _, serr := os.Stat(cleanMarker(path)); serr == nil {
			// Closed cleanly; from now on a crash must be noticed.
			return db, os.Remove(cleanMarker(path))
		}
		if err = verifyBlocks(db); err == nil {
			return db, nil
		}
		db.Close()
	}
	if !engine.IsCorruption(err) {
		return nil, err
	}
	aside := asidePath(path, "corrupt")
	if rerr := os.Rename(path, aside); rerr != nil {
		return nil, errors.Join(err, fmt.Errorf("set the corrupt database aside: %w", rerr))
	}
	os.Rename(path+".wal", aside+".wal")
	log.Error("DuckDB found the database file corrupt; set it aside and starting from an empty one: Raft restores the latest snapshot and replays the log",
		"err", err, "aside", aside)
	return engine.Open(path, opts)
}

// openReplaying opens the database, setting aside a WAL DuckDB cannot
// replay.
func openReplaying(path string, opts engine.Options, log *slog.Logger) (*engine.DB, error) {
	db, err := engine.Open(path, opts)
	if err == nil || path == "" || !walReplayFailed(err) {
		return db, err
	}
	wal := path + ".wal"
	aside := asidePath(wal, "unreplayable")
	if rerr := os.Rename(wal, aside); rerr != nil {
		return nil, errors.Join(err, fmt.Errorf("set the unreplayable WAL aside: %w", rerr))
	}
	log.Warn("DuckDB could not replay its write-ahead log; set it aside and opening at the last checkpoint, Raft replays the rest",
		"err", err, "wal", aside)
	return engine.Open(path, opts)
}

// asidePath names the copy of file set aside for being what, kept for
// inspection: <file>.<what>-<UTC time>.
func asidePath(file, what string) string {
	return fmt.Sprintf("%s.%s-%s", file, what, time.Now().UTC().Format("20060102T150405Z"))
}

// cleanMarker names the file CloseDatabase leaves beside a database it
// closed cleanly; OpenDatabase reads every block of a database without one.
func cleanMarker(path string) string { return path + ".clean" }

// CloseDatabase closes db, which OpenDatabase opened, and marks it closed
// cleanly, so that the next open skips reading every block.
func CloseDatabase(db *engine.DB) error {
	if err := db.Close(); err != nil {
		return err
	}
	if db.Path() == "" {
		return nil
	}
	return os.WriteFile(cleanMarker(db.Path()), nil, 0o600)
}

// verifyBlocks reads every row of every table, so that DuckDB checks the
// checksum of every data block: after a crash (an OS crash can leave a
// block half written, and with fsync_mode NONE lose what DuckDB wrote) a
// corrupt block must be found before the node serves or applies anything,
// not by the statement that happens to read it, which would then fail on
// this node only. Index blocks are not read.
func verifyBlocks(db *engine.DB) error {
	conn, err := db.Connect()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx := context.Background()
	tables, err := conn.QueryStrings(ctx, "SELECT list_aggregate(list_transform([database_name, schema_name, table_name], "+
		`lambda p: '"' || replace(p, '"', '""') || '"'), 'string_agg', '.') FROM duckdb_tables() WHERE NOT temporary`)
	if err != nil {
		return fmt.Errorf("verify the database: %w", err)
	}
	for _, t := range tables {
		if _, err := conn.QueryRow(ctx, "SELECT bit_xor(hash(r)) FROM "+t+" AS r"); err != nil {
			return fmt.Errorf("verify %s: %w", t, err)
		}
	}
	return nil
}

// walReplayFailed reports whether err is DuckDB failing to replay its WAL
// at open. DuckDB reports it as an INTERNAL error with only this text to go
// by.
func walReplayFailed(err error) bool {
	return strings.Contains(err.Error(), "Failure while replaying WAL")
}
