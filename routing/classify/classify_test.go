package classify

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqltext"
)

// classifyTests lists statements, their class, and whether DuckDB can run
// them in a scratch database to confirm the class against its own statement
// type ({dir} becomes a temporary directory; before runs first). lexer is
// the class the lexer alone gives where DuckDB's parser decides otherwise.
var classifyTests = []struct {
	sql    string
	want   Class
	before string
	noRun  bool  // needs the network or files the test does not have
	lexer  Class // 0: the lexer alone agrees
}{
	{sql: "SELECT * FROM t", want: Read},
	{sql: "select 1", want: Read},
	{sql: "(SELECT 1) UNION ALL (SELECT 2)", want: Read},
	{sql: "WITH x AS (SELECT 1 AS a) SELECT * FROM x", want: Read},
	{sql: "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r", want: Read},
	{sql: "FROM t", want: Read},
	{sql: "FROM t SELECT a WHERE a > 1", want: Read},
	{sql: "VALUES (1, 'a'), (2, 'b')", want: Read},
	{sql: "TABLE t", want: Read},
	{sql: "PIVOT t ON b USING sum(a)", want: Read},
	{sql: "SHOW TABLES", want: Read},
	{sql: "SHOW ALL TABLES", want: Read},
	{sql: "DESCRIBE t", want: Read},
	{sql: "DESCRIBE SELECT 1", want: Read},
	{sql: "SUMMARIZE t", want: Read},
	{sql: "EXPLAIN SELECT * FROM t", want: Read},
	{sql: "EXPLAIN INSERT INTO t VALUES (1, 'x')", want: Read},
	{sql: "EXPLAIN ANALYZE SELECT * FROM t", want: Read},
	{sql: "EXPLAIN ANALYZE INSERT INTO t VALUES (1, 'x')", want: Write},
	{sql: "PRAGMA table_info('t')", want: Read},
	{sql: "PRAGMA show_tables", want: Read},
	{sql: "PRAGMA database_size", want: Read},
	{sql: "PRAGMA version", want: Read},
	{sql: "CALL duckdb_functions()", want: Read},
	{sql: "CALL pragma_table_info('t')", want: Read},
	{sql: "SELECT random(), uuid(), now()", want: Read},
	{sql: "SELECT currval('s')", want: Read, before: "SELECT nextval('s')"},
	{sql: "SELECT 'nextval(1)', \"nextval\" FROM (SELECT 1 AS nextval)", want: Read},
	{sql: "SELECT nextval('s')", want: Write},
	{sql: "SELECT a, NEXTVAL('s') FROM t", want: Write},
	{sql: "SELECT setseed(0.5)", want: Session},
	{sql: "COPY t TO '{dir}/t.csv'", want: Read},
	{sql: "COPY (SELECT * FROM t) TO '{dir}/t.parquet' (FORMAT parquet)", want: Read},
	{sql: "EXPORT DATABASE '{dir}/export'", want: Read},
	{sql: "INSERT INTO t VALUES (1, 'x')", want: Write},
	{sql: "insert into t select * from t", want: Write},
	{sql: "INSERT OR REPLACE INTO t VALUES (1, 'x')", want: Write, noRun: true}, // t has no key
	{sql: "WITH x AS (SELECT 1 AS a, 'b' AS b) INSERT INTO t SELECT * FROM x", want: Write},
	{sql: "WITH x AS (SELECT 1 AS a) UPDATE t SET a = 2 FROM x WHERE t.a = x.a", want: Write},
	{sql: "WITH x AS (SELECT 1 AS a) DELETE FROM t USING x WHERE t.a = x.a", want: Write},
	{sql: "UPDATE t SET b = 'y'", want: Write},
	{sql: "DELETE FROM t WHERE a = 1", want: Write},
	{sql: "TRUNCATE t", want: Write},
	{sql: "MERGE INTO t USING (SELECT 1 AS a) s ON t.a = s.a WHEN MATCHED THEN DELETE", want: Write},
	{sql: "CREATE TABLE u (a INT)", want: Write},
	{sql: "CREATE OR REPLACE TABLE u AS SELECT 1 AS a", want: Write},
	{sql: "CREATE VIEW v AS SELECT * FROM t", want: Write},
	{sql: "CREATE SEQUENCE s2", want: Write},
	{sql: "CREATE INDEX i ON t (a)", want: Write},
	{sql: "CREATE MACRO m(x) AS x + 1", want: Write},
	{sql: "CREATE SCHEMA sch", want: Write},
	{sql: "CREATE TYPE mood AS ENUM ('happy', 'sad')", want: Write},
	{sql: "CREATE SECRET (TYPE s3, KEY_ID 'k', SECRET 's')", want: Session, noRun: true},
	{sql: "CREATE PERSISTENT SECRET (TYPE s3, KEY_ID 'k', SECRET 's')", want: Node, noRun: true},
	{sql: "CREATE OR REPLACE PERSISTENT SECRET s (TYPE s3, KEY_ID 'k', SECRET 's')", want: Node, noRun: true},
	{sql: "UPDATE EXTENSIONS", want: Node, noRun: true},
	{sql: "DROP TABLE t", want: Write},
	{sql: "ALTER TABLE t ADD COLUMN c INT", want: Write},
	{sql: "COMMENT ON TABLE t IS 'people'", want: Write},
	{sql: "COPY t FROM '{dir}/in.csv'", want: Write, before: "COPY t TO '{dir}/in.csv'"},
	{sql: "ATTACH ':memory:' AS other", want: Write},
	{sql: "DETACH other", want: Write, before: "ATTACH ':memory:' AS other"},
	{sql: "INSTALL httpfs", want: Write, noRun: true},
	{sql: "LOAD json", want: Write, noRun: true},
	{sql: "IMPORT DATABASE '{dir}/export'", want: Write, noRun: true},
	{sql: "CALL dbgen(sf = 0)", want: Write, noRun: true},
	{sql: "EXECUTE p", want: Write, before: "PREPARE p AS SELECT 1"},
	{sql: "BEGIN", want: Begin},
	{sql: "BEGIN TRANSACTION", want: Begin},
	{sql: "START TRANSACTION", want: Begin},
	{sql: "COMMIT", want: Commit, before: "BEGIN"},
	{sql: "END", want: Commit, before: "BEGIN"},
	{sql: "ROLLBACK", want: Rollback, before: "BEGIN"},
	{sql: "ABORT", want: Rollback, before: "BEGIN"},
	{sql: "SET threads = 1", want: Refused},
	{sql: "SET default_collation = 'nocase'", want: Refused},
	{sql: "SET SESSION integer_division = true", want: Refused},
	{sql: `SET "TimeZone" TO 'UTC'`, want: Session},
	{sql: "SET search_path = 'main'", want: Session},
	{sql: "RESET ALL", want: Refused, noRun: true}, // DuckDB 1.5 does not implement it
	{sql: "SET TimeZone = 'UTC'", want: Session},
	{sql: "SET VARIABLE x = 42", want: Refused},
	{sql: "SET SESSION TimeZone = 'UTC'", want: Session},
	{sql: "SET GLOBAL threads = 1", want: Node},
	{sql: "set global default_collation = 'nocase'", want: Node},
	{sql: "RESET GLOBAL threads", want: Node},
	{sql: "SET enable_logging = true", want: Node, noRun: true},
	{sql: `SET "logging_storage" = 'file'`, want: Node, noRun: true},
	{sql: "SET SESSION logging_level = 'DEBUG'", want: Node, noRun: true},
	{sql: "CALL enable_logging(storage = 'file')", want: Node, noRun: true},
	{sql: "SELECT enable_logging()", want: Node, noRun: true},
	{sql: `SELECT "Disable_PEG_Parser"()`, want: Node, noRun: true},
	{sql: "CALL truncate_duckdb_logs()", want: Node, noRun: true},
	{sql: "RESET threads", want: Refused},
	{sql: "RESET TimeZone", want: Session},
	{sql: "USE memory", want: Session},
	{sql: "PRAGMA threads = 2", want: Refused},
	{sql: "PRAGMA enable_profiling", want: Refused},
	{sql: "PREPARE q AS SELECT 1", want: Session},
	{sql: "DEALLOCATE p", want: Session, before: "PREPARE p AS SELECT 1"},
	{sql: "CHECKPOINT", want: Session},
	{sql: "FORCE CHECKPOINT", want: Session},
	{sql: "VACUUM", want: Session},
	{sql: "ANALYZE", want: Session},
	{sql: "-- a comment first\n/* and another */ INSERT INTO t VALUES (1, 'x')", want: Write},

	// Decided by DuckDB's parse tree: the functions a query calls.
	{sql: "SELECT * FROM t WHERE b = 'nextval('", want: Read},
	{sql: "SELECT 1 AS \"nextval(\" -- nextval('s')\n", want: Read},
	{sql: "SELECT \"nextval\"('s')", want: Write},
	{sql: "SELECT \"NextVal\"('s')", want: Write},
	{sql: "SELECT main.nextval('s')", want: Write},
	{sql: "SELECT ('s').nextval()", want: Write},
	{sql: "SELECT nextval /* why */ ('s')", want: Write},
	{sql: "SELECT max(a), (SELECT nextval('s')) FROM t", want: Write},
	{sql: "SELECT * FROM t WHERE a IN (SELECT nextval('s'))", want: Write},
	{sql: "VALUES (nextval('s'))", want: Write},
	{sql: "FROM t SELECT a, nextval('s')", want: Write},
	{sql: "SELECT * FROM t AS nextval(x, y)", want: Read, lexer: Write}, // an alias with column names
	{sql: "WITH nextval(x) AS (SELECT 1) SELECT * FROM nextval", want: Read, lexer: Write},
	{sql: "WITH x AS (SELECT nextval('s') AS v) SELECT * FROM x", want: Write},
	{sql: "SUMMARIZE SELECT nextval('s')", want: Write},
	{sql: "SUMMARIZE SELECT random()", want: Read},
	{sql: "SHOW t", want: Read},
	{sql: "DESCRIBE FROM t", want: Read},
	{sql: "PIVOT t ON b IN ('x', 'y') USING sum(a)", want: Read},
	// DuckDB 2.0 makes one MULTI statement of the ENUM this creates and the
	// query, which its parser does not show: a write, decided on the leader.
	{sql: "SELECT * FROM (PIVOT t ON b USING sum(a))", want: Write, lexer: Read},
	{sql: "SELECT setval('s', 10)", want: Write},
	{sql: "UNPIVOT t ON b INTO NAME k VALUE v", want: Read},
	{sql: "FROM query('SELECT a FROM t')", want: Read},
	{sql: "FROM query('SELECT nextval(''s'')')", want: Write, lexer: Read},
	{sql: "CALL query('SELECT nextval(''s'')')", want: Write, lexer: Read},
	{sql: "CALL checkpoint()", want: Session},
	{sql: "COPY (SELECT nextval('s')) TO '{dir}/s.csv'", want: Write, lexer: Read},
	{sql: "COPY (FROM t WHERE b = ')') TO '{dir}/t.csv'", want: Read},
	{sql: "EXPLAIN ANALYZE SELECT nextval('s')", want: Write},
	{sql: "EXPLAIN SELECT nextval('s')", want: Read},
	{sql: "EXPLAIN (ANALYZE) INSERT INTO t VALUES (1, 'x')", want: Write},
	{sql: "EXPLAIN (ANALYZE false) INSERT INTO t VALUES (1, 'x')", want: Write}, // DuckDB 1.5 runs it anyway
	{sql: "EXPLAIN (FORMAT json) INSERT INTO t VALUES (1, 'x')", want: Read},
	{sql: "WITH x AS (SELECT 1 AS a, 'b' AS b) INSERT INTO t SELECT * FROM x; ", want: Write},
	{sql: "/* ; */ SET threads = 1 -- ;", want: Refused},
	{sql: "PRAGMA storage_info('t')", want: Read},
	{sql: "PRAGMA memory_limit = '1GB'", want: Refused},
	{sql: "SELECT 1 + ", want: Read, noRun: true},                       // DuckDB rejects it: the lexer's class
	{sql: "SELECT 1 -- \x00\n, nextval('s')", want: Write, noRun: true}, // the C API would cut at NUL: the lexer's class
}

