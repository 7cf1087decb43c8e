package access

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/sqltext"
)

// node lays out what a node keeps on disk, in a temporary directory: its
// data directory with the DuckDB file and WAL, a tokens file beside it, a
// directory of other files, and a symlink to the data directory.
type node struct {
	root, data, tokens, other, link string
}

func newNode(t *testing.T) node {
	t.Helper()
	root := t.TempDir()
	n := node{root: root, data: filepath.Join(root, "data"), tokens: filepath.Join(root, "tokens"),
		other: filepath.Join(root, "other"), link: filepath.Join(root, "link")}
	for _, d := range []string{n.data, filepath.Join(n.data, "raft"), n.other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(n.data, "duckraft.db"), filepath.Join(n.data, "duckraft.db.wal"), n.tokens,
		filepath.Join(n.other, "x.csv")} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(n.data, n.link); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n node) guard(t *testing.T) *Guard {
	t.Helper()
	g, err := NewGuard([]string{"_duckraft"}, []string{n.data, n.tokens})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestHiddenSchema: the applier's schema is refused in any spelling, in
// identifiers and in the strings DuckDB takes as names, in reads, writes
// and session statements.
func TestHiddenSchema(t *testing.T) {
	g := newNode(t).guard(t)
	for _, sql := range []string{
		"SELECT * FROM _duckraft.keys",
		`select * from "_DUCKRAFT"."keys"`,
		`SELECT * FROM memory."_DuckRaft".keys`,
		"SELECT * FROM query('SELECT * FROM _duckraft.keys')",
		"SELECT * FROM query($$SELECT idx FROM \"_duckraft\".applied$$)",
		"SELECT * FROM query_table('_duckraft.keys')",
		`SELECT * FROM query_table(['t', '"_duckraft".applied'])`,
		`SELECT * FROM query_table(E'\x5fduckraft.keys')`,
		`SELECT * FROM query_table(E'\137duckraft.keys')`,
		"SELECT * FROM pragma_table_info('_duckraft.keys')",
		"SELECT * FROM duckdb_table_sample('_duckraft.keys')",
		"SELECT * FROM histogram('_duckraft.keys', idx)",
		"SELECT * FROM histogram(_duckraft.keys, idx)",
		`SELECT * FROM histogram_values(memory."_duckraft"."keys", idx)`,
		"PRAGMA table_info('_duckraft.keys')",
		"PRAGMA storage_info('_DUCKRAFT.keys')",
		"SET search_path = 'main,_duckraft'",
		"SET schema = '_duckraft'",
		"SET search_path TO '\"_duckraft\"'",
		"SET search_path = memory._duckraft",
		"USE memory._duckraft",
		"DESCRIBE _duckraft.keys",
		"SUMMARIZE _duckraft.keys",
		"INSERT INTO t SELECT * FROM query_table('_duckraft.keys')",
		"INSERT INTO t SELECT idx FROM _duckraft.applied",
		"DROP TABLE _duckraft.keys",
		"CREATE VIEW v AS SELECT * FROM _duckraft.keys",
		"SELECT 1; SELECT * FROM _duckraft.keys",
		"SELECT currval('_duckraft.seq')",
		"COPY _duckraft.keys TO '/tmp/keys.csv'",
		"USE '_duckraft'",
		"SET schema '_duckraft'",
		"EXPLAIN ANALYZE SET search_path = '_duckraft'",
		// Quotes in a comment or a quoted name hide nothing.
		"-- it's\nSELECT * FROM _duckraft.keys -- '",
		`SELECT 1 AS "it's"; USE '_duckraft'`,
		"SELECT 'a''b', E'\\'' FROM _duckraft.keys",
	} {
		if err := g.Check(sqltext.Parse(sql)); !errors.Is(err, ErrHiddenSchema) {
			t.Errorf("%s: %v, want ErrHiddenSchema", sql, err)
		}
	}
}

// TestComputedNames: a name computed while the statement runs could name
// anything; where DuckDB takes a table, schema, query or file name, it
// must be a literal.
func TestComputedNames(t *testing.T) {
	g := newNode(t).guard(t)
	for _, sql := range []string{
		"SELECT * FROM query_table('_duck' || 'raft.keys')",
		"SELECT * FROM query_table('_duck'\n'raft.keys')",
		"SELECT * FROM query_table(concat('_duck', 'raft.keys'))",
		"SELECT * FROM query_table(?)",
		"SELECT * FROM query_table([s])",
		"SELECT * FROM query('SELECT * FROM ' || 'x')",
		"SELECT * FROM main.\"QUERY_TABLE\"((SELECT 'x'))",
		"SELECT * FROM pragma_table_info(lower('X'))",
		"SELECT * FROM read_blob('/tmp/' || 'x')",
		"SELECT * FROM read_text($1)",
		"SELECT * FROM glob(current_setting('home_directory'))",
		"SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))",
		"SET search_path = '_duck' || 'raft'",
		"SET schema = concat('x', 'y')",
		"INSERT INTO t SELECT * FROM read_csv(getvariable('f'))",
		"SELECT * FROM t, LATERAL query_table(t.name)",
		// A macro that would read whatever table its caller names.
		"CREATE MACRO rd(x) AS TABLE SELECT * FROM query_table(x)",
	} {
		if err := g.Check(sqltext.Parse(sql)); !errors.Is(err, ErrComputedName) {
			t.Errorf("%s: %v, want ErrComputedName", sql, err)
		}
	}
}

// TestProtectedFiles: the node's files cannot be read or written through
// any file reader, a string in table position, COPY or EXPORT, however
// the path is spelled: relative, with .., file://, through a symlink, or
// as a glob that could match them.
func TestProtectedFiles(t *testing.T) {
	n := newNode(t)
	g := n.guard(t)
	db := filepath.Join(n.data, "duckraft.db")
	for _, sql := range []string{
		"SELECT content FROM read_blob('" + db + "')",
		"SELECT content FROM read_text('" + db + ".wal')",
		"SELECT content FROM read_blob('" + n.data + "/raft/raft.db')",
		"SELECT * FROM read_csv(['" + n.other + "/x.csv', '" + n.tokens + "'])",
		"SELECT * FROM read_csv_auto('" + n.tokens + "')",
		"SELECT * FROM main.\"READ_BLOB\"('" + db + "')",
		"SELECT content FROM read_blob('" + n.other + "/../data/duckraft.db')",
		"SELECT content FROM read_blob('" + strings.ReplaceAll(db, "/", "//") + "')",
		"SELECT content FROM read_blob('file://" + db + "')",
		"SELECT content FROM read_blob('FILE:" + db + "')",
		"SELECT content FROM read_blob('" + n.link + "/duckraft.db')",
		"SELECT content FROM read_blob('" + n.root + "/*/duckraft.db')",
		"SELECT content FROM read_blob('" + n.root + "/**')",
		"SELECT content FROM read_blob('" + n.root + "/d?ta/*')",
		"SELECT content FROM read_blob('" + n.root + "/[!o]ata/*')",
		"SELECT content FROM read_blob('" + n.root + "/{data,other}/*')",
		"SELECT content FROM read_blob('" + n.link + "/*')",
		"SELECT file FROM glob('" + n.data + "/*')",
		"SELECT * FROM sniff_csv('" + n.tokens + "')",
		"SELECT * FROM parquet_metadata('" + db + "')",
		"SELECT * FROM read_duckdb('" + db + "')",
		"SELECT * FROM '" + n.data + "/x.csv'",
		"SUMMARIZE '" + db + "'",
		"DESCRIBE '" + db + "'",
		"SELECT * FROM (SUMMARIZE '" + db + "')",
		"PIVOT '" + n.data + "/x.csv' ON a",
		"TABLE '" + db + "'",
		"SELECT * FROM t, '" + n.data + "/x.csv'",
		"SELECT * FROM t JOIN '" + n.data + "/x.csv' ON true",
		`SELECT * FROM "` + n.data + `/x.csv"`,
		"SELECT * FROM query_table('" + n.data + "/x.csv')",
		"SELECT * FROM query('SELECT * FROM read_blob(''" + db + "'')')",
		"INSERT INTO t SELECT content FROM read_blob('" + db + "')",
		"COPY (SELECT 'garbage') TO '" + db + "' (USE_TMP_FILE false, HEADER false)",
		"COPY t TO '" + n.tokens + "'",
		"EXPLAIN ANALYZE COPY t TO '" + n.tokens + "'",
		"EXPLAIN (ANALYZE, FORMAT json) COPY t TO '" + n.tokens + "'",
		"COPY t FROM '" + n.tokens + "'",
		"EXPORT DATABASE '" + n.data + "'",
		"IMPORT DATABASE '" + n.data + "'",
		"ATTACH '" + db + "' AS copy",
		"LOAD '" + n.data + "/x.duckdb_extension'",
	} {
		if err := g.Check(sqltext.Parse(sql)); !errors.Is(err, ErrProtectedFile) {
			t.Errorf("%s: %v, want ErrProtectedFile", sql, err)
		}
	}
	// A relative path resolves under the working directory, as DuckDB's.
	t.Run("relative", func(t *testing.T) {
		t.Chdir(n.data)
		g := n.guard(t)
		for _, sql := range []string{"SELECT * FROM read_blob('duckraft.db')", "SELECT * FROM read_blob('./raft/../duckraft.db.wal')",
			"COPY t TO 'out.csv'", "SELECT * FROM read_blob('../tokens')"} {
			if err := g.Check(sqltext.Parse(sql)); !errors.Is(err, ErrProtectedFile) {
				t.Errorf("%s: %v, want ErrProtectedFile", sql, err)
			}
		}
		if err := g.Check(sqltext.Parse("SELECT * FROM read_csv('../other/x.csv')")); err != nil {
			t.Errorf("a relative path outside: %v", err)
		}
	})
}

// TestOrdinaryStatementsPass: what names neither the hidden schema nor the
// node's files, with names written as literals, is left alone.
func TestOrdinaryStatementsPass(t *testing.T) {
	n := newNode(t)
	g := n.guard(t)
	for _, sql := range []string{
		"SELECT * FROM t WHERE s = '_duckraft'",
		"SELECT '_duckraft' AS s, 'x' || '_duckraft'",
		"INSERT INTO notes VALUES ('see _duckraft.keys')",
		"SELECT * FROM my_duckraft_notes",
		"SELECT * FROM read_csv('" + n.other + "/x.csv', delim = ',', header = true)",
		"SELECT * FROM read_csv(['" + n.other + "/x.csv'])",
		"SELECT * FROM glob('" + n.other + "/*')",
		"SELECT * FROM '" + n.other + "/x.csv'",
		"COPY t TO '" + n.other + "/out.csv' (DELIMITER ',', FORMAT 'csv')",
		"COPY (SELECT * FROM t WHERE s = 'x') TO '" + n.other + "/out.parquet'",
		"SELECT * FROM read_parquet('s3://bucket/data/duckraft.db')",
		"SELECT * FROM query_table('t')",
		"SELECT * FROM query_table(['t', 'main.u'])",
		"SELECT * FROM histogram(t0, v, bin_count := 3)",
		`SELECT * FROM histogram(main."T", v)`,
		"SELECT * FROM query('SELECT 1')",
		"SET search_path = 'main,s'",
		"SET schema = main",
		"SET search_path = memory.s",
		"SET TimeZone = 'UTC'",
		"SELECT * FROM range(1, (SELECT 3)) r(i), unnest([1, 2])",
		"SELECT nextval('s'), 'a', 'b' FROM t, u WHERE x IN ('y', 'z') ORDER BY 'a', 'b'",
		"UPDATE t SET a = 'x', b = 'y' FROM u WHERE t.id = u.id",
		"SELECT * FROM t, (SELECT 'x' AS y) s",
		"WITH w AS (SELECT 'a', 'b') SELECT * FROM w",
	} {
		if err := g.Check(sqltext.Parse(sql)); err != nil {
			t.Errorf("%s: %v", sql, err)
		}
	}
}

// TestPreCheck: the text a Guard does not lex names nothing it judges, and
// a bulk INSERT of literals is such a text, its strings' words aside.
func TestPreCheck(t *testing.T) {
	for sql, want := range map[string]bool{
		"INSERT INTO t VALUES (1, 'loaded from the file read_csv(x)'), (2, 'use it')": false,
		"UPDATE t SET a = 'x' WHERE id = 3":                                           false,
		"INSERT INTO t VALUES (1, 'it''s from here')":                                 false,
		"SELECT * FROM t": true,
		"USE s":           true,
		"INSERT INTO t VALUES ('a')  ; USE '_duckraft'":        true,
		"INSERT INTO t VALUES ('unclosed from)":                true,
		"INSERT INTO t VALUES ('x') -- ' read_blob('/data/x')": true,
		"INSERT INTO t VALUES ('é')":                           true,
	} {
		if got := mayReach(sql); got != want {
			t.Errorf("mayReach(%q) = %v, want %v", sql, got, want)
		}
	}
}

// BenchmarkCheck is what the guard adds to a statement: a point read, an
// UPDATE, an analytic read with calls and a file reader, and a bulk INSERT
// of 10,000 rows (about 400 KB of text); the UPDATE and the INSERT name
// none of the needles, which spares them the lexing.
func BenchmarkCheck(b *testing.B) {
	g, err := NewGuard([]string{"_duckraft"}, []string{b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	var bulk strings.Builder
	bulk.WriteString("INSERT INTO bench VALUES ")
	for i := range 10000 {
		if i > 0 {
			bulk.WriteString(", ")
		}
		fmt.Fprintf(&bulk, "(%d, %d, 'payload %d from the load')", i, i*7, i)
	}
	for name, sql := range map[string]string{
		"point":    "SELECT * FROM t WHERE id = 42",
		"update":   "UPDATE t SET name = 'x' WHERE id = 42",
		"analytic": "SELECT a, count(*), sum(b) FROM read_parquet('/srv/x/*.parquet') JOIN u USING (a) WHERE c > 3 GROUP BY a ORDER BY 2 DESC LIMIT 10",
		"bulk":     bulk.String(),
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(sql)))
			for b.Loop() {
				if err := g.Check(sqltext.Parse(sql)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
