package hunter

import (
	"context"
	"fmt"
	"strconv"
)

// maxRows bounds every table the hunt writes. The hunt's own statements
// keep tables at a few hundred rows, but a generated call can multiply
// them: on DuckDB 2.0 one CALL dbgen(sf := 1) wrote TPC-H's 8.6 million
// rows on every node, after which each snapshot (every 64 entries under
// clusterArgs) took minutes and the hunt crawled (docs/reliability.md).
// Hunting needs many statements, not big tables.
const maxRows = 10_000

// grownQuery lists the tables DuckDB estimates past maxRows, by their
// quoted path (DuckDB 2.0 nests schemas), with the estimate: the estimate
// reads no rows, so asking after every accepted statement costs little.
var grownQuery = `WITH RECURSIVE paths(oid, qpath) AS (
		SELECT oid, ('"' || replace(schema_name, '"', '""') || '"') FROM duckdb_schemas()
			WHERE parent_schema_oid IS NULL AND database_name = current_database()
		UNION ALL SELECT s.oid, p.qpath || '.' || ('"' || replace(s.schema_name, '"', '""') || '"')
			FROM duckdb_schemas() s JOIN paths p ON s.parent_schema_oid = p.oid)
	SELECT p.qpath || '.' || ('"' || replace(t.table_name, '"', '""') || '"'), t.estimated_size::VARCHAR
	FROM duckdb_tables() t JOIN paths p ON p.oid = t.schema_oid
	WHERE NOT t.temporary AND t.schema_name NOT LIKE '\_duckraft%' ESCAPE '\' AND t.estimated_size > ` + strconv.Itoa(maxRows) + `
	ORDER BY t.table_oid`

// Trim is a table the guard cut back after a statement grew it past
// maxRows.
type Trim struct {
	Table     string
	Rows      int64
	Statement Sent
	// Dropped: deleting the rows the hunt added was not enough, or the
	// table has no id column, so the table was dropped.
	Dropped bool
}

func (t Trim) String() string {
	what := "deleted the rows with id >= 1000"
	if t.Dropped {
		what = "dropped it"
	}
	return fmt.Sprintf("%s (%d rows): %s, after %s", t.Table, t.Rows, what, t.Statement)
}

// bound keeps every table at most maxRows after st was accepted and the
// nodes agreed: a table past it loses the rows the hunt added (ids from
// 1000 up; the base tables' own are below 200) and, if that is not
// enough, is dropped, unless it is a base table. The trims are ordinary
// replicated writes, checked like the hunt's own.
func (h *hunt) bound(st Sent) *Finding {
	l := h.c.Leader()
	if l == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), stmtTimeout)
	defer cancel()
	conn := h.conn(l)
	grown, err := queryStrings(ctx, conn, grownQuery)
	if err != nil {
		h.t.Logf("hunter: guard: %v", err)
		return nil
	}
	trimmed := false
	for _, g := range grown {
		table := g[0]
		rows, err := h.count(ctx, table)
		if err != nil || rows <= maxRows {
			// DuckDB's estimate counts deleted rows until they are
			// vacuumed; a table that is gone or small is fine.
			continue
		}
		trim := Trim{Table: table, Rows: rows, Statement: st}
		h.guardExec(ctx, fmt.Sprintf("DELETE FROM %s WHERE id IS NULL OR id >= 1000", table))
		if left, err := h.count(ctx, table); (err != nil || left > maxRows) && !isBase(table) {
			h.guardExec(ctx, "DROP TABLE "+table+" CASCADE")
			trim.Dropped = true
		}
		h.rep.Trims = append(h.rep.Trims, trim)
		h.t.Logf("hunter: guard: %s", trim)
		trimmed = true
	}
	if !trimmed {
		return nil
	}
	return h.converge()
}

// count is table's exact row count, read on the leader.
func (h *hunt) count(ctx context.Context, table string) (int64, error) {
	l := h.c.Leader()
	if l == nil {
		return 0, fmt.Errorf("no leader")
	}
	rows, err := queryStrings(ctx, h.conn(l), "SELECT count(*)::VARCHAR FROM "+table)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(rows[0][0], 10, 64)
}

// guardExec sends a trim to the leader and keeps it in the history, so
// that a finding after it names it; a refusal (a table without an id
// column) is only kept.
func (h *hunt) guardExec(ctx context.Context, sql string) {
	sent := Sent{Statement: Statement{SQL: sql, Placement: "guard"}}
	l := h.c.Leader()
	if l == nil {
		sent.Err = "no leader"
	} else {
		sent.Node = l.ID
		if _, err := h.conn(l).Exec(ctx, sql); err != nil {
			sent.Err = err.Error()
		}
	}
	h.last = append(h.last, sent)
	if len(h.last) > history {
		h.last = h.last[1:]
	}
}

// isBase reports whether table, as grownQuery names it, is one of the
// tables Setup creates, which the generator writes to the end.
func isBase(table string) bool {
	for _, b := range baseTables {
		if table == `"main"."`+b+`"` {
			return true
		}
	}
	return false
}
