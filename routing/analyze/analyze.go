// Package analyze asks DuckDB's own binder what a write does: it binds the
// statement against the leader's catalog (json_serialize_plan gives the
// bound, unoptimized logical plan) and reports every function the plan
// calls after macros and views are expanded, the target table's DEFAULT
// expressions it uses, the table functions it scans, sampling and rowid.
// Verdict turns that into the determinism rules of docs/determinism.md;
// DESIGN.md says where the text rules of package node/sqltext still answer
// instead.
package analyze

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqlquote"
	"github.com/duckraft/duckraft/node/sqltext"
)

// ErrUnbound reports a statement DuckDB could not bind on this node, e.g.
// one naming a table that an earlier, not yet committed statement of the
// same client transaction creates. Callers fall back to the lexer's rules.
var ErrUnbound = errors.New("analyze: DuckDB cannot bind the statement here")

// ErrUnsupported reports a statement DuckDB runs that a cluster cannot
// replicate yet. Clients see it as DuckDB's "Not implemented" exception.
var ErrUnsupported error = unsupported{}

type unsupported struct{}

func (unsupported) Error() string { return "duckraft: not supported in a cluster" }

// ExceptionType implements engine.ExceptionError.
func (unsupported) ExceptionType() string { return "Not implemented" }

// rowidIndex is the column index DuckDB's plan gives the rowid
// pseudo-column (COLUMN_IDENTIFIER_ROW_ID, 2^64-1).
const rowidIndex = "18446744073709551615"

// Analysis is what DuckDB's binder says a statement does.
type Analysis struct {
	// Operator is the plan's top logical operator, e.g. LOGICAL_INSERT,
	// LOGICAL_UPDATE, LOGICAL_CREATE_TABLE.
	Operator string
	// Calls are the lower-case names of the scalar, aggregate and window
	// functions the plan calls, macros expanded, views' queries and the
	// DEFAULT expressions the write fills in included, in plan order
	// without repeats, then the calls of the definitions of the macros and
	// views the text names (definedCalls: the binder folds constant calls).
	// age() with one argument is ageToday.
	Calls []string
	// Via names, for a call found in the definition of a macro or view
	// the statement names, that macro or view ("ago()", "view v").
	Via map[string]string
	// Stores says what the statement stores for each node to evaluate
	// later, or evaluates on each node without a plan to judge ("a column
	// default or generated column", "a view", …), or is empty: such a
	// statement's Calls hold its own text's calls too, judged by Check as
	// a stored expression is (docs/determinism.md rule 4).
	Stores string
	// TableFunctions are the table functions the plan scans other than
	// tables themselves (seq_scan), e.g. read_csv, duckdb_settings.
	TableFunctions []string
	// Sample is set when the plan samples (USING SAMPLE, TABLESAMPLE).
	Sample bool
	// RowID is set when the statement's text names rowid and a scan reads
	// the rowid pseudo-column (no real column of that name shadows it):
	// rowids are node-local (a snapshot restore or a checkpoint renumbers
	// them).
	RowID bool
	// HiddenScan is set when the plan scans rows but the text has no word
	// that makes the applier apply it on one thread
	// (sqltext.Statement.ReadsRows): a macro hides a query, and DuckDB's
	// threads would then order nextval's values and floating-point sums
	// differently on each node.
	HiddenScan bool
	// Query is set when the top operator runs a query (CREATE TABLE … AS,
	// INSERT … SELECT): it has a child plan.
	Query bool
	// ScanOrder names what in the plan takes table rows in the order they
	// are stored in, which is not the same on every replica (see
	// scanOrder), or is empty.
	ScanOrder string
	// NestedMacro is set for a CREATE MACRO (or FUNCTION) in a schema
	// nested in another (DuckDB 2.0's CREATE MACRO s.child.m).
	NestedMacro bool
	// NestedIn is the outermost schema of a CREATE SCHEMA that nests a
	// schema in another (DuckDB 2.0's CREATE SCHEMA s.child), or empty.
	NestedIn string
}

// Analyzer binds statements against a database's catalog on connections
// of a pool: opening one per statement cost as much as binding it. What it
// runs leaves no state on them: binding executes nothing, and what it
// creates to look at (a trigger, a view) it creates in a transaction it
// rolls back. Its owner closes the pool, which holds the database open
// while its connections live. It is safe for concurrent use.
type Analyzer struct {
	pool *engine.Pool

	// guard, if set, judges a statement before anything else
	// (WithGuard).
	guard func(sqltext.Statement) error

	mu sync.Mutex
	// builtin holds the definitions of DuckDB's own macros, read once
	// (builtinMacros).
	builtin map[string][]string
}

// New returns an Analyzer of the database of pool.
func New(pool *engine.Pool) *Analyzer { return &Analyzer{pool: pool} }

