package testcluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

// clockMacrosRefused (TestSharedCluster) sends, to a 3-node cluster of
// duckraftd processes, writes that read the clock through DuckDB's own
// macros (ago, pg_conf_load_time, pg_postmaster_start_time), through age()
// with one argument and through a user macro over ago(), in every place:
// UPDATE, DELETE, CREATE TABLE … AS, a column DEFAULT, a generated column,
// ALTER TABLE, a view, a macro, and a transaction whose table the leader
// cannot bind yet. On main at 42d1571 every one was accepted and left the
// nodes with different state hashes at one index (issue 31, item 6); now
// each is refused with the reason, the INSERT forms are evaluated once on
// the leader, and the hashes stay equal.
func clockMacrosRefused(t *testing.T, c *testcluster.Cluster) {
	conn := c.Nodes[1].Client(t)
	for _, sql := range []string{
		"CREATE TABLE g (a INT, ts TIMESTAMPTZ, x INTERVAL)",
		"INSERT INTO g SELECT i, TIMESTAMPTZ '2026-01-01 00:00:00+00' + i * INTERVAL 1 DAY, NULL FROM range(20) r(i)",
		// Evaluated once on the leader, replicated as rows.
		"INSERT INTO g VALUES (100, ago(INTERVAL 1 HOUR), age(TIMESTAMP '2020-01-01'))",
		"INSERT INTO g SELECT a + 200, pg_conf_load_time(), age(ts) FROM g WHERE a < 5",
	} {
		exec(t, conn, sql)
	}
	for _, tt := range []struct{ place, sql, why string }{
		{"update", "UPDATE g SET ts = ago(INTERVAL 1 HOUR)", "ago()"},
		{"update", `UPDATE g SET ts = "AGO"(INTERVAL 1 HOUR) WHERE a < 3`, "ago()"},
		{"update", "UPDATE g SET x = age(ts)", "age() with one argument"},
		{"delete", "DELETE FROM g WHERE ts < ago(INTERVAL 30 DAY)", "ago()"},
		{"create table as", "CREATE TABLE c AS SELECT ago(INTERVAL 1 HOUR) AS ts", "ago()"},
		{"default", "CREATE TABLE d1 (a INT, ts TIMESTAMPTZ DEFAULT ago(INTERVAL 1 HOUR))", "ago()"},
		{"default", "CREATE TABLE d2 (a INT, ts TIMESTAMPTZ DEFAULT pg_conf_load_time())", "pg_conf_load_time()"},
		{"default", "CREATE TABLE d3 (a INT, ts TIMESTAMPTZ DEFAULT pg_postmaster_start_time())", "pg_postmaster_start_time()"},
		{"generated", "CREATE TABLE d4 (a INT, ts TIMESTAMP, x INTERVAL GENERATED ALWAYS AS (age(ts)))", "age() with one argument"},
		{"alter", "ALTER TABLE g ALTER COLUMN ts SET DEFAULT ago(INTERVAL 1 HOUR)", "ago()"},
		{"alter", "ALTER TABLE g ADD COLUMN t2 TIMESTAMPTZ DEFAULT ago(INTERVAL 1 HOUR)", "ago()"},
		{"view", "CREATE VIEW v AS SELECT ago(INTERVAL 1 HOUR) AS ts", "ago()"},
		{"macro", "CREATE MACRO hour_ago() AS ago(INTERVAL 1 HOUR)", "ago()"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := conn.Exec(ctx, tt.sql)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "not deterministic") || !strings.Contains(err.Error(), tt.why) {
			t.Errorf("%s: %s: error %v, want a refusal naming %q", tt.place, tt.sql, err, tt.why)
		}
	}
	// The table is created in the same transaction, so the leader cannot
	// bind the UPDATE; the macro it calls still counts.
	exec(t, conn, "BEGIN")
	exec(t, conn, "CREATE TABLE h AS SELECT a, ts FROM g")
	exec(t, conn, "UPDATE h SET ts = ago(INTERVAL 1 HOUR)")
	if _, err := conn.Exec(context.Background(), "COMMIT"); err == nil || !strings.Contains(err.Error(), "ago()") {
		t.Errorf("COMMIT of a transaction updating with ago(): error %v, want a refusal naming ago()", err)
	}
	c.WaitConverged(t, 30*time.Second)
	if got := queryInts(t, conn, "SELECT count(*) FROM g"); got[0] != 26 {
		t.Errorf("g holds %d rows, want 26", got[0])
	}
	if got := queryInts(t, conn, "SELECT count(*) FROM duckdb_tables() WHERE table_name IN ('c', 'd1', 'd2', 'd3', 'd4', 'h')"); got[0] != 0 {
		t.Errorf("%d refused tables were created", got[0])
	}
}
