package routing

import (
	"context"
	"errors"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/routing/classify"
	"github.com/duckraft/duckraft/wal"
)

// transaction handles BEGIN … COMMIT: writes are collected and applied as
// one Raft entry at COMMIT, so the transaction commits atomically on every
// node. Reads inside it see the committed state, at least what this node
// knew to be committed at BEGIN, never the transaction's own writes.
func (e *Executor) transaction(ctx context.Context, s *node.Session, st *sessionState, stmts []classify.Statement) (node.Rows, error) {
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
			st.saw(e.cfg.Store.CommitIndex())
			e.beginTxn(ctx, st)
			last = successRows()
		case classify.Commit:
			if txn == nil {
				return nil, errors.New("TransactionContext Error: cannot commit - no transaction is active")
			}
			st.setTxn(nil)
			entries, lexed, err := e.commitEntries(txn)
			if err == nil && len(entries) > 0 {
				cmd := newCommand(entries)
				st.commitKey(&cmd)
				_, err = e.write(ctx, st, cmd, lexed)
			}
			e.endTxn(st)
			if err != nil {
				e.unstage(st, txn)
				return nil, err
			}
			last = successRows()
		case classify.Rollback:
			if txn == nil {
				return nil, errors.New("TransactionContext Error: cannot rollback - no transaction is active")
			}
			st.setTxn(nil)
			e.endTxn(st)
			e.unstage(st, txn)
			last = successRows()
		case classify.Read:
			rows, err := e.read(ctx, s, st, stmt.Text)
			if err != nil {
				return nil, err
			}
			last = rows
		case classify.Session:
			rows, err := node.LocalExecutor{}.Query(ctx, s, stmt.Text)
			if err != nil {
				return nil, err
			}
			e.sessionStatements(st, []classify.Statement{stmt})
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
			res, err := e.write(ctx, st, newCommand([]wal.Entry{wal.Statement{SQL: stmt.Text}}), []sqltext.Statement{stmt.Statement})
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
