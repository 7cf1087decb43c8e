package node_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/wire"
)

// The catalog loads a DuckDB 2.0 client sends at ATTACH, as it words them
// (quack-2.0.md §4.2).
const (
	attachSchemasQ3 = "\nWITH RECURSIVE schema_tree AS (\n" +
		"\tSELECT oid, database_name, [schema_name] AS schema_path\n" +
		"\tFROM duckdb_schemas()\n" +
		"\tWHERE parent_schema_oid IS NULL\n" +
		"\tUNION ALL\n" +
		"\tSELECT nested.oid, nested.database_name, list_append(parent.schema_path, nested.schema_name)\n" +
		"\tFROM duckdb_schemas() nested\n" +
		"\tJOIN schema_tree parent ON nested.parent_schema_oid = parent.oid\n" +
		")\n" +
		"SELECT oid, database_name, schema_path, current_database()\n" +
		"FROM schema_tree\n" +
		"WHERE database_name NOT IN ('system', 'temp')\n" +
		"ORDER BY (database_name = current_database()) DESC, database_name, length(schema_path), schema_path\n\t"
	attachTablesQ3 = "\nSELECT schema_oid, sql, 'table'\nFROM duckdb_tables()\nUNION ALL\nSELECT schema_oid, view_name, 'view'\nFROM duckdb_views()\n\t"
)

// TestAttachCatalogQ3 answers DuckDB 2.0's catalog loads without hidden
// schemas and temporary objects, with schema keys that two servers whose
// catalogs were built in another order agree on: a cluster may serve the
// two queries from different replicas, and oids are local to a node.
func TestAttachCatalogQ3(t *testing.T) {
	hide := func(c *node.Config) { c.HiddenSchemas = []string{"_meta"} }
	setups := [][]string{
		{"CREATE SCHEMA _meta", "CREATE TABLE _meta.applied(i INTEGER)", "CREATE SCHEMA s",
			"CREATE TABLE s.st(i INTEGER)", "CREATE TABLE t(j VARCHAR)", "CREATE VIEW v AS SELECT 1 AS one"},
		{"CREATE TABLE t(j VARCHAR)", "CREATE VIEW v AS SELECT 1 AS one", "CREATE SCHEMA s",
			"CREATE TABLE s.st(i INTEGER)", "CREATE SCHEMA _meta", "CREATE TABLE _meta.applied(i INTEGER)"},
	}
	var answers [][]string
	for _, setup := range setups {
		addr, _ := startServer(t, hide)
		c := connect(t, addr, wire.Q3)
		for _, sql := range setup {
			exec(t, c, sql)
		}
		exec(t, c, "CREATE TEMPORARY TABLE scratch(x INTEGER)")
		keys := map[int64]string{}
		var got []string
		for _, row := range queryRows(t, c, attachSchemasQ3) {
			key, _ := row[0].(int64)
			path := fmt.Sprint(row[2])
			keys[key] = path
			got = append(got, fmt.Sprintf("%v %s current=%v", row[1], path, row[3]))
		}
		want := []string{"test [main] current=test", "test [s] current=test"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("schemas %q, want %q", got, want)
		}
		for _, row := range queryRows(t, c, attachTablesQ3) {
			key, _ := row[0].(int64)
			path, ok := keys[key]
			if !ok {
				t.Fatalf("%v names schema key %d, which the schema load did not list", row, key)
			}
			got = append(got, fmt.Sprintf("%s %v %v", path, row[2], row[1]))
		}
		slices.Sort(got)
		answers = append(answers, append(got, fmt.Sprint(keys)))
	}
	for _, line := range answers[0] {
		for _, hidden := range []string{"_meta", "scratch", "applied"} {
			if strings.Contains(line, hidden) {
				t.Errorf("the catalog shows %s: %s", hidden, line)
			}
		}
	}
	if !reflect.DeepEqual(answers[0], answers[1]) {
		t.Errorf("two servers disagree:\n%q\n%q", answers[0], answers[1])
	}
}
