package analyze

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqlquote"
	"github.com/duckraft/duckraft/wal"
)

// maxDefinitionDepth bounds how deep definedCalls follows macros and views
// that name other macros and views; DuckDB refuses cycles, so the bound
// only stops a catalog deeper than any real one from costing more.
const maxDefinitionDepth = 32

// definedCalls lists the functions called in the definitions of the
// macros and views that sql names, and in those they name in turn. DuckDB
// 2.0's binder folds a call with constant arguments into a constant
// (epoch(now()), length(current_schema()) bind as epoch(<timestamp>) and
// length('main')), so a clock or session function hidden in a macro or
// view leaves no trace in the plan; its definition still says it.
//
// Every word of the text counts as a possible view, and every name it may
// call (macroCandidates) as a possible macro, so a column named like a
// view brings that definition in too: a write may be refused or evaluated
// on the leader when it need not be, never the other way round. A text
// that can call no macro does not read duckdb_functions(), which lists
// every function DuckDB has and costs about 12 ms (BenchmarkDefinedCalls):
// an INSERT … VALUES of expressions over literals reads only
// duckdb_views(), under 1 ms.
func definedCalls(ctx context.Context, c *engine.Conn, sql string) ([]string, error) {
	_, words, err := wal.Names(sql)
	if err != nil {
		return nil, fmt.Errorf("analyze: %w", err)
	}
	called := macroCandidates(sql)
	seenCall, seenWord := map[string]bool{}, map[string]bool{}
	var calls []string
	for depth := 0; depth < maxDefinitionDepth; depth++ {
		macros := unseen(called, seenCall)
		views := unseen(words, seenWord)
		if len(macros) == 0 && len(views) == 0 {
			return calls, nil
		}
		var parts []string
		if len(macros) > 0 {
			parts = append(parts, "SELECT macro_definition FROM duckdb_functions() WHERE function_type IN ('macro', 'table_macro') "+
				"AND NOT internal AND lower(function_name) IN ("+strings.Join(macros, ", ")+")")
		}
		if len(views) > 0 {
			parts = append(parts, "SELECT sql FROM duckdb_views() WHERE NOT internal AND lower(view_name) IN ("+strings.Join(views, ", ")+")")
		}
		bodies, err := c.QueryStrings(ctx, strings.Join(parts, " UNION ALL "))
		if err != nil {
			return nil, fmt.Errorf("analyze: read the definitions of macros and views: %w", err)
		}
		called, words = nil, nil
		for _, body := range bodies {
			bc, bw, err := wal.Names(body)
			if err != nil {
				return nil, fmt.Errorf("analyze: a macro or view definition: %w", err)
			}
			for _, name := range bc {
				if !slices.Contains(calls, name) {
					calls = append(calls, name)
				}
			}
			called = append(called, macroCandidates(body)...)
			words = append(words, bw...)
		}
	}
	return calls, nil
}

// unseen returns the names not in seen as SQL literals, and adds them to
// seen.
func unseen(names []string, seen map[string]bool) []string {
	var out []string
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, sqlquote.Literal(n))
		}
	}
	return out
}

// macroCandidates lists, lower-cased, the names sql may call a macro by.
// DuckDB binds a macro, scalar or table, only where it is called, as a
// name followed by a parenthesis; a bare name is a column or a table
// (TestMacroNeedsParentheses). Of those names, it leaves out what the
// grammar never binds as a function: an unquoted reserved keyword or
// VALUES (nonFunctionKeywords: VALUES ( opens a row), and the table of
// INSERT INTO t (a, b), whose parenthesis holds its columns. A quoted
// name always counts: "select"() calls a macro named select.
func macroCandidates(sql string) []string {
	toks, err := wal.Lex(sql)
	if err != nil {
		// wal.Names refuses the same text first.
		return nil
	}
	sig := wal.SignificantTokens(toks)
	var out []string
	for k, t := range sig {
		if k+1 >= len(sig) || !sig[k+1].IsPunct('(') || insertTarget(sig, k) {
			continue
		}
		var name string
		switch t.Kind {
		case wal.TokIdent:
			name = strings.ToLower(t.Text)
			if nonFunctionKeywords[name] {
				continue
			}
		case wal.TokQuotedIdent:
			name = strings.ToLower(strings.ReplaceAll(strings.Trim(t.Text, `"`), `""`, `"`))
		default:
			continue
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// insertTarget reports whether the name at k, followed by a parenthesis,
// is the table of an INSERT … INTO, qualified or not.
func insertTarget(sig []wal.Token, k int) bool {
	j := k
	for j >= 2 && sig[j-1].IsPunct('.') && (sig[j-2].Kind == wal.TokIdent || sig[j-2].Kind == wal.TokQuotedIdent) {
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
