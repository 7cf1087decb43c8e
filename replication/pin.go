package replication

import (
	"context"
	"fmt"
	"strings"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqlquote"
)

// pinnedTimeZone is the applier's time zone: casts of the leader's
// timestamps (now()::DATE) must not depend on each node's.
const pinnedTimeZone = "UTC"

// pinnedSettings are the settings, each one DuckDB lets a connection set
// for itself, that change what a statement computes, how it fails or in
// which order it produces rows (which decides rowids and sequence values
// of an INSERT … SELECT): the settings of the language, of name
// resolution, and of the planner's choices between operators.
//
// Many of them are global in DuckDB even when set without GLOBAL (a plain
// SET default_collation or SET default_order changes every connection), and
// a connection's own value wins over the global one. Pinned on every
// connection of the replication layer (the applier's, a snapshot's, the
// state hash's), they cannot be changed there afterwards by whatever path.
// Settings DuckDB keeps only globally (threads, memory_limit) cannot be
// pinned; routing refuses them for clients (routing/classify/settings.go).
// The list is explicit because not every setting reads back as a value it
// accepts: enable_http_logging reads true and, set to that, turns DuckDB's
// logging on.
var pinnedSettings = []string{
	// The language.
	"Calendar", "default_collation", "default_null_order", "default_order",
	"disable_timestamptz_casts", "errors_as_json", "ieee_floating_point_ops", "integer_division",
	"lambda_syntax", "max_expression_depth", "old_implicit_casting", "order_by_non_integer_literal",
	"pivot_filter_threshold", "pivot_limit", "preserve_identifier_case", "preserve_insertion_order",
	"scalar_subquery_error_on_multiple_rows", "catalog_error_max_schemas", "binary_as_string",
	// New in DuckDB 2.0: the dialect, and rules that decide whether a
	// statement fails. (current_dialect and active_grammar_extensions name
	// what extensions install, and read back as values DuckDB refuses.)
	"dialect_compatibility_mode",
	"error_on_division_by_zero", "regex_match_operator_semantics", "table_function_identifier_conversion",
	"legacy_disable_null_type", "json_geometry_format", "default_transaction_invalidation_policy",
	"max_execution_time",
	// Name and file resolution, and what a view or macro depends on
	// (schema is search_path's alias: setting it sets search_path).
	"search_path", "file_search_path", "home_directory",
	"enable_macro_dependencies", "enable_view_dependencies",
	// The planner's choices, which decide the order rows come out in.
	"asof_loop_join_threshold", "merge_join_threshold", "nested_loop_join_threshold", "prefer_range_joins",
	"perfect_ht_threshold", "dynamic_or_filter_threshold", "index_scan_max_count", "index_scan_percentage",
	"late_materialization_max_rows", "ordered_aggregate_threshold", "enable_caching_operators",
	"immediate_transaction_mode", "write_buffer_row_group_count", "partitioned_write_flush_threshold",
	"partitioned_write_max_open_files", "debug_force_external", "debug_force_no_cross_product",
	"debug_window_mode", "debug_asof_iejoin", "debug_physical_table_scan_execution_strategy",
	"delim_join_as_cte", "approximate_join_order_threshold", "enable_optimizer",
}

// pinnedValues are pinned at these values rather than DuckDB's default.
// With view dependencies a table or view that a view reads cannot be
// dropped or replaced without CASCADE (as in PostgreSQL): otherwise a view
// could outlive what it reads, and a snapshot could not recreate it on
// another node (CREATE VIEW binds its query), so a follower never caught up
// (found by the divergence hunter).
var pinnedValues = map[string]string{"enable_view_dependencies": "true"}

// settingPins are the SET SESSION statements that pin pinnedSettings and
// the time zone.
type settingPins []string

// readPins reads the pins on conn, a fresh connection of a database no
// client has used yet: each pinned setting at its value then (DuckDB's
// default, the same on every node running the same binary), and the time
// zone at UTC, except for pinnedValues. It sets them on conn too.
func readPins(conn *engine.Conn) (settingPins, error) {
	ctx := context.Background()
	pins := make(settingPins, 0, len(pinnedSettings)+1)
	for _, name := range pinnedSettings {
		row, err := conn.QueryRow(ctx, "SELECT current_setting("+sqlquote.Literal(name)+")::VARCHAR")
		if err != nil {
			return nil, fmt.Errorf("read setting %s to pin it: %w", name, err)
		}
		value, _ := row[0].(string)
		if v, ok := pinnedValues[name]; ok {
			value = v
		}
		pins = append(pins, "SET SESSION "+sqlquote.Ident(name)+" = "+sqlquote.Literal(value))
	}
	pins = append(pins, "SET SESSION TimeZone = "+sqlquote.Literal(pinnedTimeZone))
	return pins, pins.apply(conn)
}

// apply sets the pins on conn, in one call (one by one, they take DuckDB
// tens of milliseconds).
func (p settingPins) apply(conn *engine.Conn) error {
	if _, err := conn.Exec(context.Background(), strings.Join(p, ";\n")); err != nil {
		return fmt.Errorf("pin settings: %w", err)
	}
	return nil
}