// WithGuard makes Decide refuse first what check refuses (the node's
// access.Guard: the leader evaluates a write that reads files itself, so
// its own files must be out of reach too), and returns a.
func (a *Analyzer) WithGuard(check func(sqltext.Statement) error) *Analyzer {
	a.guard = check
	return a
}

// Analyze binds the one statement st and reports what its plan does. An
// error wrapping ErrUnbound means DuckDB could not bind it here.
func (a *Analyzer) Analyze(ctx context.Context, st sqltext.Statement) (Analysis, error) {
	c, err := a.pool.Get()
	if err != nil {
		return Analysis{}, fmt.Errorf("analyze: %w", err)
	}
	defer a.pool.Put(c)
	return a.analyzeOn(ctx, c, st)
}

// analyzeOn is Analyze on connection c, which sees what c's open
// transaction changed.
func (a *Analyzer) analyzeOn(ctx context.Context, c *engine.Conn, st sqltext.Statement) (Analysis, error) {
	out, err := c.QueryStrings(ctx, "SELECT json_serialize_plan("+sqlquote.Literal(st.Text)+")")
	if err != nil {
		// DuckDB answers most statements it cannot bind with an error
		// object (fromPlan); whatever it raises instead is no answer either.
		return Analysis{}, fmt.Errorf("%w: %w", ErrUnbound, err)
	}
	if len(out) != 1 {
		return Analysis{}, fmt.Errorf("analyze: json_serialize_plan returned %d rows", len(out))
	}
	an, scans, err := fromPlan(out[0])
	if err != nil {
		return Analysis{}, err
	}
	an.Stores = storedBy(an.Operator, an.Query)
	if err := a.addDefinedCalls(ctx, c, &an, st); err != nil {
		return Analysis{}, err
	}
	// Which scan of rowid is the user's the plan does not say (an alias
	// hides it, and a write's own scan of its target reads it anyway): the
	// text naming it does.
	an.RowID = scans.rowid && namesRowID(st)
	an.HiddenScan = scans.rows && !st.ReadsRows()
	return an, nil
}

// planError is json_serialize_plan's answer when it cannot plan.
type planError struct {
	Error   bool   `json:"error"`
	Type    string `json:"error_type"`
	Message string `json:"error_message"`
}

// scanFacts are what the plan's scans read, which Analyze weighs against
// the statement's text.
type scanFacts struct {
	// rows is set when the plan scans a table or table function.
	rows bool
	// rowid is set when a scan reads the rowid pseudo-column and no
	// scanned table has a real column named rowid.
	rowid bool
}

// fromPlan reads json_serialize_plan's output.
func fromPlan(text string) (Analysis, scanFacts, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber() // column indexes reach 2^64-1, which float64 rounds
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return Analysis{}, scanFacts{}, fmt.Errorf("analyze: decode plan: %w", err)
	}
	if failed, _ := root["error"].(bool); failed {
		var pe planError
		_ = json.Unmarshal([]byte(text), &pe)
		return Analysis{}, scanFacts{}, fmt.Errorf("%w: %s: %s", ErrUnbound, pe.Type, pe.Message)
	}
	plans, _ := root["plans"].([]any)
	if len(plans) != 1 {
		return Analysis{}, scanFacts{}, fmt.Errorf("%w: %d plans for one statement", ErrUnbound, len(plans))
	}
	top, _ := plans[0].(map[string]any)
	w := walker{an: Analysis{Operator: str(top["type"])}}
	// An UPDATE fills in a DEFAULT only where SET names one; an INSERT
	// fills in every column it does not list.
	w.defaults = w.an.Operator == "LOGICAL_INSERT" || contains(top, "expression_class", "BOUND_DEFAULT")
	w.walk(top)
	w.an.ScanOrder = scanOrder(top)
	w.an.NestedMacro = w.an.Operator == "LOGICAL_CREATE_MACRO" && inNestedSchema(top)
	if w.an.Operator == "LOGICAL_CREATE_SCHEMA" {
		w.an.NestedIn = nestedIn(top)
	}
	children, _ := top["children"].([]any)
	w.an.Query = len(children) > 0
	return w.an, scanFacts{rows: w.scans, rowid: w.rowidScan && !w.rowidColumn}, nil
}

type walker struct {
	an       Analysis
	defaults bool
	scans    bool
	// rowidScan is set when a scan reads the rowid pseudo-column (an
	// UPDATE's, DELETE's or MERGE's own scan of its target always does,
	// and so does count(*)); rowidColumn when a scanned table has a real
	// column named rowid, which shadows the pseudo-column.
	rowidScan, rowidColumn bool
}

