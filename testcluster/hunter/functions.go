package hunter

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/duckraft/duckraft/node/client"
)

// Function is one function DuckDB lists in duckdb_functions(), with its
// overloads' parameters.
type Function struct {
	Name string
	// Table is set for table functions and table macros; scalars and
	// scalar macros are called inside expressions.
	Table bool
	// Macro is set for a macro, DuckDB's own (ago, pg_conf_load_time, …)
	// or a user's: its body, not a function of its own, is what runs.
	Macro bool
	// Overloads are the parameter lists, each with one Param per parameter.
	Overloads [][]Param
}

// Param is one parameter of an overload: its name and type as DuckDB
// lists them. A table function's parameters named col0, col1 … and every
// parameter of a scalar or a macro are positional; the others are named
// (name := value) and optional.
type Param struct {
	Name, Type string
	Positional bool
}

// functionsQuery lists the functions the hunter calls: every VOLATILE or
// CONSISTENT_WITHIN_QUERY scalar (the clock is one), every scalar macro
// (DuckDB lists no stability for a macro: what its body calls decides, and
// ago() and pg_conf_load_time() read the clock), every table function and
// table macro, except the TPC-H and TPC-DS generators: DuckDB 2.0's
// library bundles them, and one call of dbgen writes 8.6 million rows on
// every node, so a hunt slowed to a crawl on snapshots of a TPC-H database
// (they replicate as any deterministic write). Parameters are joined with a
// separator no name or type holds, so that the answer is plain strings.
const functionsQuery = `SELECT function_name, function_type,
	coalesce(array_to_string(parameters, chr(31)), ''), coalesce(array_to_string(parameter_types, chr(31)), '')
FROM duckdb_functions()
WHERE (function_type = 'scalar' AND stability IN ('VOLATILE', 'CONSISTENT_WITHIN_QUERY'))
	OR function_type = 'macro'
	OR (function_type IN ('table', 'table_macro') AND function_name NOT IN ('dbgen', 'dsdgen'))`

// LoadFunctions asks a node's DuckDB for the functions to call, sorted by
// name and overload so that a seed generates the same statements on the
// same DuckDB version.
func LoadFunctions(ctx context.Context, c *client.Conn) ([]Function, error) {
	rows, err := c.Query(ctx, functionsQuery)
	if err != nil {
		return nil, fmt.Errorf("hunter: list functions: %w", err)
	}
	defer rows.Close()
	byName := map[string]*Function{}
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			return nil, fmt.Errorf("hunter: list functions: %w", err)
		}
		name, _ := v[0].(string)
		kind, _ := v[1].(string)
		names, _ := v[2].(string)
		types, _ := v[3].(string)
		f := byName[name]
		if f == nil {
			f = &Function{Name: name, Table: kind == "table" || kind == "table_macro", Macro: kind == "macro" || kind == "table_macro"}
			byName[name] = f
		}
		f.Overloads = append(f.Overloads, params(names, types, kind == "table"))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("hunter: list functions: %w", err)
	}
	out := make([]Function, 0, len(byName))
	for _, f := range byName {
		sort.Slice(f.Overloads, func(i, j int) bool { return overloadKey(f.Overloads[i]) < overloadKey(f.Overloads[j]) })
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) == 0 {
		return nil, fmt.Errorf("hunter: duckdb_functions() listed no function")
	}
	return out, nil
}

// params splits an overload's parameter names and types; named says
// whether parameters not called colN are named ones.
func params(names, types string, named bool) []Param {
	if names == "" {
		return nil
	}
	n, t := strings.Split(names, "\x1f"), strings.Split(types, "\x1f")
	out := make([]Param, len(n))
	for i := range n {
		out[i].Name = n[i]
		out[i].Positional = !named || strings.HasPrefix(n[i], "col")
		if i < len(t) {
			out[i].Type = t[i]
		}
	}
	return out
}

func overloadKey(ps []Param) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Name + ":" + p.Type + ",")
	}
	return b.String()
}