func TestClassify(t *testing.T) {
	for _, tt := range classifyTests {
		got, err := Statements(tt.sql)
		if err != nil || len(got) != 1 || got[0].Class != tt.want {
			t.Errorf("Statements(%q) = %v, %v; want one %s", tt.sql, got, err, tt.want)
		}
	}
}

// TestClassifyLexerOnly classifies without DuckDB's parser, as when none
// can be opened: the lexer alone differs only where the table says so.
func TestClassifyLexerOnly(t *testing.T) {
	sqlParser()
	for _, tt := range classifyTests {
		stmts, err := sqltext.Split(tt.sql)
		if err != nil {
			t.Fatal(err)
		}
		want := tt.want
		if tt.lexer != 0 {
			want = tt.lexer
		}
		got, err := classifyTexts(nil, tt.sql, stmts)
		if err != nil || len(got) != 1 || got[0].Class != want {
			t.Errorf("lexer alone: %q = %v, %v; want one %s", tt.sql, got, err, want)
		}
	}
}

// TestClassifyStatements lists multi-statement texts: DuckDB's count of
// the whole text must match the lexer's split.
func TestClassifyStatements(t *testing.T) {
	for _, tt := range []struct {
		sql  string
		want []textClass
	}{
		{"SELECT 'a;b'; SELECT \"c;d\"; -- e;f\nSELECT 1 /* g; */", []textClass{
			{"SELECT 'a;b'", Read}, {`SELECT "c;d"`, Read}, {"-- e;f\nSELECT 1 /* g; */", Read}}},
		{"SELECT $$x;y$$; SELECT $t$;$t$;;", []textClass{{"SELECT $$x;y$$", Read}, {"SELECT $t$;$t$", Read}}},
		{"SELECT E'\\';' ; SELECT nextval('s')", []textClass{{`SELECT E'\';'`, Read}, {"SELECT nextval('s')", Write}}},
		{"INSERT INTO t VALUES (1, ';'); UPDATE t SET b = '--' /* ; */; DELETE FROM t", []textClass{
			{"INSERT INTO t VALUES (1, ';')", Write}, {"UPDATE t SET b = '--' /* ; */", Write}, {"DELETE FROM t", Write}}},
		{"PIVOT t ON b USING sum(a); SELECT 1", []textClass{{"PIVOT t ON b USING sum(a)", Read}, {"SELECT 1", Read}}},
		{"SET threads = 1; SELECT setseed(0.1); CALL checkpoint()", []textClass{
			{"SET threads = 1", Refused}, {"SELECT setseed(0.1)", Session}, {"CALL checkpoint()", Session}}},
	} {
		got, err := Statements(tt.sql)
		if err != nil || !reflect.DeepEqual(textClasses(got), tt.want) {
			t.Errorf("Statements(%q) = %+v, %v\nwant %+v", tt.sql, textClasses(got), err, tt.want)
		}
	}
}

