package replication

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/wal"
)

// Errors of a write the leader refused before it entered the log: it
// never applies anywhere.
var (
	// ErrWriteTimeout: proving the write took longer than
	// Config.WriteTimeout.
	ErrWriteTimeout = errors.New("replication: the write ran longer than the write timeout")
	// ErrWriteResources: the write failed on the leader for lack of a
	// resource (memory, disk) even with client reads out of its way.
	ErrWriteResources = errors.New("replication: the write needs more than the node has")
)

// RefusedWriteError is a write refused by its proof on the leader. It
// carries the DuckDB exception type of the failure, so a client reads an
// error of the kind DuckDB would have given, with duckraft's reason.
type RefusedWriteError struct {
	// Reason is ErrWriteTimeout or ErrWriteResources.
	Reason error
	// Type is the DuckDB exception type ("Out of Memory", "INTERRUPT", …).
	Type string
	msg  string
}

func (e *RefusedWriteError) Error() string         { return e.msg }
func (e *RefusedWriteError) ExceptionType() string { return e.Type }
func (e *RefusedWriteError) Unwrap() error         { return e.Reason }

// Prove runs cmd on the leader's database, between two entries, in a
// transaction it rolls back, before cmd is proposed: a write that runs out
// of memory or past Config.WriteTimeout here is refused and never enters
// the log, so no node halts or stalls on it, and its writer is told it
// failed, truthfully. A write that fails for a reason of its own (a
// constraint, a missing table) is not refused: the log decides it, the same
// on every node, in log order. Proving costs a second run of the write on
// the leader, so callers prove only writes whose cost the text does not
// bound (INSERT … SELECT, UPDATE, DELETE, CREATE TABLE … AS, CREATE INDEX,
// ALTER), never one that calls nextval() (sequences are not transactional
// in DuckDB: the rolled-back run would advance the leader's alone).
//
// texts are cmd's statements as the caller already lexed them, numbered as
// the applier numbers them: one per entry of a Txn (the zero Statement for
// an entry that is no statement), else one for the entry. The leader lexed
// each while it decided the write, so the proof does not lex it again; a
// statement missing from texts, or whose Text is not its entry's SQL, is
// lexed here, so texts change what is lexed, never what runs. nil lexes
// them all.
//
// A proof holds the applier's lock, so entries wait while it runs: it is
// bounded by WriteTimeout.
func (s *Store) Prove(ctx context.Context, cmd wal.Command, texts []sqltext.Statement) error {
	if !s.IsLeader() {
		return s.notLeader()
	}
	if err := s.applierHealthy(); err != nil {
		return err
	}
	if s.cfg.WriteTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.WriteTimeout)
		defer cancel()
	}
	return s.fsm.prove(ctx, cmd, texts, s.cfg.WriteTimeout)
}

func (f *fsm) prove(ctx context.Context, cmd wal.Command, texts []sqltext.Statement, timeout time.Duration) error {
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	if err := f.haltErr(); err != nil {
		return fmt.Errorf("%w: %w", ErrHalted, err)
	}
	if hasTriggers(f.conn) {
		// A trigger's body may call nextval(), which the binder of the
		// statement does not show.
		return nil
	}
	if texts == nil {
		texts = lexEntry(cmd.Entry)
	}
	work := []pending{{cmd: cmd, texts: texts}}
	if serialApply(work) {
		if err := f.serial.acquire(); err != nil {
			return err
		}
		defer f.serial.release()
	}
	for attempt := 1; ; attempt++ {
		err := f.tryProve(ctx, cmd, work[0].texts)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
			return &RefusedWriteError{Reason: ErrWriteTimeout, Type: "INTERRUPT",
				msg: fmt.Sprintf("the write ran longer than the write timeout (%v) on the leader and was not applied; "+
					"make it smaller, or raise --write-timeout", timeout)}
		case ctx.Err() != nil:
			return fmt.Errorf("prove the write: %w", ctx.Err())
		case !nodeLocal(err):
			// The write's own error: the log decides it.
			return nil
		case engine.ExceptionType(err) == "Out of Memory" && attempt == 1:
			f.db.InterruptClients(ErrReadYielded)
			defer f.db.ReleaseClients()
			continue
		}
		return &RefusedWriteError{Reason: ErrWriteResources, Type: engine.ExceptionType(err),
			msg: fmt.Sprintf("the write was not applied: it failed on the leader for lack of resources, with client reads "+
				"interrupted (%s); every node has the same limits, so it would fail on each: make it smaller, or raise "+
				"--memory-limit on every node", engine.RawMessage(err))}
	}
}

// tryProve runs cmd's entry, whose statements are lexed as texts, in a
// transaction and rolls it back.
func (f *fsm) tryProve(ctx context.Context, cmd wal.Command, texts []sqltext.Statement) error {
	if err := f.conn.Begin(ctx); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer f.rollback()
	return f.applyEntry(ctx, cmd.Entry, texts, cmd.Timestamp, &wal.Result{})
}

// hasTriggers reports whether the database holds a trigger (DuckDB 2.0).
// An error counts as yes: proving is skipped, which is always safe.
func hasTriggers(conn *engine.Conn) bool {
	row, err := conn.QueryRow(context.Background(), "SELECT count(*) FROM duckdb_triggers()")
	if err != nil {
		return true
	}
	n, ok := row[0].(int64)
	return !ok || n > 0
}
