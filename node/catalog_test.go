package node_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/wire"
)

// attachQueries are the catalog loads a DuckDB 2.0 client sends at ATTACH.
func attachQueries(t *testing.T) (schemas, tables string) {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "duckdb-2.0", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return read("attach-schemas.sql"), read("attach-tables.sql")
}

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
	attachSchemasQ3, attachTablesQ3 := attachQueries(t)
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
