package classify

import (
	"strings"

	"github.com/duckraft/duckraft/node/sqltext"
)

// sessionSettings are the settings a client may change with SET or RESET,
// each for the reason given. The rule: writes are replicated as SQL and
// applied on every node by the applier's own connection, which pins the
// settings that shape results (replication/pin.go), so a client's setting
// can only matter to replication if DuckDB applies it to the whole node.
// A setting is listed when DuckDB keeps it per connection even when set
// without a scope (measured with DuckDB 1.5: a plain SET default_collation,
// default_order, threads or memory_limit changes every connection) and it
// changes only how this session's own reads are resolved or presented.
// Settings that are per connection but change what a statement computes
// (integer_division, default_null_order, …) are not listed: they would
// apply to the session's reads and not to its writes.
//
// docs/consistency.md lists them for users.
var sessionSettings = map[string]string{
	// DuckDB's ICU extension keeps both per connection; the applier
	// evaluates every replicated statement in UTC whatever the client's.
	"timezone": "the zone this session's timestamps are shown and parsed in",
	"calendar": "the calendar this session's dates are shown in",
	// Per connection; the applier resolves names in main (its own pin).
	"search_path": "where this session's reads look up unqualified names",
	"schema":      "where this session's reads look up unqualified names",
	// Presentation only.
	"enable_progress_bar":       "progress reporting of this session",
	"enable_progress_bar_print": "progress reporting of this session",
	"progress_bar_time":         "progress reporting of this session",
	"explain_output":            "what this session's EXPLAIN shows",
	// The router's own (routing/consistency.go, routing/split.go).
	"duckraft_consistency":       "this session's read consistency, kept by the router",
	"duckraft_split_scan":        "how this session's large scans are split, kept by the router",
	"duckraft_write_key":         "the idempotency key of this session's next write, kept by the router",
	"duckraft_statement_timeout": "how long this session's reads may run, kept by the router",
}

// nodeSettings are the settings that reconfigure DuckDB's logging, which
// is the database's, not the session's: DuckDB 1.5.6 halts a node's
// replication and aborts the process when a client turns file logging on.
// They are refused as node statements (ErrNodeStatement in routing) even
// with a SESSION scope.
var nodeSettings = map[string]bool{
	"enable_logging": true, "logging_storage": true, "logging_level": true, "logging_mode": true,
	"enabled_log_types": true, "disabled_log_types": true,
}

// readPragmas are the PRAGMAs that only report; every other PRAGMA changes a
// setting of the session or the node, and is refused.
var readPragmas = map[string]bool{
	"table_info": true, "storage_info": true, "show_tables": true, "show_tables_expanded": true,
	"show_databases": true, "database_list": true, "database_size": true, "version": true,
	"platform": true, "functions": true, "collations": true, "show": true, "metadata_info": true,
	"user_agent": true, "table_storage_info": true, "extension_versions": true,
}

// settingClass classifies the SET or RESET statement sig: Session for a
// setting of sessionSettings in the session scope, Node for the GLOBAL
// scope or a logging setting, Refused for anything else (other settings,
// SET VARIABLE, RESET ALL).
func settingClass(sig []sqltext.Token) Class {
	set, _ := sqltext.ReadSetting(sig)
	switch {
	case set.Scope == "global":
		return Node
	case set.Name.Kind == 0:
		return Refused
	}
	name := strings.ToLower(set.Name.Name())
	switch {
	case nodeSettings[name]:
		return Node
	case set.Name.Kind != sqltext.TokIdent && set.Name.Kind != sqltext.TokQuotedIdent:
		return Refused
	case set.Qualified:
		// A qualified name (an extension's namespace) is never listed.
		return Refused
	}
	if _, ok := sessionSettings[name]; ok {
		return Session
	}
	return Refused
}

// pragmaClass classifies the PRAGMA at sig[v]: a listed reporting PRAGMA
// is a read, every other one is refused (PRAGMA x = y is SET x = y in
// DuckDB, in the scope DuckDB picks).
func pragmaClass(sig []sqltext.Token, v int) Class {
	if len(sig) > v+1 && readPragmas[strings.ToLower(sig[v+1].Text)] && !hasOp(sig, "=") {
		return Read
	}
	return Refused
}
