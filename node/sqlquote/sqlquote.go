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

// Path returns names as one qualified name, each part quoted by Ident and
// joined by dots: a table of a nested schema (DuckDB 2.0) is
// "a"."b"."t".
func Path(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = Ident(n)
	}
	return strings.Join(quoted, ".")
}

// SplitPath splits a dotted name as SQL writes one, a."b.c".d, into its
// parts, the inverse of Path: quotes group, a doubled quote inside them is
// one, and blanks outside them are dropped. It does not check that the
// parts are names: a caller binds them.
func SplitPath(name string) []string {
	var parts []string
	var cur strings.Builder
	quoted := false
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '"' && quoted && i+1 < len(name) && name[i+1] == '"':
			cur.WriteByte('"')
			i++
		case c == '"':
			quoted = !quoted
		case c == '.' && !quoted:
			parts = append(parts, cur.String())
			cur.Reset()
		case (c == ' ' || c == '\t' || c == '\n' || c == '\r') && !quoted:
		default:
			cur.WriteByte(c)
		}
	}
	return append(parts, cur.String())
}
