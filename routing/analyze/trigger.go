package analyze

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqltext"
)

// newestTrigger reads the table and events of the newest trigger (the
// highest oid: the one a CREATE TRIGGER just made), the table named by the
// quoted path of its schema.
const newestTrigger = `WITH RECURSIVE paths(oid, qpath) AS (
		SELECT oid, '"' || replace(schema_name, '"', '""') || '"' FROM duckdb_schemas()
			WHERE parent_schema_oid IS NULL AND database_name = current_database()
		UNION ALL SELECT s.oid, p.qpath || '.' || '"' || replace(s.schema_name, '"', '""') || '"'
			FROM duckdb_schemas() s JOIN paths p ON s.parent_schema_oid = p.oid)
	SELECT tr.trigger_oid::VARCHAR, p.qpath || '.' || '"' || replace(tr.table_name, '"', '""') || '"', tr.event_manipulation
	FROM duckdb_triggers() tr JOIN paths p ON p.oid = tr.schema_oid
	WHERE NOT tr.temporary ORDER BY tr.trigger_oid DESC LIMIT 1`

// checkTrigger refuses a CREATE TRIGGER (DuckDB 2.0) whose action would
// compute differently on each node. Every node runs a trigger's action
// itself whenever its table changes, through any write: a literal INSERT
// (which the binder is not asked about) or an append too, so the action
// must be deterministic as it stands, where a client's INSERT … SELECT can
// be evaluated once on the leader instead. DuckDB binds the action into
// the plan of each statement that fires it, so the trigger is created in a
// transaction that is rolled back, statements that fire it (an INSERT of
// the table's defaults, an UPDATE setting a column to itself, a DELETE)
// are bound there, and what their plans hold beyond the same statements'
// plans without the trigger is judged by Check, as a write's would be. An
// action that calls a macro is judged by the macro as it is now; the
// action's text is checked for sampling and rowid, which a plan alone does
// not tell.
func (a *Analyzer) checkTrigger(ctx context.Context, st sqltext.Statement, volatile sqltext.Volatile) error {
	if st.Samples() || namesRowID(st) {
		return refuse("a trigger's action runs on every node whenever its table changes, and sampling or rowid " +
			"would pick other rows on each; choose the rows by a key")
	}
	fires, with, err := a.withTrigger(ctx, st.Text)
	if err != nil || len(fires) == 0 {
		return err
	}
	for i, fire := range fires {
		base, err := a.Analyze(ctx, fire)
		if err != nil {
			base = Analysis{}
		}
		if _, err := added(with[i], base, names(st, "row_number")).Check(volatile); err != nil {
			return fmt.Errorf("%w: a trigger's action runs on every node whenever its table changes, so it must compute "+
				"the same everywhere; bound into %s it would not: %w", sqltext.ErrNondeterministic, fire.Text, err)
		}
	}
	return nil
}

// withTrigger creates the trigger sql in a transaction it rolls back and
// returns statements that fire it with their analyses there. It returns
// none when sql creates no trigger: one that fails fails the same way on
// every node, and IF NOT EXISTS may find one.
func (a *Analyzer) withTrigger(ctx context.Context, sql string) ([]sqltext.Statement, []Analysis, error) {
	c, err := a.pool.Get()
	if err != nil {
		return nil, nil, fmt.Errorf("analyze: %w", err)
	}
	// Put keeps the connection only if the rollback below ended the
	// transaction.
	defer a.pool.Put(c)
	if err := c.Begin(ctx); err != nil {
		return nil, nil, fmt.Errorf("analyze: %w", err)
	}
	defer c.Rollback(context.Background())
	before, err := c.QueryStrings(ctx, newestTrigger)
	if err != nil {
		return nil, nil, fmt.Errorf("analyze: %w", err)
	}
	if _, err := c.Exec(ctx, sql); err != nil {
		return nil, nil, nil
	}
	row, err := c.QueryRow(ctx, newestTrigger)
	if err != nil || len(row) != 3 {
		return nil, nil, fmt.Errorf("analyze: the trigger just created: %v", err)
	}
	if oid, _ := row[0].(string); len(before) == 1 && before[0] == oid {
		return nil, nil, nil
	}
	table, _ := row[1].(string)
	events, _ := row[2].(string)
	fires := firing(ctx, c, table, events)
	analyses := make([]Analysis, len(fires))
	for i, fire := range fires {
		if analyses[i], err = a.analyzeOn(ctx, c, fire); err != nil {
			return nil, nil, fmt.Errorf("%w: the trigger's action could not be checked: %s: %w", sqltext.ErrNondeterministic, fire.Text, err)
		}
	}
	return fires, analyses, nil
}

// firing returns statements that fire a trigger on table for events (as
// duckdb_triggers() names them: INSERT, UPDATE, DELETE).
func firing(ctx context.Context, c *engine.Conn, table, events string) []sqltext.Statement {
	var out []sqltext.Statement
	if strings.Contains(events, "INSERT") {
		out = append(out, sqltext.Parse("INSERT INTO "+table+" DEFAULT VALUES"))
	}
	if strings.Contains(events, "UPDATE") {
		cols, err := c.QueryStrings(ctx, "SELECT '\"' || replace(column_name, '\"', '\"\"') || '\"' FROM (DESCRIBE "+table+") LIMIT 1")
		if err == nil && len(cols) == 1 {
			out = append(out, sqltext.Parse("UPDATE "+table+" SET "+cols[0]+" = "+cols[0]))
		}
	}
	if strings.Contains(events, "DELETE") {
		out = append(out, sqltext.Parse("DELETE FROM "+table))
	}
	return out
}

// added is what analysis with finds beyond base: the trigger's part of a
// statement's plan. DuckDB numbers the rows a FOR EACH ROW trigger fires
// for with row_number() over a window without ORDER BY, to pair each with
// its action; that numbering is the trigger's own unless its text calls
// row_number (userRowNumber).
func added(with, base Analysis, userRowNumber bool) Analysis {
	// Judged as an UPDATE is: what a write's plan shows that computes
	// differently on each node refuses it, where an INSERT's would be
	// materialized on the leader, which a trigger's action cannot be (and
	// with a trigger, the plan's top is the CTE that feeds it).
	out := Analysis{Operator: "LOGICAL_UPDATE"}
	for _, c := range with.Calls {
		if !slices.Contains(base.Calls, c) {
			out.Calls = append(out.Calls, c)
		}
	}
	for _, f := range with.TableFunctions {
		if !slices.Contains(base.TableFunctions, f) {
			out.TableFunctions = append(out.TableFunctions, f)
		}
	}
	if base.ScanOrder == "" && (userRowNumber || !strings.HasPrefix(with.ScanOrder, "row_number()")) {
		out.ScanOrder = with.ScanOrder
	}
	return out
}

// names reports whether st names name as an identifier, quoted or not, in
// any case.
func names(st sqltext.Statement, name string) bool {
	for _, t := range st.Significant() {
		switch t.Kind {
		case sqltext.TokIdent:
			if strings.EqualFold(t.Text, name) {
				return true
			}
		case sqltext.TokQuotedIdent:
			if strings.EqualFold(t.Name(), name) {
				return true
			}
		}
	}
	return false
}
