package replication

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqlquote"
)

// pinnedTimeZone is the applier's time zone: casts of the leader's
// timestamps (now()::DATE) must not depend on each node's.
const pinnedTimeZone = "UTC"

// pinSettings fixes, on the applier's connection, every setting DuckDB
// lets one connection set for itself, at the value it has when the
// applier opens (DuckDB's default, the same on every node running the same
// binary), and the time zone at UTC. Many settings are global in DuckDB
// even when set without GLOBAL (SET default_collation, SET default_order
// change every connection), and a connection's own value wins over the
// global one, so a setting changed on one node afterwards, by whatever
// path, cannot change what replicated statements compute there. Settings
// DuckDB keeps only globally (threads, memory_limit) cannot be pinned;
// routing refuses them for clients (routing/classify/settings.go).
func pinSettings(conn *engine.Conn, log *slog.Logger) error {
	ctx := context.Background()
	names, err := conn.QueryStrings(ctx, "SELECT name FROM duckdb_settings() ORDER BY name")
	if err != nil {
		return fmt.Errorf("list settings: %w", err)
	}
	var global []string
	for _, name := range names {
		if strings.EqualFold(name, "TimeZone") {
			continue
		}
		row, err := conn.QueryRow(ctx, "SELECT current_setting("+sqlquote.Literal(name)+")::VARCHAR")
		if err != nil || row[0] == nil {
			// A setting with no readable value has nothing to pin.
			continue
		}
		value, _ := row[0].(string)
		// A setting DuckDB keeps only globally refuses the session scope;
		// there is nothing to pin then.
		if _, err := conn.Exec(ctx, "SET SESSION "+sqlquote.Ident(name)+" = "+sqlquote.Literal(value)); err != nil {
			global = append(global, name)
		}
	}
	log.Debug("applier settings pinned", "pinned", len(names)-len(global), "global_only", len(global))
	if _, err := conn.Exec(ctx, "SET SESSION TimeZone = "+sqlquote.Literal(pinnedTimeZone)); err != nil {
		return fmt.Errorf("pin apply time zone: %w", err)
	}
	return nil
}
