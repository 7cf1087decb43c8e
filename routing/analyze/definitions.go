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
// Every word of the text counts as a possible name, so a column named like
// a macro or view brings that definition in too: a write may be refused or
// evaluated on the leader when it need not be, never the other way round.
func definedCalls(ctx context.Context, c *engine.Conn, sql string) ([]string, error) {
	_, words, err := wal.Names(sql)
	if err != nil {
		return nil, fmt.Errorf("analyze: %w", err)
	}
	seen := map[string]bool{}
	var calls []string
	for depth := 0; depth < maxDefinitionDepth; depth++ {
		var names []string
		for _, w := range words {
			if !seen[w] {
				seen[w] = true
				names = append(names, sqlquote.Literal(w))
			}
		}
		if len(names) == 0 {
			return calls, nil
		}
		list := strings.Join(names, ", ")
		bodies, err := c.QueryStrings(ctx, fmt.Sprintf(
			"SELECT macro_definition FROM duckdb_functions() WHERE function_type IN ('macro', 'table_macro') "+
				"AND NOT internal AND lower(function_name) IN (%s) "+
				"UNION ALL SELECT sql FROM duckdb_views() WHERE NOT internal AND lower(view_name) IN (%s)", list, list))
		if err != nil {
			return nil, fmt.Errorf("analyze: read the definitions of macros and views: %w", err)
		}
		words = words[:0]
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
			words = append(words, bw...)
		}
	}
	return calls, nil
}
