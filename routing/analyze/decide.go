package analyze

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/duckraft/duckraft/node/sqltext"
)

// reservedTop reports whether a schema named name, outermost in a path of
// nested schemas, makes the path ambiguous: main (DuckDB 2.0 binds
// main.child.t as nothing) and the names of the catalogs every node has
// (its own, system, temp), which a dotted name's first part may mean.
func reservedTop(name, catalog string) bool {
	for _, r := range []string{"main", "system", "temp", catalog} {
		if strings.EqualFold(name, r) {
			return true
		}
	}
	return false
}

// Decide is the leader's determinism decision for one client statement:
// the guard's (WithGuard), the lexer's rules (sqltext.Deterministic, which
// also rewrites the clock), then DuckDB's binder on the rewritten text. It
// returns the plan to replicate, or an error wrapping
// sqltext.ErrNondeterministic. The binder is skipped for a plan already
// materialized and for a literal INSERT (sqltext.Statement.LiteralInsert);
// where it cannot bind (ErrUnbound), the text's own signs of sampling and
// rowid and the definitions it names (unboundAnalysis) stand in for the
// plan. The statement is read as it was
// lexed; only a text the clock's rewrite changed is lexed again.
//
// text is plan.SQL as lexed here, which the leader's proof of the write
// reads (replication.Store.Prove) rather than lex it again: st itself, or
// the rewritten statement. It is the zero Statement when plan.SQL is no
// text Decide lexed (a materialized plan, a CREATE made canonical).
func (a *Analyzer) Decide(ctx context.Context, st sqltext.Statement, ts time.Time, volatile sqltext.Volatile, log *slog.Logger) (plan sqltext.Plan, text sqltext.Statement, err error) {
	if a.guard != nil {
		if err := a.guard(st); err != nil {
			return sqltext.Plan{}, sqltext.Statement{}, err
		}
	}
	plan, err = sqltext.Deterministic(st, ts, volatile)
	if err != nil || plan.Materialize != nil {
		return plan, sqltext.Statement{}, err
	}
	rewritten := st
	if plan.SQL != st.Text {
		rewritten = sqltext.Parse(plan.SQL)
	}
	// A literal INSERT calls nothing and reads no row; the only
	// expressions it makes DuckDB evaluate are the target's DEFAULTs for
	// columns it leaves out, which sqltext.Deterministic checked when the
	// table was created (see DESIGN.md), and the actions of the target's
	// triggers, which checkTrigger checked when each was created.
	if rewritten.LiteralInsert() {
		return plan, rewritten, nil
	}
	an, err := a.Analyze(ctx, rewritten)
	bound := err == nil
	switch {
	case errors.Is(err, ErrUnbound):
		log.Debug("write not bound on the leader; its text and the definitions it names decide", "err", err)
		if an, err = a.unboundAnalysis(ctx, rewritten); err != nil {
			return sqltext.Plan{}, sqltext.Statement{}, err
		}
	case err != nil:
		return sqltext.Plan{}, sqltext.Statement{}, err
	case an.NestedIn != "" && reservedTop(an.NestedIn, a.pool.DB().Catalog()):
		return sqltext.Plan{}, sqltext.Statement{}, fmt.Errorf("%w: a schema nested in %s: DuckDB 2.0 misreads a dotted name that starts with main or with "+
			"a catalog's name, so a snapshot could not name what it holds; nest it in a schema of another name", ErrUnsupported, an.NestedIn)
	case an.NestedMacro:
		return sqltext.Plan{}, sqltext.Statement{}, fmt.Errorf("%w: a macro in a nested schema (CREATE MACRO parent.child.m): DuckDB's catalog does not "+
			"say which of two schemas of one name holds a macro, so a snapshot could not restore it; create it in a top-level schema",
			ErrUnsupported)
	}
	v, err := an.Check(volatile)
	if err != nil {
		return sqltext.Plan{}, sqltext.Statement{}, err
	}
	if v.Materialize {
		plan, err = sqltext.Materialized(st, ts, v.Why, v.Sequence)
		return plan, sqltext.Statement{}, err
	}
	switch {
	case an.Operator == "LOGICAL_CREATE_TRIGGER":
		if err = a.checkTrigger(ctx, rewritten, volatile); err == nil {
			plan.SQL, err = a.canonicalCreate(ctx, "TRIGGER", rewritten)
		}
	case an.Operator == "LOGICAL_CREATE_VIEW":
		plan.SQL, err = a.canonicalCreate(ctx, "VIEW", rewritten)
	case an.Operator == "LOGICAL_CREATE_TABLE" && !an.Query:
		plan.SQL, err = a.canonicalCreate(ctx, "TABLE", rewritten)
	}
	if err != nil {
		return sqltext.Plan{}, sqltext.Statement{}, err
	}
	if bound && !an.callsSequence(volatile) {
		plan.Rerunnable = true
		plan.Prove = an.heavy()
	}
	if plan.SQL != rewritten.Text {
		return plan, sqltext.Statement{}, nil
	}
	return plan, rewritten, nil
}

// callsSequence reports whether the bound plan draws from or reads a
// sequence (nextval, currval), its target's DEFAULTs included.
func (an Analysis) callsSequence(volatile sqltext.Volatile) bool {
	for _, name := range an.Calls {
		if sqltext.ClassifyFunction(name, volatile) == sqltext.FuncSequence {
			return true
		}
	}
	return false
}

// heavy reports whether the statement's cost is not bounded by its text:
// it reads rows of tables or of a query.
func (an Analysis) heavy() bool {
	switch an.Operator {
	case "LOGICAL_UPDATE", "LOGICAL_DELETE", "LOGICAL_MERGE_INTO", "LOGICAL_CREATE_INDEX", "LOGICAL_ALTER":
		return true
	case "LOGICAL_INSERT", "LOGICAL_CREATE_TABLE":
		return an.Query
	}
	return false
}

// textOperators are the plans that statements starting with these verbs
// make, as far as the rules of Check go.
var textOperators = map[string]string{
	"insert": "LOGICAL_INSERT", "update": "LOGICAL_UPDATE", "delete": "LOGICAL_DELETE", "merge": "LOGICAL_MERGE_INTO",
}

// TextAnalysis is what the text alone shows of what Analyze finds in a plan,
// for a statement DuckDB cannot bind on the leader (one naming a table an
// earlier statement of the same transaction creates): sampling words, and
// rowid named. Calls are the lexer's business (sqltext.Deterministic); a
// macro's or view's body is out of its sight.
func TextAnalysis(st sqltext.Statement) Analysis {
	if st.Err() != nil {
		return Analysis{}
	}
	verb, _ := st.Verb()
	op := textOperators[verb]
	if verb == "create" && st.ReadsRows() {
		op = "LOGICAL_CREATE_TABLE" // CREATE TABLE … AS; views and macros are checked by sqltext
	}
	return Analysis{Operator: op, Sample: st.Samples(), RowID: namesRowID(st)}
}

// String describes the analysis for logs and test failures.
func (an Analysis) String() string {
	return fmt.Sprintf("%s calls=%v table-functions=%v sample=%v rowid=%v hidden-scan=%v",
		an.Operator, an.Calls, an.TableFunctions, an.Sample, an.RowID, an.HiddenScan)
}
