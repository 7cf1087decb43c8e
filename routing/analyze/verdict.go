package analyze

import (
	"fmt"
	"strings"

	"github.com/duckraft/duckraft/node/sqltext"
)

// Verdict is what the determinism rules make of an Analysis that refuses
// nothing.
type Verdict struct {
	// Materialize is set for an INSERT whose values must be computed once
	// on the leader (sqltext.Materialized); Why names the reason.
	Materialize bool
	Why         string
	// Sequence is set when the INSERT itself also calls nextval or
	// currval.
	Sequence bool
}

// writeOperators are the plans whose statements change replicated state
// by evaluating expressions; other plans (a query that is a write only for
// its nextval(), DDL storing expressions unbound) are left to the lexer's
// rules.
var writeOperators = map[string]string{
	"LOGICAL_INSERT":       "INSERT",
	"LOGICAL_UPDATE":       "UPDATE",
	"LOGICAL_DELETE":       "DELETE",
	"LOGICAL_MERGE_INTO":   "MERGE",
	"LOGICAL_CREATE_TABLE": "CREATE TABLE … AS",
	"LOGICAL_CREATE_INDEX": "CREATE INDEX",
	"LOGICAL_ALTER":        "ALTER",
}

// replicatedTableFunctions are the table functions whose rows depend only
// on their arguments, the same on every replica. Any other table function
// in a write is treated as reading node-local state (files, settings,
// memory, the catalog of attached databases, …).
var replicatedTableFunctions = map[string]bool{
	"range": true, "generate_series": true, "unnest": true, "repeat": true, "repeat_row": true,
	"json_each": true, "json_tree": true,
}

// binderCalls are VOLATILE functions the binder itself adds to plans, the
// same on every replica: error() raises "more than one row returned by a
// subquery" for a scalar subquery.
var binderCalls = map[string]bool{"error": true}

// Check applies docs/determinism.md's rules to what the binder found in a
// statement that sqltext.Deterministic already accepted and whose clock
// functions it already rewrote, so any clock function left is hidden from
// the rewrite (in a macro, DuckDB's own ago() included, or a view). An
// INSERT that needs the leader gets a Verdict to materialize it; any other
// write that would differ between replicas, and a stored expression
// (an.Stores) that would, is refused with an error wrapping
// sqltext.ErrNondeterministic that says why and what to do instead.
func (an Analysis) Check(volatile sqltext.Volatile) (Verdict, error) {
	if an.Stores != "" {
		return Verdict{}, an.checkStored(volatile)
	}
	what, ok := writeOperators[an.Operator]
	if !ok {
		return Verdict{}, nil
	}
	insert := an.Operator == "LOGICAL_INSERT"
	var v Verdict
	var r reason
	for _, name := range an.Calls {
		if binderCalls[name] {
			continue
		}
		call, through := an.describe(name)
		switch classOf(name, volatile) {
		case sqltext.FuncSession:
			return Verdict{}, refuse("%s in %s%s depends on the client's session, which the replicas do not have (DuckDB's binder found it, perhaps inside a macro or view); pass the value as a literal or parameter", call, what, through)
		case sqltext.FuncSequence:
			v.Sequence = true
		case sqltext.FuncClock:
			r.note(call, through, "duckraft replaces the clock with the leader's timestamp only where the statement itself calls it; "+
				"write now() (or current_date, …) in the statement, e.g. now() - INTERVAL 1 HOUR for ago(INTERVAL 1 HOUR) "+
				"and age(current_date, x) for age(x), or pass it to the macro as a parameter")
		case sqltext.FuncVolatile:
			r.note(call, through, "compute the values in the client and send them as literals or parameters, "+
				"or use INSERT … SELECT, which duckraft evaluates once on the leader")
		case sqltext.FuncNodeLocal:
			r.note(call, through, "it reads state local to each node; load the data with INSERT INTO t SELECT … FROM it, which duckraft reads once on the leader")
		}
	}
	for _, name := range an.TableFunctions {
		if !replicatedTableFunctions[name] && !strings.HasPrefix(name, "seq_scan") {
			r.note(name+"()", "", "it reads state local to each node (files, settings, memory); load the data with INSERT INTO t SELECT … FROM it, which duckraft reads once on the leader")
		}
	}
	if an.Sample {
		r.note("sampling (USING SAMPLE, TABLESAMPLE)", "", "each replica would pick other rows; sample in INSERT INTO t SELECT … USING SAMPLE …, which duckraft evaluates once on the leader, or choose the rows by a key")
	}
	if an.RowID {
		r.note("rowid", "", "rowids are local to each node (a snapshot restore or a checkpoint renumbers the rows); use a primary key or another column that identifies the rows")
	}
	if an.ScanOrder != "" {
		r.note(an.ScanOrder, "", "it takes rows in the order they are stored in, which a snapshot restore or a checkpoint changes on each replica; "+
			"order the rows by a key (ORDER BY id), or use INSERT … SELECT, which duckraft evaluates once on the leader")
	}
	if an.HiddenScan && (insert || an.Operator == "LOGICAL_CREATE_TABLE") {
		r.note("a query hidden in a macro", "", "the replicas would apply it on several threads, which order nextval() and floating-point sums differently; "+
			"write the query in the statement (INSERT INTO t SELECT …)")
	}
	if r.what == "" {
		return Verdict{Sequence: v.Sequence}, nil
	}
	if insert {
		return Verdict{Materialize: true, Why: r.what + r.through, Sequence: v.Sequence}, nil
	}
	return Verdict{}, refuse("%s in %s%s would give the replicas different data (DuckDB's binder found it, perhaps inside a macro or view or under a quoted name); %s", r.what, what, r.through, r.advice)
}

