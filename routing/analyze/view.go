package analyze

import (
	"context"
	"fmt"
	"strings"

	"github.com/duckraft/duckraft/node/sqltext"
)

// newest reads, for the kind of object a CREATE makes, the oid and text of
// the newest persistent one: an object created or replaced gets a new
// catalog oid, the highest.
var newest = map[string]string{
	"VIEW": `SELECT view_oid::VARCHAR || ' ' || sql FROM duckdb_views()
		WHERE NOT internal AND NOT temporary ORDER BY view_oid DESC LIMIT 1`,
	"TABLE": `SELECT table_oid::VARCHAR || ' ' || sql FROM duckdb_tables()
		WHERE NOT temporary ORDER BY table_oid DESC LIMIT 1`,
	"TRIGGER": `SELECT trigger_oid::VARCHAR || ' ' || sql FROM duckdb_triggers()
		WHERE NOT temporary ORDER BY trigger_oid DESC LIMIT 1`,
}

// canonicalCreate returns the text of the CREATE VIEW, TABLE or TRIGGER
// (kind) statement st as DuckDB stores it, found by running it on the
// leader in a transaction it rolls back.
// DuckDB stores a view as the text it renders from the statement, and the
// rendering is not idempotent: a table function's argument renders as
// CAST(1 AS DOUBLE) from the statement and as CAST(1 AS "DOUBLE") from that
// rendering. Nodes that apply the statement store the first, a node
// restored from a snapshot (which recreates views from their stored text)
// the second, and their state hashes differ (found by the divergence
// hunter). A table's DEFAULT and generated expressions, and a trigger's
// action (DuckDB 2.0), render the same way. Replicating the stored text makes every node store the rendering of
// a rendering, which is stable. A statement that creates nothing (IF NOT
// EXISTS over an existing object) is replicated as written.
func (a *Analyzer) canonicalCreate(ctx context.Context, kind string, st sqltext.Statement) (string, error) {
	sql := st.Text
	c, err := a.pool.Get()
	if err != nil {
		return "", fmt.Errorf("analyze: %w", err)
	}
	// Put keeps the connection only if the rollback below ended the
	// transaction.
	defer a.pool.Put(c)
	if err := c.Begin(ctx); err != nil {
		return "", fmt.Errorf("analyze: %w", err)
	}
	defer c.Rollback(context.Background())
	before, err := c.QueryStrings(ctx, newest[kind])
	if err != nil {
		return "", fmt.Errorf("analyze: %w", err)
	}
	if _, err := c.Exec(ctx, sql); err != nil {
		// The applier will fail it the same way on every node.
		return sql, nil
	}
	after, err := c.QueryStrings(ctx, newest[kind])
	if err != nil || len(after) != 1 {
		return sql, err
	}
	oid, stored, _ := strings.Cut(after[0], " ")
	if len(before) == 1 && strings.HasPrefix(before[0], oid+" ") {
		return sql, nil
	}
	if replace := orReplace(st); replace {
		rest, ok := strings.CutPrefix(stored, "CREATE "+kind+" ")
		if !ok {
			return sql, nil
		}
		stored = "CREATE OR REPLACE " + kind + " " + rest
	}
	return stored, nil
}

// orReplace reports whether a CREATE statement says OR REPLACE.
func orReplace(st sqltext.Statement) bool {
	sig := st.Significant()
	return len(sig) > 2 && strings.EqualFold(sig[1].Text, "OR") && strings.EqualFold(sig[2].Text, "REPLACE")
}
