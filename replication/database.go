package replication

import (
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
// DuckDB 1.5.6 writes WAL records it cannot replay: an ALTER TABLE that
// stores an expression calling a function or operator (SET DEFAULT 1 + 2,
// ADD COLUMN … DEFAULT abs(1), ALTER … TYPE … USING f(x)) fails at the next
// start with "Failure while replaying WAL file … no default database set".
// A node killed before DuckDB's next checkpoint would otherwise never start.
func OpenDatabase(path string, opts engine.Options, log *slog.Logger) (*engine.DB, error) {
	db, err := engine.Open(path, opts)
	if err == nil || path == "" || !walReplayFailed(err) {
		return db, err
	}
	wal := path + ".wal"
	aside := fmt.Sprintf("%s.unreplayable-%s", wal, time.Now().UTC().Format("20060102T150405Z"))
	if rerr := os.Rename(wal, aside); rerr != nil {
		return nil, errors.Join(err, fmt.Errorf("set the unreplayable WAL aside: %w", rerr))
	}
	log.Warn("DuckDB could not replay its write-ahead log; set it aside and opening at the last checkpoint, Raft replays the rest",
		"err", err, "wal", aside)
	return engine.Open(path, opts)
}

// walReplayFailed reports whether err is DuckDB failing to replay its WAL
// at open. DuckDB reports it as an INTERNAL error with only this text to go
// by.
func walReplayFailed(err error) bool {
	return strings.Contains(err.Error(), "Failure while replaying WAL")
}