// TestClassifySplitMismatch feeds classifyTexts a split that DuckDB does
// not share, as a lexer bug would: the text is refused.
func TestClassifySplitMismatch(t *testing.T) {
	p := sqlParser()
	if p == nil {
		t.Skip("no parser")
	}
	for _, tt := range []struct {
		sql   string
		texts []string
	}{
		{"SELECT 1; SELECT 2", []string{"SELECT 1; SELECT 2"}},
		{"INSERT INTO t VALUES (1); DELETE FROM t", []string{"INSERT INTO t VALUES (1); DELETE FROM t"}},
		{"SELECT 1; -- x\n; DELETE FROM t", []string{"SELECT 1"}},
		{"SELECT 1; SELECT 2; DELETE FROM t", []string{"SELECT 1", "SELECT 2"}},
	} {
		var stmts []sqltext.Statement
		for _, text := range tt.texts {
			stmts = append(stmts, sqltext.Parse(text))
		}
		if got, err := classifyTexts(p, tt.sql, stmts); !errors.Is(err, errSplit) {
			t.Errorf("classifyTexts(%q, %q) = %v, %v; want errSplit", tt.sql, tt.texts, got, err)
		}
	}
}

func TestPlainRead(t *testing.T) {
	for sql, want := range map[string]bool{
		"SELECT * FROM t WHERE id = 42":           true,
		"  select a, b from t where c = $1 ;; \n": true,
		"FROM t":                                true,
		"SHOW TABLES":                           true,
		"DESCRIBE t":                            true,
		"SELECT * FROM t WHERE b = 'x' -- done": true,
		"SELECT nextval('s')":                   false,
		"SELECT * FROM t WHERE b = 'a(b'":       false,
		"SELECT 'a;b'":                          false,
		"SELECT 1; DELETE FROM t":               false,
		"/* c */ SELECT 1":                      false,
		"SELECTED":                              false,
		"SELECT":                                false,
		"select_x FROM t":                       false,
		"INSERT INTO t SELECT * FROM u":         false,
		"WITH x AS (SELECT 1) SELECT * FROM x":  false,
		"VALUES (1)":                            false,
	} {
		if got := plainRead(sql); got != want {
			t.Errorf("plainRead(%q) = %v; want %v", sql, got, want)
		}
	}
}

