package analyze

import (
	"fmt"
)

// orderAggregates are the aggregates whose result depends on the order
// rows reach them in, unless the call orders them (string_agg(s ORDER BY
// id)).
var orderAggregates = map[string]bool{
	"any_value": true, "arbitrary": true, "first": true, "last": true,
	"string_agg": true, "group_concat": true, "listagg": true,
	"list": true, "array_agg": true, "json_group_array": true, "json_group_object": true,
}

// orderWindows are the window functions whose result depends on the order
// of the rows in their partition, unless the window orders them.
var orderWindows = map[string]string{
	"WINDOW_ROW_NUMBER": "row_number", "WINDOW_FIRST_VALUE": "first_value", "WINDOW_LAST_VALUE": "last_value",
	"WINDOW_NTH_VALUE": "nth_value", "WINDOW_LAG": "lag", "WINDOW_LEAD": "lead", "WINDOW_NTILE": "ntile",
	"WINDOW_FILL": "fill",
}

// scanOrder returns what in the plan v takes table rows in the order a
// scan yields them, or "". That order is the order rows are stored in,
// which a snapshot restore rewrites (and a checkpoint may), so it is not
// the same on every replica: a LIMIT or OFFSET over table rows with no
// ORDER BY under it, an order-sensitive aggregate without ORDER BY in the
// call, an order-sensitive window function over a window without ORDER BY.
func scanOrder(v any) string {
	switch v := v.(type) {
	case map[string]any:
		switch str(v["type"]) {
		case "LOGICAL_LIMIT":
			if !orderedInput(v) && scansTable(v) {
				return "LIMIT or OFFSET without ORDER BY"
			}
		case "LOGICAL_PROJECTION":
			// The binder computes list(x ORDER BY x) as list_sort(list(x))
			// in the projection over the aggregate.
			children, _ := v["children"].([]any)
			if len(children) == 1 {
				if agg, ok := children[0].(map[string]any); ok && str(agg["type"]) == "LOGICAL_AGGREGATE_AND_GROUP_BY" {
					if what := aggregateOrder(agg, sortedRefs(v["expressions"])); what != "" {
						return what
					}
					return firstOf(scanOrder(v["expressions"]), scanOrder(agg["children"]))
				}
			}
		case "LOGICAL_AGGREGATE_AND_GROUP_BY":
			if what := aggregateOrder(v, nil); what != "" {
				return what
			}
		}
		if str(v["expression_class"]) == "BOUND_WINDOW" {
			if name, ok := orderWindows[str(v["type"])]; ok && empty(v["orders"]) {
				return name + "() over a window without ORDER BY"
			}
			if name := planName(v); orderAggregates[name] && empty(v["orders"]) && empty(v["arg_orders"]) {
				return name + "() over a window without ORDER BY"
			}
		}
		for k, c := range v {
			if k == "table_info" || k == "info" {
				continue
			}
			if what := scanOrder(c); what != "" {
				return what
			}
		}
	case []any:
		for _, c := range v {
			if what := scanOrder(c); what != "" {
				return what
			}
		}
	}
	return ""
}

// aggregateOrder returns the order-sensitive aggregate without ORDER BY
// that the aggregate operator agg computes over table rows, or "". Not
// counted: the binder's scalar subquery, first(x) with count_star(), which
// raises an error when the count is above one
// (scalar_subquery_error_on_multiple_rows, pinned), so that first takes
// the only row there is; and a list whose output column is in sorted
// (sortedRefs), which is sorted before use.
func aggregateOrder(agg map[string]any, sorted map[string]bool) string {
	exprs, _ := agg["expressions"].([]any)
	if len(exprs) == 2 && empty(agg["groups"]) && aggName(exprs[0]) == "first" && aggName(exprs[1]) == "count_star" {
		return ""
	}
	if !scansTable(agg) {
		return ""
	}
	groups, _ := agg["groups"].([]any)
	for i, e := range exprs {
		m, _ := e.(map[string]any)
		name := aggName(e)
		if (name == "list" || name == "array_agg") && sorted[fmt.Sprint(len(groups)+i)] {
			continue
		}
		if orderAggregates[name] && !ordersBy(m["order_bys"]) {
			return name + "() without ORDER BY in the call"
		}
	}
	return ""
}

// sortFunctions sort a list, so the list's order does not matter after.
var sortFunctions = map[string]bool{"list_sort": true, "array_sort": true, "list_reverse_sort": true, "array_reverse_sort": true}

// sortedRefs returns the input columns (BOUND_REF indexes) that a
// projection's expressions pass straight to a sort function.
func sortedRefs(exprs any) map[string]bool {
	out := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if str(v["expression_class"]) == "BOUND_FUNCTION" && sortFunctions[planName(v)] {
				if children, _ := v["children"].([]any); len(children) > 0 {
					if ref, _ := children[0].(map[string]any); str(ref["expression_class"]) == "BOUND_REF" {
						out[fmt.Sprint(ref["index"])] = true
					}
				}
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(exprs)
	return out
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func aggName(e any) string {
	m, _ := e.(map[string]any)
	if str(m["expression_class"]) != "BOUND_AGGREGATE" {
		return ""
	}
	return planName(m)
}

// ordersBy reports whether an aggregate's order_bys orders anything.
func ordersBy(v any) bool {
	m, _ := v.(map[string]any)
	return !empty(m["orders"])
}

// orderedInput reports whether the rows reaching op come from an ORDER BY
// with nothing but projections and filters between.
func orderedInput(op map[string]any) bool {
	for {
		children, _ := op["children"].([]any)
		if len(children) != 1 {
			return false
		}
		op, _ = children[0].(map[string]any)
		switch str(op["type"]) {
		case "LOGICAL_ORDER_BY", "LOGICAL_TOP_N":
			return true
		case "LOGICAL_PROJECTION", "LOGICAL_FILTER":
		default:
			return false
		}
	}
}

// scansTable reports whether the plan under op scans a stored table.
func scansTable(op any) bool {
	return anyObject(op, func(m map[string]any) bool {
		return str(m["type"]) == "LOGICAL_GET" && planName(m) == "seq_scan"
	})
}

func empty(v any) bool {
	l, _ := v.([]any)
	return len(l) == 0
}