// reason is why a statement would differ between replicas: the first one
// found, or a later one that names the macro or view the client wrote
// where the first does not (the plan shows get_current_timestamp where the
// client wrote pg_conf_load_time()).
type reason struct {
	what, through, advice string
}

func (r *reason) note(what, through, advice string) {
	if r.what == "" || through != "" && r.through == "" {
		*r = reason{what, through, advice}
	}
}

// checkStored refuses a statement that stores an expression every node
// evaluates later (a DEFAULT, a generated column, a view, a macro, a
// trigger's action) or evaluates on its own (ALTER TABLE), when the
// expression, with the macros and views it names expanded (DuckDB's own
// included), calls the clock, a volatile or node-local function or one
// that reads the client's session: docs/determinism.md rule 4, which the
// lexer applies to the statement's text alone. Sequences stay allowed
// (DEFAULT nextval('s'), rule 2); the lexer refuses them where they are not.
func (an Analysis) checkStored(volatile sqltext.Volatile) error {
	var r reason
	for _, name := range an.Calls {
		if binderCalls[name] {
			continue
		}
		call, through := an.describe(name)
		switch classOf(name, volatile) {
		case sqltext.FuncSession:
			return refuse("%s in %s%s depends on the session that evaluates it, which is each node's own; pass the value as a literal or parameter", call, an.Stores, through)
		case sqltext.FuncClock:
			r.note(call, through, "give the value in the INSERT (duckraft uses the leader's timestamp there) or, in a macro, take it as a parameter")
		case sqltext.FuncVolatile:
			r.note(call, through, "compute the values in the client or with INSERT … SELECT, which duckraft evaluates once on the leader")
		case sqltext.FuncNodeLocal:
			r.note(call, through, "it reads state local to each node; load the data with INSERT INTO t SELECT … FROM it, which duckraft reads once on the leader")
		}
	}
	if r.what == "" {
		return nil
	}
	return refuse("%s in %s%s would be evaluated separately on each replica (the macros and views it names expanded, DuckDB's own included); %s", r.what, an.Stores, r.through, r.advice)
}

// classOf is sqltext.ClassifyFunction, with age() of one argument (ageToday)
// reading the clock.
func classOf(name string, volatile sqltext.Volatile) sqltext.FuncClass {
	if name == ageToday {
		return sqltext.FuncClock
	}
	return sqltext.ClassifyFunction(name, volatile)
}

// describe names a call for a refusal, and the macro or view the client
// wrote that holds it (", through ago()"), if any.
func (an Analysis) describe(name string) (call, through string) {
	call = name + "()"
	if name == ageToday {
		call = "age() with one argument (it counts from today's date)"
	}
	if via := an.Via[name]; via != "" && via != name+"()" {
		through = ", through " + via + ","
	}
	return call, through
}

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sqltext.ErrNondeterministic}, args...)...)
}
