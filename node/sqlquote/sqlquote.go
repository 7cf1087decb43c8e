// Package sqlquote quotes identifiers and string literals for SQL text that
// duckraft builds itself (snapshot DDL, COPY and INSERT statements, calls
// to an authorization function).
//
// It is the one implementation of both rules, so that every package quotes
// the same way: DuckDB, like standard SQL, escapes a quote character inside
// a quoted token by doubling it, and nothing else needs escaping (a
// backslash is an ordinary character in both forms). The package has no
// dependencies beyond the standard library, so any package may import it.
package sqlquote

import "strings"

// Ident returns s as a double-quoted identifier: `"` + s + `"` with every
// `"` inside doubled. The result names exactly s whatever it contains
// (spaces, upper case, keywords, quotes), since quoting always applies,
// even where s would also be valid unquoted. The empty string gives `""`,
// which DuckDB rejects as a name.
func Ident(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// Literal returns s as a single-quoted string literal: "'" + s + "'" with
// every "'" inside doubled. DuckDB reads it back as exactly s: standard
// strings have no backslash escapes (E'…' strings, which do, are not
// produced here).
func Literal(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
