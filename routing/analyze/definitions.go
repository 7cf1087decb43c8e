package analyze

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqlquote"
	"github.com/duckraft/duckraft/node/sqltext"
)

// maxDefinitionDepth bounds how deep definedCalls follows macros and views
// that name other macros and views; DuckDB refuses cycles, so the bound
// only stops a catalog deeper than any real one from costing more.
const maxDefinitionDepth = 32

// ageToday stands, in Analysis.Calls, for age() called with one argument:
// DuckDB counts from today's date then (age(x) is age(current_date, x)),
// though duckdb_functions() lists age as CONSISTENT.
const ageToday = "age(x)"

// definedCall is a function called in the definition of a macro or view
// that a statement names.
type definedCall struct {
	// name is the function, lower-case (ageToday for age() with one
	// argument).
	name string
	// via is the macro or view the statement names whose definition
	// holds the call, as a refusal names it, with the macros and views
	// it names in turn down to the one that calls: "ago()",
	// "view v → hour_ago() → ago()".
	via string
}

// definedCallsOn lists the functions called in the definitions of the
// macros and views that st names, and in those they name in turn, read on
// connection c (which sees what its open transaction created). DuckDB 2.0's binder folds a call with constant
// arguments into a constant (epoch(now()), length(current_schema()) and
// ago(INTERVAL 1 HOUR), DuckDB's own macro over current_timestamp, bind as
// epoch(<timestamp>), length('main') and <timestamp>), so a clock or
// session function hidden in a macro or view leaves no trace in the plan;
// its definition still says it. DuckDB's own macros (builtinMacros:
// ago, pg_conf_load_time, current_catalog, pg_sleep, histogram, …) count
// as a user's do.
//
// Every word of the text counts as a possible view, and every name it may
// call (macroCandidates) as a possible macro, so a column named like a
// view brings that definition in too: a write may be refused or evaluated
// on the leader when it need not be, never the other way round. A text
// that can call no macro does not read duckdb_functions(), which lists
// every function DuckDB has and costs about 12 ms (BenchmarkDefinedCalls):
// an INSERT … VALUES of expressions over literals reads only
// duckdb_views(), under 1 ms. DuckDB's own macros are read once per
// Analyzer, when a text first may call one.
func (a *Analyzer) definedCallsOn(ctx context.Context, c *engine.Conn, st sqltext.Statement) ([]definedCall, error) {
	if _, _, err := st.Names(); err != nil {
		return nil, fmt.Errorf("analyze: %w", err)
	}
	words := viewWords(st)
	// A name to look up, and what the statement called to reach it.
	type lookup struct{ name, via string }
	var called, viewed []lookup
	for _, m := range macroCandidates(st) {
		called = append(called, lookup{m, m + "()"})
	}
	for _, w := range words {
		viewed = append(viewed, lookup{w, "view " + w})
	}
	seenCall, seenWord := map[string]bool{}, map[string]bool{}
	var calls []definedCall
	var nextCalled, nextViewed []lookup
	// body notes the calls of one definition, reached through via, and
	// queues the names it may call or read in turn.
	body := func(text, via string) error {
		def := sqltext.Parse(text)
		bc, err := bodyCalls(def)
		if err != nil {
			return fmt.Errorf("analyze: a macro or view definition: %w", err)
		}
		bw := viewWords(def)
		for _, name := range bc {
			if !slices.ContainsFunc(calls, func(d definedCall) bool { return d.name == name }) {
				calls = append(calls, definedCall{name: name, via: via})
			}
		}
		for _, m := range macroCandidates(def) {
			nextCalled = append(nextCalled, lookup{m, via + " → " + m + "()"})
		}
		for _, w := range bw {
			nextViewed = append(nextViewed, lookup{w, via + " → view " + w})
		}
		return nil
	}
	for depth := 0; depth < maxDefinitionDepth; depth++ {
		var macros, views []string
		viaOf := map[string]string{}
		for _, l := range called {
			if seenCall[l.name] {
				continue
			}
			seenCall[l.name] = true
			builtin, err := a.builtinMacros(ctx, c)
			if err != nil {
				return nil, err
			}
			for _, def := range builtin[l.name] {
				if err := body(def, l.via); err != nil {
					return nil, err
				}
			}
			macros = append(macros, sqlquote.Literal(l.name))
			viaOf["m"+l.name] = l.via
		}
		for _, l := range viewed {
			if seenWord[l.name] {
				continue
			}
			seenWord[l.name] = true
			views = append(views, sqlquote.Literal(l.name))
			viaOf["v"+l.name] = l.via
		}
		if len(macros) == 0 && len(views) == 0 {
			break
		}
		var parts []string
		if len(macros) > 0 {
			parts = append(parts, "SELECT 'm' || lower(function_name) || chr(31) || macro_definition FROM duckdb_functions() "+
				"WHERE function_type IN ('macro', 'table_macro') AND NOT internal AND macro_definition IS NOT NULL "+
				"AND lower(function_name) IN ("+strings.Join(macros, ", ")+")")
		}
		if len(views) > 0 {
			parts = append(parts, "SELECT 'v' || lower(view_name) || chr(31) || sql FROM duckdb_views() "+
				"WHERE NOT internal AND lower(view_name) IN ("+strings.Join(views, ", ")+")")
		}
		defs, err := c.QueryStrings(ctx, strings.Join(parts, " UNION ALL "))
		if err != nil {
			return nil, fmt.Errorf("analyze: read the definitions of macros and views: %w", err)
		}
		for _, d := range defs {
			key, def, _ := strings.Cut(d, "\x1f")
			if err := body(def, viaOf[key]); err != nil {
				return nil, err
			}
		}
		called, viewed = nextCalled, nextViewed
		nextCalled, nextViewed = nil, nil
	}
	return calls, nil
}