// walk visits the plan's operators and bound expressions. The parse trees
// a plan carries (table_info: the target's column definitions as written;
// info: what a CREATE stores) are not bound and are skipped: the DEFAULTs
// a write uses come bound, in bound_defaults.
func (w *walker) walk(v any) {
	switch v := v.(type) {
	case map[string]any:
		switch str(v["expression_class"]) {
		case "BOUND_FUNCTION", "BOUND_AGGREGATE", "BOUND_WINDOW":
			name := planName(v)
			if children, _ := v["children"].([]any); name == "age" && len(children) == 1 {
				name = ageToday
			}
			if name != "" && !slices.Contains(w.an.Calls, name) {
				w.an.Calls = append(w.an.Calls, name)
			}
		}
		switch str(v["type"]) {
		case "LOGICAL_SAMPLE":
			w.an.Sample = true
		case "LOGICAL_GET":
			w.scans = true
			w.get(v)
		}
		for k, c := range v {
			switch {
			case k == "table_info" || k == "info":
			case k == "bound_defaults" && !w.defaults:
			default:
				w.walk(c)
			}
		}
	case []any:
		for _, c := range v {
			w.walk(c)
		}
	}
}

// get notes what a LOGICAL_GET scans.
func (w *walker) get(v map[string]any) {
	name := planName(v)
	if name != "seq_scan" && name != "" && !slices.Contains(w.an.TableFunctions, name) {
		w.an.TableFunctions = append(w.an.TableFunctions, name)
	}
	if extra, ok := v["extra_info"].(map[string]any); ok && extra["sample_options"] != nil {
		w.an.Sample = true
	}
	if scansRowID(v) {
		w.rowidScan = true
	}
	names, _ := v["names"].([]any)
	for _, n := range names {
		if strings.EqualFold(str(n), "rowid") {
			w.rowidColumn = true
		}
	}
}

func scansRowID(get map[string]any) bool {
	cols, _ := get["column_indexes"].([]any)
	for _, c := range cols {
		if m, ok := c.(map[string]any); ok {
			if n, ok := m["index"].(json.Number); ok && n.String() == rowidIndex {
				return true
			}
		}
	}
	return false
}

// namesRowID reports whether the statement names rowid outside strings
// and comments (bare or quoted, not as a function).
func namesRowID(st sqltext.Statement) bool {
	sig := st.Significant()
	for i, t := range sig {
		name := ""
		switch t.Kind {
		case sqltext.TokIdent:
			name = t.Text
		case sqltext.TokQuotedIdent:
			name = strings.Trim(t.Text, `"`)
		}
		if strings.EqualFold(name, "rowid") && !(i+1 < len(sig) && sig[i+1].IsPunct('(')) {
			return true
		}
	}
	return false
}

// contains reports whether any object in v has key set to value.
func contains(v any, key, value string) bool {
	return anyObject(v, func(m map[string]any) bool { return str(m[key]) == value })
}

// anyObject reports whether match holds for any object in v, skipping the
// unbound parse trees and DEFAULTs a plan carries (see walk).
func anyObject(v any, match func(map[string]any) bool) bool {
	switch v := v.(type) {
	case map[string]any:
		if match(v) {
			return true
		}
		for k, c := range v {
			if k != "table_info" && k != "info" && k != "bound_defaults" && anyObject(c, match) {
				return true
			}
		}
	case []any:
		for _, c := range v {
			if anyObject(c, match) {
				return true
			}
		}
	}
	return false
}

// inNestedSchema reports whether a LOGICAL_CREATE_MACRO creates its macro in
// a nested schema: its qualified name is the catalog, the schema path and
// the macro's name, so a macro of a top-level schema has three parts.
func inNestedSchema(top map[string]any) bool {
	info, _ := top["info"].(map[string]any)
	q, _ := info["qualified_name"].(map[string]any)
	path, _ := q["path"].([]any)
	return len(path) > 3
}

// nestedIn is the outermost schema a LOGICAL_CREATE_SCHEMA nests its schema
// in: its qualified name is the catalog, the schema path and an empty last
// part, so a top-level schema has three parts and nests in nothing.
func nestedIn(top map[string]any) string {
	info, _ := top["info"].(map[string]any)
	q, _ := info["qualified_name"].(map[string]any)
	path, _ := q["path"].([]any)
	if len(path) <= 3 {
		return ""
	}
	return str(path[1])
}

// planName is the lower-case name of the function a plan node calls or
// scans: the last part of its qualified name (qname, e.g. system.main.random
// or seq_scan).
func planName(v map[string]any) string {
	q, _ := v["qname"].(map[string]any)
	path, _ := q["path"].([]any)
	if len(path) == 0 {
		return ""
	}
	return strings.ToLower(str(path[len(path)-1]))
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