// TestPlainInsert: the literal INSERTs that skip DuckDB's parser, and for
// each of them DuckDB's own reading: one statement, a write, as the parser
// path classifies it.
func TestPlainInsert(t *testing.T) {
	for sql, want := range map[string]bool{
		"INSERT INTO bench VALUES (1, 2, 'payload-1-2')":            true,
		"  insert into main.\"T\" (a, \"B\") VALUES (-1, NULL);;  ": true,
		"INSERT INTO t VALUES ('a;b'), ('it''s'), ('--x'), ('/*')":  true,
		"INSERT INTO \"we\"\"ird;\" VALUES (?, $1, true, 1.5e3)":    true,
		"INSERT INTO t VALUES ('ünï'), (+2)":                        true,
		"INSERT INTO t VALUES (E'a\\'; DROP TABLE t; --')":          false,
		"INSERT INTO t VALUES ($$a;b$$)":                            false,
		"INSERT INTO t VALUES (X'ff')":                              false,
		"INSERT INTO t VALUES (1) -- done":                          false,
		"/* c */ INSERT INTO t VALUES (1)":                          false,
		"INSERT INTO t VALUES (1) /* ; */":                          false,
		"INSERT INTO t VALUES (random())":                           false,
		"INSERT INTO t SELECT 1":                                    false,
		"INSERT INTO t VALUES (1); DELETE FROM t":                   false,
	} {
		lexed, err := sqltext.Split(sql)
		if err != nil {
			t.Fatalf("%q: %v", sql, err)
		}
		if got := len(lexed) == 1 && plainInsert(sql, lexed[0]); got != want {
			t.Errorf("plainInsert(%q) = %v; want %v", sql, got, want)
		}
		if !want {
			continue
		}
		parsed, err := classifyTexts(sqlParser(), sql, lexed)
		if err != nil || len(parsed) != 1 || parsed[0].Class != Write {
			t.Errorf("%q through DuckDB's parser: %v, %v", sql, parsed, err)
		}
		if n, err := sqlParser().Count(sql); err != nil || n != 1 {
			t.Errorf("%q: DuckDB counts %d statements, %v", sql, n, err)
		}
		got, err := Statements(sql)
		if err != nil || len(got) != 1 || got[0].Class != Write {
			t.Errorf("Statements(%q) = %v, %v", sql, got, err)
		}
		if _, ok := classCache.get(sql); ok {
			t.Errorf("%q was cached", sql)
		}
	}
}

