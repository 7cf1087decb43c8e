package testcluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

// divergentWritesRefused (TestSharedCluster) sends one write of each class
// that DuckDB resolves but a lexer misses (quoted function names, sampling,
// table functions over node-local state, rowid, a view hiding a sample) to
// a 3-node cluster: each is refused with a reason, the INSERT forms are
// evaluated once on the leader, and the state hashes stay equal.
func divergentWritesRefused(t *testing.T, c *testcluster.Cluster) {
	conn := c.Nodes[1].Client(t)
	for _, sql := range []string{
		"CREATE TABLE t (a INT, b DOUBLE)",
		"INSERT INTO t SELECT i, i FROM range(100) r(i)",
		"CREATE MACRO total() AS (SELECT sum(b) FROM t)",
		// Evaluated once on the leader, replicated as rows.
		"INSERT INTO t SELECT a, b FROM t USING SAMPLE 7 ROWS",
		`INSERT INTO t VALUES (1000, "random"())`,
		"INSERT INTO t VALUES (1001, total())",
	} {
		exec(t, conn, sql)
	}
	for _, tt := range []struct{ class, sql, why string }{
		{"quoted", `UPDATE t SET b = "random"()`, "random() in UPDATE"},
		{"quoted", `UPDATE t SET b = main."random"() WHERE a < 10`, "random() in UPDATE"},
		{"quoted", `CREATE TABLE c AS SELECT "random"() AS r`, "CREATE TABLE … AS"},
		{"quoted", `CREATE TABLE d (x DOUBLE DEFAULT "random"())`, "column default"},
		{"quoted", `CREATE TABLE e (x TIMESTAMPTZ DEFAULT "now"())`, "column default"},
		{"unicode space", "UPDATE\u00a0t\u00a0SET\u00a0b\u00a0=\u00a0random()", "random() in UPDATE"},
		{"sample", "DELETE FROM t WHERE a IN (SELECT a FROM t USING SAMPLE 5 ROWS)", "sampling"},
		{"sample", "UPDATE t SET b = 0 WHERE a IN (SELECT a FROM t TABLESAMPLE reservoir(5 ROWS))", "sampling"},
		{"sample in a view", "CREATE VIEW vs AS SELECT a FROM t USING SAMPLE 5 ROWS", "sampling in a stored view"},
		{"query in a macro", "CREATE TABLE tg AS VALUES (total())", "a query hidden in a macro"},
		{"sample", "CREATE TABLE f AS SELECT * FROM t USING SAMPLE 10%", "sampling"},
		{"node-local", "UPDATE t SET b = (SELECT count(*) FROM pragma_database_size())", "pragma_database_size()"},
		{"node-local", `UPDATE t SET b = (SELECT count(*) FROM "duckdb_memory"())`, "duckdb_memory()"},
		{"rowid", "UPDATE t SET b = rowid", "rowid in UPDATE"},
		{"rowid", "DELETE FROM t WHERE rowid < 3", "rowid in DELETE"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := conn.Exec(ctx, tt.sql)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "not deterministic") || !strings.Contains(err.Error(), tt.why) {
			t.Errorf("%s: %s: error %v, want a refusal naming %q", tt.class, tt.sql, err, tt.why)
		}
	}
	// In a transaction, a statement on a table created earlier in it
	// cannot be bound on the leader; its text still shows the sample.
	exec(t, conn, "BEGIN")
	exec(t, conn, "CREATE TABLE x AS SELECT a FROM t")
	exec(t, conn, "DELETE FROM x WHERE a IN (SELECT a FROM x USING SAMPLE 5 ROWS)")
	if _, err := conn.Exec(context.Background(), "COMMIT"); err == nil || !strings.Contains(err.Error(), "sampling") {
		t.Errorf("COMMIT of a transaction deleting a sample: error %v, want a refusal naming sampling", err)
	}
	c.WaitConverged(t, 30*time.Second)
	if got := queryInts(t, conn, "SELECT count(*) FROM t"); got[0] != 109 {
		t.Errorf("t holds %d rows, want 109", got[0])
	}
	if got := queryInts(t, conn, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'x'"); got[0] != 0 {
		t.Errorf("the refused transaction created table x")
	}
}
