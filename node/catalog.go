package node

import (
	"fmt"
	"strings"

	"github.com/duckraft/duckraft/node/sqlquote"
)

// The statements an attaching DuckDB client sends to load the remote
// catalog (protocol spec §10.1 for 1.5, quack-2.0.md §4.2 for 2.0). They
// are recognised with their whitespace collapsed: each line of the client's
// text is indented, and only the words are certain.
const (
	// DuckDB 1.5 (Q1) reads only the part of the results that comes
	// inline, so they are answered whole.
	catalogSchemasQ1 = "SELECT catalog_name, schema_name FROM information_schema.schemata " +
		"WHERE catalog_name NOT IN ('system', 'temp') ORDER BY ALL"
	catalogTablesQ1 = "SELECT schema_name, sql, 'table' FROM duckdb_tables() " +
		"UNION ALL SELECT schema_name, view_name, 'view' FROM duckdb_views()"
	// DuckDB 2.0 (Q3) keys tables to schemas by oid, and walks nested
	// schemas.
	catalogSchemasQ3 = "WITH RECURSIVE schema_tree AS ( SELECT oid, database_name, [schema_name] AS schema_path " +
		"FROM duckdb_schemas() WHERE parent_schema_oid IS NULL UNION ALL " +
		"SELECT nested.oid, nested.database_name, list_append(parent.schema_path, nested.schema_name) " +
		"FROM duckdb_schemas() nested JOIN schema_tree parent ON nested.parent_schema_oid = parent.oid ) " +
		"SELECT oid, database_name, schema_path, current_database() FROM schema_tree " +
		"WHERE database_name NOT IN ('system', 'temp') " +
		"ORDER BY (database_name = current_database()) DESC, database_name, length(schema_path), schema_path"
	catalogTablesQ3 = "SELECT schema_oid, sql, 'table' FROM duckdb_tables() " +
		"UNION ALL SELECT schema_oid, view_name, 'view' FROM duckdb_views()"
)

// collapseSpace turns every run of whitespace into one space and trims the
// ends.
func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// catalogQuery reports whether sql is one of the catalog loads and returns
// the statement to run instead: the same query without the hidden schemas
// and without temporary objects, whose schema names would collide with the
// real ones on the client.
//
// DuckDB 2.0's two queries join on schema oids, which are local to a node
// (a node restored from a snapshot numbers its catalog anew) while a
// cluster may serve the two reads from different replicas. The answers
// therefore carry, in the oid columns, a key computed from the database
// name and schema path instead, the same on every node.
func (s *Server) catalogQuery(sql string) (string, bool) {
	var hidden []string
	for _, h := range s.cfg.HiddenSchemas {
		hidden = append(hidden, sqlquote.Literal(h))
	}
	notHidden := func(col string) string {
		if len(hidden) == 0 {
			return ""
		}
		return fmt.Sprintf(" AND %s NOT IN (%s)", col, strings.Join(hidden, ", "))
	}
	// schemaTree is DuckDB 2.0's walk of the schemas, without the
	// internal databases and hidden schemas, keyed by path.
	schemaTree := func() string {
		return "WITH RECURSIVE schema_tree AS (\n" +
			"\tSELECT oid, database_name, [schema_name] AS schema_path FROM duckdb_schemas()\n" +
			"\tWHERE parent_schema_oid IS NULL AND database_name NOT IN ('system', 'temp')" + notHidden("schema_name") + "\n" +
			"\tUNION ALL\n" +
			"\tSELECT nested.oid, nested.database_name, list_append(parent.schema_path, nested.schema_name)\n" +
			"\tFROM duckdb_schemas() nested JOIN schema_tree parent ON nested.parent_schema_oid = parent.oid\n" +
			"), keyed AS (\n" +
			"\tSELECT oid, (hash(database_name, schema_path) >> 1)::BIGINT AS schema_key, database_name, schema_path FROM schema_tree\n" +
			")\n"
	}
	switch collapseSpace(sql) {
	case catalogSchemasQ1:
		return fmt.Sprintf("SELECT catalog_name, schema_name\nFROM information_schema.schemata\n"+
			"WHERE catalog_name NOT IN ('system', 'temp')%s\nORDER BY ALL", notHidden("schema_name")), true
	case catalogTablesQ1:
		return fmt.Sprintf("SELECT schema_name, sql, 'table'\nFROM duckdb_tables() WHERE NOT temporary%s\n"+
			"UNION ALL\nSELECT schema_name, view_name, 'view'\nFROM duckdb_views() WHERE NOT temporary%s",
			notHidden("schema_name"), notHidden("schema_name")), true
	case catalogSchemasQ3:
		return schemaTree() +
			"SELECT schema_key AS oid, database_name, schema_path, current_database() FROM keyed\n" +
			"ORDER BY (database_name = current_database()) DESC, database_name, length(schema_path), schema_path", true
	case catalogTablesQ3:
		return schemaTree() +
			"SELECT k.schema_key AS schema_oid, t.sql, 'table' FROM duckdb_tables() t JOIN keyed k ON t.schema_oid = k.oid WHERE NOT t.temporary\n" +
			"UNION ALL\n" +
			"SELECT k.schema_key, v.view_name, 'view' FROM duckdb_views() v JOIN keyed k ON v.schema_oid = k.oid WHERE NOT v.temporary AND NOT v.internal", true
	}
	return "", false
}