// builtinMacros returns the definitions of DuckDB's own macros, scalar
// and table, by lower-case name (an overloaded macro has several), read
// from duckdb_functions() once per Analyzer: they are the same for the
// life of the process, and reading them is what costs.
func (a *Analyzer) builtinMacros(ctx context.Context, c *engine.Conn) (map[string][]string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.builtin != nil {
		return a.builtin, nil
	}
	rows, err := c.QueryStrings(ctx, "SELECT lower(function_name) || chr(31) || macro_definition FROM duckdb_functions() "+
		"WHERE internal AND function_type IN ('macro', 'table_macro') AND macro_definition IS NOT NULL")
	if err != nil {
		return nil, fmt.Errorf("analyze: read DuckDB's own macros: %w", err)
	}
	m := map[string][]string{}
	for _, r := range rows {
		name, def, _ := strings.Cut(r, "\x1f")
		if !slices.Contains(m[name], def) {
			m[name] = append(m[name], def)
		}
	}
	a.builtin = m
	return m, nil
}

// bodyCalls lists, lower-cased and without repeats, the functions a text
// calls (sqltext.Statement.Names: clock keywords without parentheses
// included), with ageToday for each age() called with one argument.
func bodyCalls(st sqltext.Statement) ([]string, error) {
	calls, _, err := st.Names()
	if err != nil {
		return nil, err
	}
	if slices.Contains(calls, "age") && callsAgeToday(st) {
		calls = append(calls, ageToday)
	}
	return calls, nil
}

// callsAgeToday reports whether st calls age() with one argument: a call
// whose parentheses hold something and no comma outside inner parentheses
// or brackets.
func callsAgeToday(st sqltext.Statement) bool {
	if st.Err() != nil {
		return true
	}
	sig := st.Significant()
	for k := 0; k+1 < len(sig); k++ {
		t := sig[k]
		if !sig[k+1].IsPunct('(') || (t.Kind != sqltext.TokIdent && t.Kind != sqltext.TokQuotedIdent) {
			continue
		}
		if name := strings.ToLower(t.Name()); name != "age" {
			continue
		}
		depth, args := 0, 0
		for j := k + 1; j < len(sig); j++ {
			switch {
			case sig[j].IsPunct('(') || sig[j].IsPunct('[') || sig[j].IsPunct('{'):
				depth++
			case sig[j].IsPunct(')') || sig[j].IsPunct(']') || sig[j].IsPunct('}'):
				depth--
			case depth == 1 && sig[j].IsPunct(','):
				args++
			}
			if depth == 0 {
				if args == 0 && j > k+2 {
					return true
				}
				break
			}
		}
	}
	return false
}

