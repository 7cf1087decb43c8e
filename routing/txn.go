package routing

import (
	"context"
	"errors"
	"log/slog"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/routing/classify"
	"github.com/duckraft/duckraft/wal"
)

// commitIndexer is what a transaction needs of replication: the newest
// index this node knows committed, which its reads start from.
type commitIndexer interface {
	CommitIndex() uint64
}

// sessionEvents records the changes of a session's state that a node
// adopting it must know (Executor, migrate.go).
type sessionEvents interface {
	sessionStatements(st *sessionState, stmts []classify.Statement)
	beginTxn(ctx context.Context, st *sessionState)
	endTxn(st *sessionState)
}

// txns runs explicit transactions: their writes and appends are collected
// until COMMIT (stagesend.go stages large ones ahead of it), their reads
// run as any read.
type txns struct {
	log   *slog.Logger
	store commitIndexer
	// dir says whether every node applies staging entries; nil in tests
	// with no other node.
	dir Directory
	// stageSize is Config.StageBytes: 0 is DefaultStageBytes, negative
	// never stages.
	stageSize int
	writes    *writer
	reads     *reader
	sessions  sessionEvents
}

// run handles BEGIN … COMMIT: writes are collected and applied as one Raft
// entry at COMMIT, so the transaction commits atomically on every node.
// Reads inside it see the committed state, at least what this node knew to
// be committed at BEGIN, never the transaction's own writes.
func (ts *txns) run(ctx context.Context, s *node.Session, st *sessionState, stmts []classify.Statement) (node.Rows, error) {
	var last node.Rows
	for _, stmt := range stmts {
		if last != nil {
			last.Close()
			last = nil
		}
		txn := st.openTxn()
		switch stmt.Class {
		case classify.Begin:
			if txn != nil {
				return nil, errors.New("TransactionContext Error: cannot start a transaction within a transaction")
			}
			st.setTxn(&pendingTxn{})
			// Its reads see what this node knew to be committed when
			// it began, as a new session's do: DuckLake reads the
			// newest snapshot right after BEGIN.
			st.saw(ts.store.CommitIndex())
			ts.sessions.beginTxn(ctx, st)
			last = successRows()
		case classify.Commit:
			if txn == nil {
				return nil, errors.New("TransactionContext Error: cannot commit - no transaction is active")
			}
			st.setTxn(nil)
			entries, lexed, err := ts.commitEntries(txn)
			if err == nil && len(entries) > 0 {
				cmd := newCommand(entries)
				st.commitKey(&cmd)
				_, err = ts.writes.write(ctx, st, cmd, lexed)
			}
			ts.sessions.endTxn(st)
			if err != nil {
				ts.unstage(st, txn)
				return nil, err
			}
			last = successRows()
		case classify.Rollback:
			if txn == nil {
				return nil, errors.New("TransactionContext Error: cannot rollback - no transaction is active")
			}
			st.setTxn(nil)
			ts.sessions.endTxn(st)
			ts.unstage(st, txn)
			last = successRows()
		case classify.Read:
			rows, err := ts.reads.read(ctx, s, st, stmt.Text)
			if err != nil {
				return nil, err
			}
			last = rows
		case classify.Session:
			rows, err := node.LocalExecutor{}.Query(ctx, s, stmt.Text)
			if err != nil {
				return nil, err
			}
			ts.sessions.sessionStatements(st, []classify.Statement{stmt})
			last = rows
		default:
			if txn != nil && stmt.Returns() {
				// Its rows do not exist before COMMIT applies the
				// transaction; an empty answer would be a wrong one.
				return nil, errors.New("Not implemented Error: RETURNING inside a transaction: duckraft applies a transaction's writes at COMMIT, " +
					"so their rows cannot be returned before it; run the statement outside a transaction")
			}
			if st.addStatementToTxn(stmt.Statement) {
				last = countRows(nil)
				continue
			}
			res, err := ts.writes.write(ctx, st, newCommand([]wal.Entry{wal.Statement{SQL: stmt.Text}}), []sqltext.Statement{stmt.Statement})
			if err != nil {
				return nil, err
			}
			if last, err = resultRows(res); err != nil {
				return nil, err
			}
		}
	}
	return last, nil
}