func TestClassifyCache(t *testing.T) {
	sql := "SELECT count(*), nextval('cache_test') FROM t; -- TestClassifyCache"
	for i := range 2 {
		got, err := Statements(sql)
		if err != nil || len(got) != 1 || got[0].Class != Write {
			t.Fatalf("Statements = %v, %v", got, err)
		}
		if _, ok := classCache.get(sql); ok != (i == 1) {
			t.Fatalf("after %d calls: cached %v", i+1, ok)
		}
		got[0].Class = Read // callers get copies
	}
	again, err := Statements(sql)
	if err != nil || len(again) != 1 || again[0].Class != Write || again[0].Text != "SELECT count(*), nextval('cache_test') FROM t" {
		t.Errorf("cached Statements = %v, %v", again, err)
	}
	for range 2 {
		if _, err := Statements("SELECT 1 FROM t WHERE a = 2"); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := classCache.get("SELECT 1 FROM t WHERE a = 2"); ok {
		t.Error("a plain read was cached")
	}

	c := newStatementCache()
	put := func(sql string) { c.put(sql, []Class{Read}) }
	for i := range 3 * cacheEntries {
		put(fmt.Sprintf("SELECT %d", i)) // seen once: not cached
		if i%100 == 0 {
			put("SELECT 0") // kept alive by use
			c.get("SELECT 0")
		}
	}
	if n := c.len(); n != 1 {
		t.Errorf("cache holds %d texts; want only the one put twice", n)
	}
	for i := range 3 * cacheEntries {
		put(fmt.Sprintf("SELECT %d", i))
		put(fmt.Sprintf("SELECT %d", i))
		if i%100 == 0 {
			c.get("SELECT 0")
		}
	}
	if n := c.len(); n > 2*cacheEntries {
		t.Errorf("cache holds %d texts", n)
	}
	if _, ok := c.get("SELECT 0"); !ok {
		t.Error("a text in use was evicted")
	}
	if _, ok := c.get("SELECT 1"); ok {
		t.Error("an unused old text is still cached")
	}
	big := newStatementCache()
	for i := range 100 {
		sql := fmt.Sprintf("%d%s", i, strings.Repeat("x", cacheMaxText-10))
		big.put(sql, nil)
		big.put(sql, nil)
	}
	if n := big.len(); n*cacheMaxText > 2*cacheBytes+cacheMaxText {
		t.Errorf("cache holds %d texts of 64 KiB", n)
	}
	huge := strings.Repeat("x", cacheMaxText+1)
	big.put(huge, nil)
	big.put(huge, nil)
	if _, ok := big.get(huge); ok {
		t.Error("a text over cacheMaxText was cached")
	}
}

// TestSideEffectFunctionsReviewed fails when DuckDB lists a VOLATILE
// function with side effects that callClasses and readEffects do not
// name: decide its class (until then it makes its queries writes).
func TestSideEffectFunctionsReviewed(t *testing.T) {
	if sqlParser() == nil {
		t.Fatalf("no parser: %v", parser.err)
	}
	for name := range parser.effects {
		if _, ok := callClasses[name]; !ok && !readEffects[name] {
			t.Errorf("DuckDB's VOLATILE function %s with side effects is not reviewed (classified as a write)", name)
		}
	}
	for _, name := range []string{"nextval", "setseed"} {
		if !parser.effects[name] {
			t.Errorf("DuckDB no longer lists %s as VOLATILE with side effects", name)
		}
	}
}

func TestClassifyMulti(t *testing.T) {
	got, err := Statements("BEGIN; INSERT INTO t VALUES (';'); -- done;\n SELECT * FROM t; COMMIT;")
	want := []textClass{
		{"BEGIN", Begin},
		{"INSERT INTO t VALUES (';')", Write},
		{"-- done;\n SELECT * FROM t", Read},
		{"COMMIT", Commit},
	}
	if err != nil || !reflect.DeepEqual(textClasses(got), want) {
		t.Errorf("Statements = %+v, %v\nwant %+v", textClasses(got), err, want)
	}
	if got, err := Statements(" ; -- nothing\n"); err != nil || len(got) != 0 {
		t.Errorf("Statements of empty text = %v, %v", got, err)
	}
	if _, err := Statements("SELECT 'unterminated"); err == nil {
		t.Error("Statements of an unterminated string: no error")
	}
}

// TestClassifyMatchesDuckDB runs each statement in a scratch database and
// checks the class against the statement type DuckDB reports for it.
func TestClassifyMatchesDuckDB(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, tt := range classifyTests {
		if tt.noRun {
			continue
		}
		sql := strings.ReplaceAll(tt.sql, "{dir}", dir)
		db, err := engine.Open("", engine.Options{Threads: 1, AllowExternalAccess: true})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		conn, err := db.Connect()
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		setup := "CREATE TABLE t (a INT, b VARCHAR); INSERT INTO t VALUES (1, 'x'); CREATE SEQUENCE s"
		if tt.before != "" {
			setup += "; " + strings.ReplaceAll(tt.before, "{dir}", dir)
		}
		if _, err := conn.Exec(ctx, setup); err != nil {
			t.Fatalf("%q: setup: %v", tt.sql, err)
		}
		res, err := conn.Query(ctx, sql)
		if err != nil {
			t.Errorf("%q: %v", tt.sql, err)
		} else {
			if err := Confirm(tt.want, res.StatementType()); err != nil {
				t.Errorf("%q: %v", tt.sql, err)
			}
			res.Close()
		}
		conn.Close()
		db.Close()
	}
}

// TestClassifyConcurrent runs Statements from many goroutines over shared and
// distinct texts (the parser's connection pool and the cache; run with
// -race).
func TestClassifyConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				sql := fmt.Sprintf("SELECT nextval('s'), %d", i%5)
				want := Write
				if g%2 == 0 {
					sql = fmt.Sprintf("SELECT lower(b) FROM t WHERE a = %d", g*100+i)
					want = Read
				}
				got, err := Statements(sql)
				if err != nil || len(got) != 1 || got[0].Class != want {
					t.Errorf("Statements(%q) = %v, %v", sql, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// Confirm checks a statement's class against DuckDB's own statement type
// for it (from a prepared statement or a Result, which bind the statement:
// tests use it). The class is finer than the type: a SELECT calling
// nextval() is a write, one calling setseed() a session statement, and
// COPY is a read when it only exports.
func Confirm(c Class, t engine.StatementType) error {
	var ok bool
	switch t {
	case engine.StatementTransaction:
		ok = c == Begin || c == Commit || c == Rollback
	case engine.StatementSelect, engine.StatementRelation:
		ok = c == Read || c == Write || c == Session || c == Node
	case engine.StatementExplain, engine.StatementCopy, engine.StatementMulti:
		// MULTI: a PIVOT without an IN list, which creates the ENUM of
		// the values it pivots on before it runs.
		ok = c == Read || c == Write
	case engine.StatementCall: // CHECKPOINT runs as CALL checkpoint()
		ok = c == Read || c == Write || c == Session || c == Node
	case engine.StatementExport:
		ok = c == Read
	case engine.StatementPragma:
		ok = c == Read || c == Refused
	case engine.StatementVariableSet, engine.StatementSet:
		ok = c == Session || c == Node || c == Refused
	case engine.StatementPrepare, engine.StatementVacuum, engine.StatementAnalyze:
		ok = c == Session
	case engine.StatementUpdateExtensions:
		ok = c == Node
	case engine.StatementCreate, engine.StatementDrop:
		// CREATE SECRET is node-local (a persistent one the whole
		// node's); DEALLOCATE runs as a DROP.
		ok = c == Write || c == Session || c == Node
	default:
		ok = c == Write
	}
	if !ok {
		return fmt.Errorf("classify: classified as %s but DuckDB parses a %s statement", c, t)
	}
	return nil
}

// textClass is a statement's text and class, as the tests compare them.
type textClass struct {
	text  string
	class Class
}

func textClasses(stmts []Statement) []textClass {
	var out []textClass
	for _, st := range stmts {
		out = append(out, textClass{st.Text, st.Class})
	}
	return out
}

// FuzzPlainInsert: a text that skips DuckDB's parser as a plain literal
// INSERT is never more than one statement to DuckDB, and never anything but
// a write where DuckDB's parser reads it.
func FuzzPlainInsert(f *testing.F) {
	for _, s := range []string{
		"INSERT INTO bench VALUES (1, 2, 'payload-1-2')",
		"insert into main.\"T\" (a, \"B\") VALUES (-1, NULL);;",
		"INSERT INTO t VALUES ('a;b'), ('it''s'), ('--x'), ('/*')",
		"INSERT INTO \"we\"\"ird;\" VALUES (?, $1, true, 1.5e3)",
		"INSERT INTO t VALUES (E'a\\'; DROP TABLE t; --')",
		"INSERT INTO t VALUES (1) /* ; */",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		lexed, err := sqltext.Split(sql)
		if err != nil || len(lexed) != 1 || !plainInsert(sql, lexed[0]) {
			return
		}
		n, err := sqlParser().Count(sql)
		if err != nil {
			return // rejected where it is applied, on every node alike
		}
		if n != 1 {
			t.Fatalf("%q: a plain INSERT that DuckDB splits into %d statements", sql, n)
		}
		if parsed, err := classifyTexts(sqlParser(), sql, lexed); err == nil && (len(parsed) != 1 || parsed[0].Class != Write) {
			t.Fatalf("%q: DuckDB's parser reads %v", sql, parsed)
		}
	})
}