// macroCandidates lists, lower-cased, the names st may call a macro by.
// DuckDB binds a macro, scalar or table, only where it is called, as a
// name followed by a parenthesis; a bare name is a column or a table
// (TestMacroNeedsParentheses). Of those names, it leaves out what the
// grammar never binds as a function: an unquoted reserved keyword or
// VALUES (nonFunctionKeywords: VALUES ( opens a row), and the table of
// INSERT INTO t (a, b), whose parenthesis holds its columns. A quoted
// name always counts: "select"() calls a macro named select.
func macroCandidates(st sqltext.Statement) []string {
	if st.Err() != nil {
		// sqltext.Statement.Names refuses the same text first.
		return nil
	}
	sig := st.Significant()
	from, to := createdName(sig)
	var out []string
	for k, t := range sig {
		if k+1 >= len(sig) || !sig[k+1].IsPunct('(') || insertTarget(sig, k) || from <= k && k <= to {
			continue
		}
		var name string
		switch t.Kind {
		case sqltext.TokIdent:
			name = strings.ToLower(t.Text)
			if nonFunctionKeywords[name] {
				continue
			}
		case sqltext.TokQuotedIdent:
			name = strings.ToLower(t.Name())
		default:
			continue
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// viewWords lists, lower-cased and without repeats, the words of st that
// may name a view: every identifier, quoted or not, but the name of the
// object a CREATE makes (createdName), whose old definition CREATE OR
// REPLACE discards.
func viewWords(st sqltext.Statement) []string {
	if st.Err() != nil {
		return nil
	}
	sig := st.Significant()
	from, to := createdName(sig)
	var out []string
	for k, t := range sig {
		var name string
		switch {
		case from <= k && k <= to:
			continue
		case t.Kind == sqltext.TokIdent:
			name = strings.ToLower(t.Text)
		case t.Kind == sqltext.TokQuotedIdent:
			name = strings.ToLower(t.Name())
		default:
			continue
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// createdName returns the indexes in sig of the first and last token of
// the name a CREATE statement gives its object (CREATE [OR REPLACE]
// [TEMP] kind [IF NOT EXISTS] name, qualified or not), or -1, -1: the
// object the statement makes, not one it uses, though CREATE MACRO m(x)
// puts a parenthesis after it.
func createdName(sig []sqltext.Token) (int, int) {
	if len(sig) == 0 || !sig[0].Is("create") {
		return -1, -1
	}
	k := 1
	for k < len(sig) && sig[k].Kind == sqltext.TokIdent && !createdKinds[strings.ToLower(sig[k].Text)] {
		k++ // OR REPLACE, TEMP, TEMPORARY, PERSISTENT, UNIQUE, …
		if k > 4 {
			return -1, -1
		}
	}
	if k >= len(sig) {
		return -1, -1
	}
	k++
	if k+2 < len(sig) && sig[k].Is("if") && sig[k+1].Is("not") && sig[k+2].Is("exists") {
		k += 3
	}
	from := k
	for k < len(sig) && (sig[k].Kind == sqltext.TokIdent || sig[k].Kind == sqltext.TokQuotedIdent) {
		if k+1 < len(sig) && sig[k+1].IsPunct('.') {
			k += 2
			continue
		}
		return from, k
	}
	return -1, -1
}

// createdKinds are the kinds of object a CREATE names next.
var createdKinds = map[string]bool{
	"table": true, "view": true, "macro": true, "function": true, "trigger": true, "sequence": true,
	"index": true, "type": true, "schema": true, "secret": true,
}

// insertTarget reports whether the name at k, followed by a parenthesis,
// is the table of an INSERT … INTO, qualified or not.
func insertTarget(sig []sqltext.Token, k int) bool {
	j := k
	for j >= 2 && sig[j-1].IsPunct('.') && (sig[j-2].Kind == sqltext.TokIdent || sig[j-2].Kind == sqltext.TokQuotedIdent) {
		j -= 2
	}
	return j >= 1 && sig[j-1].Is("into")
}

// nonFunctionKeywords are DuckDB 2.0's reserved keywords
// (duckdb_keywords(), category reserved), which the grammar never takes
// for a function's name unquoted, and VALUES, which it takes for a row
// list. TestNonFunctionKeywords checks both against the engine.
var nonFunctionKeywords = map[string]bool{
	"all": true, "analyse": true, "analyze": true, "and": true, "any": true, "array": true, "as": true, "asc": true,
	"asymmetric": true, "both": true, "case": true, "cast": true, "check": true, "collate": true, "column": true,
	"constraint": true, "create": true, "default": true, "deferrable": true, "desc": true, "describe": true,
	"distinct": true, "do": true, "else": true, "end": true, "except": true, "false": true, "fetch": true, "for": true,
	"foreign": true, "from": true, "group": true, "having": true, "in": true, "initially": true, "intersect": true,
	"into": true, "lambda": true, "lateral": true, "leading": true, "limit": true, "not": true, "null": true,
	"offset": true, "on": true, "only": true, "or": true, "order": true, "pivot": true, "pivot_longer": true,
	"pivot_wider": true, "placing": true, "primary": true, "qualify": true, "references": true, "returning": true,
	"select": true, "show": true, "some": true, "summarize": true, "symmetric": true, "table": true, "then": true,
	"to": true, "trailing": true, "true": true, "union": true, "unique": true, "unpivot": true, "using": true,
	"variadic": true, "when": true, "where": true, "window": true, "with": true,
	"values": true,
}
