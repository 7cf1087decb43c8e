package node

import (
	"fmt"
	"strings"

	"github.com/duckraft/duckraft/node/sqlquote"
)

// The two statements an attaching DuckDB client sends to load the remote
// catalog, byte for byte (protocol spec §10.1). Q1 clients read only the
// part of their results that comes inline, so they are answered whole.
const (
	catalogSchemasSQL = "\nSELECT catalog_name, schema_name\nFROM information_schema.schemata\nWHERE catalog_name NOT IN ('system', 'temp')\nORDER BY ALL\n\t"
	catalogTablesSQL  = "\nSELECT schema_name, sql, 'table'\nFROM duckdb_tables()\nUNION ALL\nSELECT schema_name, view_name, 'view'\nFROM duckdb_views()\n\t"
)

// catalogQuery reports whether sql is one of the catalog loads and returns
// the statement to run instead: the same query without the hidden schemas
// and without temporary objects, whose schema names would collide with the
// real ones on the client.
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
	switch sql {
	case catalogSchemasSQL:
		return fmt.Sprintf("SELECT catalog_name, schema_name\nFROM information_schema.schemata\n"+
			"WHERE catalog_name NOT IN ('system', 'temp')%s\nORDER BY ALL", notHidden("schema_name")), true
	case catalogTablesSQL:
		return fmt.Sprintf("SELECT schema_name, sql, 'table'\nFROM duckdb_tables() WHERE NOT temporary%s\n"+
			"UNION ALL\nSELECT schema_name, view_name, 'view'\nFROM duckdb_views() WHERE NOT temporary%s",
			notHidden("schema_name"), notHidden("schema_name")), true
	}
	return "", false
}
