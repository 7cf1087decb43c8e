package analyze

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqltext"
)

var leaderTime = time.Date(2026, 11, 30, 20, 11, 50, 0, time.UTC)

// setup are objects as a database may hold them, created here with DuckDB
// directly: macros and views that hide what the lexer looks for (a quoted
// random() passed the lexer before it knew quoted calls; sampling and rowid
// in a view it never refused).
var setup = []string{
	"CREATE TABLE t (a INT, b INT)",
	"INSERT INTO t SELECT i, i FROM range(10) r(i)",
	"CREATE TABLE u (a INT)",
	"CREATE TABLE r (rowid INT, x INT)",
	"CREATE SEQUENCE s",
	`CREATE MACRO m(x) AS x + "random"()`,
	`CREATE MACRO mnow() AS "now"()`,
	"CREATE MACRO tm() AS TABLE SELECT * FROM pragma_database_size()",
	"CREATE VIEW vr AS SELECT random() AS r",
	"CREATE VIEW vs AS SELECT a FROM t USING SAMPLE 3 ROWS",
	"CREATE TABLE d (a INT, b DOUBLE DEFAULT m(1))",
	"CREATE MACRO total() AS (SELECT sum(b) FROM t)",
	"CREATE MACRO whereami() AS current_schema()",
}

func newAnalyzer(t *testing.T) *Analyzer {
	t.Helper()
	db, err := engine.Open("", engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, s := range setup {
		if _, err := c.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	pool := engine.NewPool(db, 2)
	t.Cleanup(func() { pool.Close() })
	return New(pool)
}

// volatile is what DuckDB 2.0 lists as VOLATILE.
var volatile = sqltext.Volatile{
	"current_connection_id": true, "current_query": true, "current_query_id": true,
	"current_transaction_id": true, "currval": true, "error": true, "gen_random_uuid": true,
	"nextval": true, "random": true, "setseed": true, "setval": true, "sleep_ms": true, "stats": true,
	"uuid": true, "uuidv4": true, "uuidv7": true, "vector_type": true, "write_log": true,
}

// TestNestedSchemas: DuckDB 2.0 nests a schema in another (CREATE SCHEMA
// s.child), and the cluster replicates what it holds, but not a macro in a
// nested schema, which duckdb_functions() names by the schema's own name
// alone, so a snapshot could not tell two schemas of one name apart.
func TestNestedSchemas(t *testing.T) {
	a := newAnalyzer(t)
	for _, sql := range []string{"CREATE SCHEMA flat", "CREATE SCHEMA flat.child", "CREATE SCHEMA memory.flat.child2"} {
		if _, err := decide(t, a, sql); err != nil {
			t.Errorf("%s: %v", sql, err)
		}
	}
	conn, err := a.pool.DB().Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Exec(context.Background(), "CREATE SCHEMA p; CREATE SCHEMA p.c; CREATE SCHEMA memory; CREATE SCHEMA system_"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sql     string
		refused bool
	}{
		{"CREATE MACRO p.m(x) AS x", false},
		{"CREATE MACRO m2(x) AS x", false},
		{"CREATE TABLE p.c.t(i INTEGER)", false},
		{"CREATE SCHEMA p.c.d", false},
		{"CREATE SCHEMA main.child", true},
		{"CREATE SCHEMA memory.main.child", true},
		{"CREATE SCHEMA IF NOT EXISTS main", false},
		{"CREATE SCHEMA system_.child", false},
		{"CREATE SCHEMA memory.memory.child", true},
		{"CREATE MACRO p.c.m(x) AS x", true},
		{"CREATE FUNCTION memory.p.c.f(x) AS x", true},
		{"CREATE MACRO p.c.tm() AS TABLE SELECT 1", true},
	} {
		_, err := decide(t, a, tc.sql)
		if got := errors.Is(err, ErrUnsupported); got != tc.refused {
			t.Errorf("%s: %v, want refused %v", tc.sql, err, tc.refused)
		}
		if !tc.refused && err != nil {
			t.Errorf("%s: %v", tc.sql, err)
		}
	}
}

// TestTriggers: every node runs a trigger's action (DuckDB 2.0) whenever
// its table changes, through literal INSERTs and appends too, so an action
// that would compute differently on each node is refused when the trigger
// is created, and one that computes the same is accepted.
func TestTriggers(t *testing.T) {
	a := newAnalyzer(t)
	conn, err := a.pool.DB().Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Exec(context.Background(), `CREATE TABLE src(i INTEGER, added TIMESTAMP DEFAULT now());
		CREATE TABLE audit(i INTEGER, note VARCHAR); CREATE SCHEMA p; CREATE SCHEMA p.c; CREATE TABLE p.c.t(i INTEGER);
		CREATE MACRO pick() AS TABLE SELECT i FROM src LIMIT 1`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sql     string
		refused bool
	}{
		{"CREATE TRIGGER ok_stmt AFTER INSERT ON src INSERT INTO audit VALUES (1, 'inserted')", false},
		{"CREATE TRIGGER ok_row AFTER INSERT ON src FOR EACH ROW INSERT INTO audit VALUES (NEW.i, 'row')", false},
		{"CREATE TRIGGER ok_count AFTER DELETE ON src INSERT INTO audit SELECT count(*)::INTEGER, 'left' FROM src", false},
		{"CREATE TRIGGER ok_nested AFTER INSERT ON p.c.t FOR EACH ROW INSERT INTO audit VALUES (NEW.i, 'nested')", false},
		{"CREATE TRIGGER ok_update AFTER UPDATE ON src FOR EACH ROW INSERT INTO audit VALUES (NEW.i, 'updated')", false},
		{"CREATE TRIGGER numbered AFTER INSERT ON src INSERT INTO audit SELECT row_number() OVER ()::INTEGER, 'n' FROM src", true},
		{"CREATE TRIGGER first_row AFTER INSERT ON src INSERT INTO audit SELECT i, 'first' FROM src LIMIT 1", true},
		{"CREATE TRIGGER via_macro AFTER UPDATE ON src INSERT INTO audit SELECT i, 'm' FROM pick()", true},
		{"CREATE TRIGGER sampled AFTER INSERT ON src INSERT INTO audit SELECT i, 's' FROM src USING SAMPLE 1 ROWS", true},
		{"CREATE TRIGGER rowids AFTER INSERT ON src INSERT INTO audit SELECT rowid::INTEGER, 'r' FROM src", true},
		{"CREATE TRIGGER clock AFTER INSERT ON src INSERT INTO audit VALUES (1, now()::VARCHAR)", true},
		{"CREATE TRIGGER local AFTER DELETE ON src INSERT INTO audit SELECT 1, current_setting('threads')::VARCHAR", true},
	} {
		_, err := decide(t, a, tc.sql)
		if got := errors.Is(err, sqltext.ErrNondeterministic); got != tc.refused || !tc.refused && err != nil {
			t.Errorf("%s: %v, want refused %v", tc.sql, err, tc.refused)
		}
	}
}

// decide is the leader's decision, as routing makes it. The lexed text
// Decide hands on for the proof must be the plan's SQL as the lexer reads
// it, since the proof runs it in place of lexing the SQL again.
func decide(t *testing.T, a *Analyzer, sql string) (sqltext.Plan, error) {
	t.Helper()
	plan, text, err := a.Decide(context.Background(), sqltext.Parse(sql), leaderTime, volatile, slog.New(slog.DiscardHandler))
	if err == nil && text.Text != "" && (text.Text != plan.SQL || !slices.Equal(text.Tokens(), sqltext.Parse(plan.SQL).Tokens())) {
		t.Fatalf("Decide(%q) handed on %q lexed as its plan's text, want %q", sql, text.Text, plan.SQL)
	}
	if err == nil && plan.Materialize != nil && text.Text != "" {
		t.Fatalf("Decide(%q) handed on %q lexed for a materialized plan", sql, text.Text)
	}
	return plan, err
}

// TestDecideHandsOnItsText: the lexed text Decide hands on for the proof
// is the statement as the client's node lexed it when the plan keeps its
// text, the rewritten one when the clock's rewrite changed it, and none
// where the plan's text is not one Decide lexed.
func TestDecideHandsOnItsText(t *testing.T) {
	a := newAnalyzer(t)
	for _, c := range []struct {
		sql   string
		same  bool // the plan keeps the client's text
		lexed bool // Decide hands on a lexed text
	}{
		{sql: "UPDATE t SET b = b + 1 WHERE a > 3", same: true, lexed: true},
		{sql: "INSERT INTO u SELECT a FROM t", same: true, lexed: true},
		{sql: "UPDATE t SET b = epoch(now())::INT", lexed: true},
		{sql: "INSERT INTO u SELECT (random() * 10)::INT"},
		{sql: "CREATE VIEW vv AS SELECT a FROM t"},
	} {
		st := sqltext.Parse(c.sql)
		plan, text, err := a.Decide(context.Background(), st, leaderTime, volatile, slog.New(slog.DiscardHandler))
		switch {
		case err != nil:
			t.Errorf("%s: %v", c.sql, err)
		case c.lexed != (text.Text != ""):
			t.Errorf("%s: handed on %q lexed, want a lexed text: %v", c.sql, text.Text, c.lexed)
		case c.lexed && text.Text != plan.SQL:
			t.Errorf("%s: handed on %q lexed for the plan %q", c.sql, text.Text, plan.SQL)
		case c.same && (plan.SQL != c.sql || !slices.Equal(text.Tokens(), st.Tokens())):
			t.Errorf("%s: the plan %q does not keep the client's lexed statement", c.sql, plan.SQL)
		case !c.same && c.lexed && plan.SQL == c.sql:
			t.Errorf("%s: the clock's rewrite changed nothing", c.sql)
		}
	}
}

// TestDivergenceClasses: each statement, accepted by the lexer's rules
// alone, would leave replicas with different data; DuckDB's binder finds
// why.
func TestDivergenceClasses(t *testing.T) {
	a := newAnalyzer(t)
	tests := []struct {
		class, sql, why string // why "" = materialized on the leader
	}{
		{"macro", "UPDATE t SET b = m(a)", "random() in UPDATE"},
		{"macro", "DELETE FROM t WHERE m(0) < 0.5", "random() in DELETE"},
		{"macro", "CREATE TABLE c AS SELECT m(1) AS x", "random() in CREATE TABLE … AS"},
		{"macro", "INSERT INTO u SELECT m(1)::INT", ""},
		{"macro clock", "CREATE TABLE c AS SELECT mnow() AS x", "now() in CREATE TABLE … AS"},
		{"macro clock", "UPDATE t SET b = epoch(mnow())::INT", "now() in UPDATE"},
		{"macro clock", "INSERT INTO u SELECT epoch(mnow())::INT", ""},
		{"view", "UPDATE t SET b = (SELECT (r * 10)::INT FROM vr)", "random() in UPDATE"},
		{"view", "CREATE TABLE c AS SELECT * FROM vr", "random() in CREATE TABLE … AS"},
		{"default", "UPDATE d SET b = DEFAULT", "random() in UPDATE"},
		{"sample", "DELETE FROM t WHERE a IN (SELECT a FROM t USING SAMPLE 3 ROWS)", "sampling"},
		{"sample", "UPDATE t SET b = 0 WHERE a IN (SELECT a FROM t TABLESAMPLE reservoir(3 ROWS))", "sampling"},
		{"sample", "CREATE TABLE c AS SELECT * FROM t USING SAMPLE 50%", "sampling"},
		{"sample", "DELETE FROM t WHERE a IN (SELECT a FROM vs)", "sampling"},
		{"sample", "INSERT INTO u SELECT a FROM t USING SAMPLE 3 ROWS", ""},
		{"node-local", "UPDATE t SET b = (SELECT count(*) FROM pragma_database_size())", "pragma_database_size()"},
		{"node-local", "DELETE FROM t WHERE a > (SELECT count(*) FROM duckdb_functions())", "duckdb_functions()"},
		{"node-local", "UPDATE t SET b = (SELECT count(*) FROM test_all_types())", "test_all_types() in UPDATE"},
		{"node-local", "UPDATE t SET b = (SELECT count(*) FROM tm())", "pragma_database_size() in UPDATE"},
		{"node-local", "CREATE TABLE c AS SELECT * FROM tm()", "pragma_database_size() in CREATE TABLE"},
		{"node-local", "INSERT INTO u SELECT count(*) FROM tm()", ""},
		{"rowid", "UPDATE t SET b = 1 WHERE rowid = 0", "rowid in UPDATE"},
		{"rowid", `DELETE FROM t WHERE "rowid" < 2`, "rowid in DELETE"},
		{"rowid", "UPDATE t SET b = rowid", "rowid in UPDATE"},
		{"rowid", "CREATE TABLE c AS SELECT rowid AS r FROM t", "rowid in CREATE TABLE"},
		{"rowid", "INSERT INTO u SELECT rowid FROM t", ""},
		{"hidden scan", "INSERT INTO u VALUES (total())", ""},
		{"session", "INSERT INTO u SELECT length(whereami())", "current_schema() in INSERT, through whereami(), depends on the client's session"},
		{"session", "UPDATE t SET b = length(whereami())", "current_schema() in UPDATE"},
		{"hidden scan", "CREATE TABLE c AS VALUES (total())", "a query hidden in a macro in CREATE TABLE"},
		// The hunter's "unordered" writes: after a snapshot restore the
		// replicas store rows in another order.
		{"scan order", "UPDATE t SET b = (SELECT b FROM t LIMIT 1 OFFSET 7) WHERE a = 2", "LIMIT or OFFSET without ORDER BY in UPDATE"},
		{"scan order", "UPDATE t SET b = (SELECT length(string_agg(a::VARCHAR, ',')) FROM (SELECT a FROM t ORDER BY a LIMIT 3)) WHERE a = 1", "string_agg() without ORDER BY in the call in UPDATE"},
		{"scan order", "INSERT INTO u SELECT any_value(a) FROM t", ""},
		{"scan order", "CREATE TABLE c AS SELECT * FROM t LIMIT 3", "LIMIT or OFFSET without ORDER BY in CREATE TABLE"},
		{"scan order", "DELETE FROM t WHERE a IN (SELECT a FROM t LIMIT 2)", "LIMIT or OFFSET without ORDER BY in DELETE"},
		{"scan order", "UPDATE t SET b = (SELECT first(a) FROM t)", "first() without ORDER BY"},
		{"scan order", "CREATE TABLE c AS SELECT a, row_number() OVER () AS n FROM t", "row_number() over a window without ORDER BY"},
		{"scan order", "CREATE TABLE c AS SELECT list(a) AS l FROM t", "list() without ORDER BY"},
		{"scan order", "CREATE TABLE c AS SELECT list_sort(list(a)) AS s, list(b) AS l FROM t", "list() without ORDER BY"},
		{"scan order", "INSERT INTO u SELECT a FROM t LIMIT 1", ""},
	}
	for _, tt := range tests {
		plan, err := decide(t, a, tt.sql)
		switch {
		case tt.why == "" && (err != nil || plan.Materialize == nil):
			t.Errorf("%s: %s = %+v, %v; want a Materialize plan", tt.class, tt.sql, plan, err)
		case tt.why != "" && (!errors.Is(err, sqltext.ErrNondeterministic) || !strings.Contains(err.Error(), tt.why)):
			t.Errorf("%s: %s error = %v\nwant ErrNondeterministic with %q", tt.class, tt.sql, err, tt.why)
		}
	}
}

// TestOrderedWritesPass: writes that order the rows they take, or take
// them from a table function whose order is its arguments', are neither
// refused nor materialized.
func TestOrderedWritesPass(t *testing.T) {
	a := newAnalyzer(t)
	for _, sql := range []string{
		"UPDATE t SET b = (SELECT b FROM t ORDER BY a LIMIT 1 OFFSET 7) WHERE a = 2",
		"UPDATE t SET b = (SELECT b FROM t WHERE a = 3)",
		"UPDATE t SET b = (SELECT length(string_agg(a::VARCHAR, ',' ORDER BY a)) FROM t) WHERE a = 1",
		"CREATE TABLE c AS SELECT a, row_number() OVER (ORDER BY a) AS n FROM t",
		"CREATE TABLE c AS SELECT * FROM range(10) LIMIT 3",
		"CREATE TABLE c AS SELECT a, b FROM t ORDER BY a LIMIT 3",
		"INSERT INTO u SELECT a FROM t ORDER BY a LIMIT 1",
		"DELETE FROM t WHERE a IN (SELECT max(a) FROM t)",
		// The binder computes this as list_sort(list(b)).
		"CREATE TABLE c AS SELECT list(b ORDER BY b) AS l FROM t",
		"CREATE TABLE c AS SELECT a, list_sort(list(b)) AS l FROM t GROUP BY a",
	} {
		plan, err := decide(t, a, sql)
		if err != nil || plan.Materialize != nil {
			t.Errorf("%s = %+v, %v; want it applied as written", sql, plan, err)
		}
	}
}

// TestUnboundFallsBackToText: a statement naming a table DuckDB does not
// know yet (created earlier in the same client transaction) is decided by
// its text, which still shows sampling and rowid.
func TestUnboundFallsBackToText(t *testing.T) {
	a := newAnalyzer(t)
	tests := []struct{ sql, why string }{
		{"DELETE FROM nosuch WHERE a IN (SELECT a FROM nosuch USING SAMPLE 2 ROWS)", "sampling (USING SAMPLE, TABLESAMPLE) in DELETE"},
		{"UPDATE nosuch SET b = rowid", "rowid in UPDATE"},
		{"CREATE TABLE c2 AS SELECT * FROM nosuch TABLESAMPLE 10%", "sampling (USING SAMPLE, TABLESAMPLE) in CREATE TABLE"},
		{"MERGE INTO nosuch USING t ON nosuch.rowid = t.a WHEN MATCHED THEN DELETE", "rowid in MERGE"},
		{"INSERT INTO nosuch SELECT a FROM nosuch USING SAMPLE 2 ROWS", ""},
	}
	for _, tt := range tests {
		if _, err := a.Analyze(context.Background(), sqltext.Parse(tt.sql)); !errors.Is(err, ErrUnbound) {
			t.Fatalf("Analyze(%q) = %v, want ErrUnbound", tt.sql, err)
		}
		plan, err := decide(t, a, tt.sql)
		switch {
		case tt.why == "" && (err != nil || plan.Materialize == nil):
			t.Errorf("%s = %+v, %v; want a Materialize plan", tt.sql, plan, err)
		case tt.why != "" && (!errors.Is(err, sqltext.ErrNondeterministic) || !strings.Contains(err.Error(), tt.why)):
			t.Errorf("%s error = %v\nwant ErrNondeterministic with %q", tt.sql, err, tt.why)
		}
	}
}

// TestDeterministicWritesPass: writes the same on every replica stay as
// the lexer's rules make them.
func TestDeterministicWritesPass(t *testing.T) {
	a := newAnalyzer(t)
	for _, sql := range []string{
		"UPDATE t SET b = a + 1",
		"DELETE FROM t WHERE a = 1",
		"DELETE FROM t",
		"UPDATE t SET b = 2 WHERE a IN (SELECT i FROM range(3) r(i))",
		"INSERT INTO u SELECT a FROM t",
		"INSERT INTO u VALUES (1), (-2), (NULL)",
		"UPDATE t SET b = nextval('s')",
		"CREATE TABLE c AS SELECT now() AS x, count(*) AS n FROM t",
		"MERGE INTO u USING t ON u.a = t.a WHEN MATCHED THEN UPDATE SET a = t.b",
		"UPDATE r SET x = rowid WHERE rowid = 1", // a real column named rowid
		"CREATE INDEX i ON t (a)",
		"INSERT INTO nosuch VALUES (1)", // unbound: the lexer decides
		"SELECT nextval('s')",
		"CREATE SCHEMA sc",
		"CREATE TYPE e AS ENUM ('x', 'y')",
		"CREATE SEQUENCE s2",
		"ALTER TABLE u RENAME TO u2",
		"ALTER TABLE t ADD COLUMN z INT DEFAULT 1",
		"ALTER TABLE t ALTER COLUMN b SET DEFAULT 7",
		"COMMENT ON TABLE t IS 'x'",
		"TRUNCATE t",
		"DROP TABLE IF EXISTS r",
		"CREATE TABLE n (a INT PRIMARY KEY, b VARCHAR DEFAULT 'x', c INT GENERATED ALWAYS AS (a * 2))",
		"CREATE OR REPLACE VIEW w AS SELECT a FROM t",
		"INSERT INTO t VALUES (1, 2) ON CONFLICT DO NOTHING",
		"UPDATE t SET b = b + 1 RETURNING a",
	} {
		plan, err := decide(t, a, sql)
		if err != nil || plan.Materialize != nil {
			t.Errorf("%s = %+v, %v; want accepted as a statement", sql, plan, err)
		}
	}
}

func BenchmarkAnalyze(b *testing.B) {
	db, err := engine.Open("", engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	c, _ := db.Connect()
	c.Exec(context.Background(), "CREATE TABLE bench (id BIGINT, seq BIGINT, payload VARCHAR)")
	c.Close()
	// A pool that keeps no idle connection connects for every statement,
	// as the analyzer did before it had a pool. The two alternate, so that
	// the machine's load leans on neither.
	pooled, each := engine.NewPool(db, 2), engine.NewPool(db, 0)
	defer pooled.Close()
	defer each.Close()
	var took [2]time.Duration
	for b.Loop() {
		for i, a := range []*Analyzer{New(pooled), New(each)} {
			t0 := time.Now()
			if _, err := a.Analyze(context.Background(), sqltext.Parse("INSERT INTO bench VALUES (1, 2, 'payload-1-2')")); err != nil {
				b.Fatal(err)
			}
			took[i] += time.Since(t0)
		}
	}
	b.ReportMetric(float64(took[0].Microseconds())/1000/float64(b.N), "pooled-ms")
	b.ReportMetric(float64(took[1].Microseconds())/1000/float64(b.N), "connect-each-ms")
}

// BenchmarkDefinedCalls is the part of Analyze that reads the definitions
// of the macros and views a statement may name: duckdb_views() for a text
// that calls nothing, and duckdb_functions() too, which lists every
// function DuckDB has, for one that calls a function.
func BenchmarkDefinedCalls(b *testing.B) {
	db, err := engine.Open("", engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	c, err := db.Connect()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	pool := engine.NewPool(db, 1)
	defer pool.Close()
	a := New(pool)
	for _, sql := range []string{"INSERT INTO bench VALUES (1, 2, 'payload-' || 1)", "INSERT INTO bench VALUES (1, 2, upper('payload'))"} {
		b.Run(sql, func(b *testing.B) {
			for b.Loop() {
				if _, err := a.definedCallsOn(context.Background(), c, sqltext.Parse(sql)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestViewReplicatedAsStored: a CREATE VIEW or CREATE TABLE is replicated
// as the text DuckDB stores for it, whose own rendering is the same text
// again, so a node that applies it and a node that recreates the object
// from a snapshot store the same text.
func TestViewReplicatedAsStored(t *testing.T) {
	a := newAnalyzer(t)
	c, err := a.pool.DB().Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	tests := []struct{ sql, kind, prefix string }{
		// DuckDB's parser spells INTERVAL 1 DAY as to_days(CAST(trunc(CAST(1
		// AS DOUBLE)) AS INTEGER)), and its rendering of that quotes DOUBLE.
		{`CREATE VIEW v1 AS SELECT * FROM "range"(TIMESTAMP '2024-01-01', TIMESTAMP '2024-01-02', INTERVAL 1 DAY)`, "VIEW", "CREATE VIEW v1 AS"},
		{`CREATE OR REPLACE VIEW v2 AS SELECT a, DATE '2024-01-01' + INTERVAL 3 HOUR AS h FROM t`, "VIEW", "CREATE OR REPLACE VIEW v2 AS"},
		{`CREATE TABLE t3(a TIMESTAMP DEFAULT TIMESTAMP '2024-01-01' + INTERVAL 1 DAY, b INT GENERATED ALWAYS AS (epoch(a + INTERVAL 2 DAY)))`, "TABLE", "CREATE TABLE t3("},
		{`CREATE TRIGGER tr4 AFTER INSERT ON t INSERT INTO t3(a) VALUES (TIMESTAMP '2024-01-01' + INTERVAL 1 DAY)`, "TRIGGER", "CREATE TRIGGER tr4 "},
	}
	for _, tt := range tests {
		plan, err := decide(t, a, tt.sql)
		if err != nil || !strings.HasPrefix(plan.SQL, tt.prefix) {
			t.Fatalf("%s: %q, %v", tt.sql, plan.SQL, err)
		}
		if _, err := c.Exec(ctx, plan.SQL); err != nil {
			t.Fatalf("%s: %v", plan.SQL, err)
		}
		stored := newestSQL(t, c, tt.kind)
		// A snapshot restore recreates the object from its stored text.
		if _, err := c.Exec(ctx, "CREATE OR REPLACE "+tt.kind+" "+strings.TrimPrefix(stored, "CREATE "+tt.kind+" ")); err != nil {
			t.Fatal(err)
		}
		if restored := newestSQL(t, c, tt.kind); restored != stored {
			t.Errorf("applied: %s\nrestored: %s", stored, restored)
		}
	}
	// IF NOT EXISTS over an existing view creates nothing: as written.
	const again = "CREATE VIEW IF NOT EXISTS v1 AS SELECT 1"
	if plan, err := decide(t, a, again); err != nil || plan.SQL != again {
		t.Errorf("%s: %q, %v", again, plan.SQL, err)
	}
}

func newestSQL(t *testing.T, c *engine.Conn, kind string) string {
	t.Helper()
	out, err := c.QueryStrings(context.Background(), newest[kind])
	if err != nil || len(out) != 1 {
		t.Fatalf("newest %s: %v, %v", kind, out, err)
	}
	_, sql, _ := strings.Cut(out[0], " ")
	return sql
}

// TestPooledConnectionClean: the analyzer binds every statement on one
// pooled connection, and what it runs there to judge a CREATE VIEW, TABLE
// or TRIGGER (the statement itself, in a transaction it rolls back, which
// a failing statement may abort first) leaves nothing behind: the connection
// is reused, outside any transaction, and the objects are gone.
func TestPooledConnectionClean(t *testing.T) {
	a := newAnalyzer(t)
	ctx := context.Background()
	first, err := a.pool.Get()
	if err != nil {
		t.Fatal(err)
	}
	a.pool.Put(first)
	for _, sql := range []string{
		"CREATE VIEW leak_v AS SELECT a FROM t",
		"CREATE TABLE leak_t(a INTEGER DEFAULT 1 + 1)",
		"CREATE TRIGGER leak_tr AFTER INSERT ON t INSERT INTO leak_t VALUES (1)",
		// Bound, then failing in the transaction (the names exist).
		"CREATE VIEW vr AS SELECT 1",
		"CREATE TABLE t(a INTEGER)",
		"INSERT INTO t VALUES (1 + 1, 2)",
	} {
		if _, err := decide(t, a, sql); err != nil {
			t.Logf("%s: %v", sql, err)
		}
		c, err := a.pool.Get()
		if err != nil {
			t.Fatal(err)
		}
		if c != first {
			t.Fatalf("after %s: the analyzer's connection was not reused", sql)
		}
		if c.InTransaction() {
			t.Fatalf("after %s: the pooled connection is in a transaction", sql)
		}
		left, err := c.QueryStrings(ctx, `SELECT name FROM (SELECT view_name AS name FROM duckdb_views() UNION ALL
			SELECT table_name FROM duckdb_tables() UNION ALL SELECT trigger_name FROM duckdb_triggers()) WHERE name LIKE 'leak%'`)
		if err != nil || len(left) > 0 {
			t.Fatalf("after %s: objects left: %v, %v", sql, left, err)
		}
		// Autocommit: another connection sees what this one creates.
		if _, err := c.Exec(ctx, "CREATE TABLE autocommit_probe(i INTEGER)"); err != nil {
			t.Fatalf("after %s: %v", sql, err)
		}
		other, err := a.pool.DB().Connect()
		if err != nil {
			t.Fatal(err)
		}
		seen, err := other.QueryStrings(ctx, "SELECT table_name FROM duckdb_tables() WHERE table_name = 'autocommit_probe'")
		other.Close()
		if err != nil || len(seen) != 1 {
			t.Fatalf("after %s: a table created on the pooled connection is not visible elsewhere: %v, %v", sql, seen, err)
		}
		if _, err := c.Exec(ctx, "DROP TABLE autocommit_probe"); err != nil {
			t.Fatal(err)
		}
		a.pool.Put(c)
	}
}

// TestMacroNeedsParentheses: definedCalls reads macro definitions only for
// the names a text calls, which holds while DuckDB binds a macro, scalar or
// table, only where it is called: a bare name is a column or a table. And
// a macro called from a view's body or another macro's is still found.
func TestMacroNeedsParentheses(t *testing.T) {
	a := newAnalyzer(t)
	ctx := context.Background()
	c, err := a.pool.DB().Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Exec(ctx, `CREATE MACRO m0() AS 42; CREATE MACRO tm0() AS TABLE SELECT 42 AS x;
		CREATE VIEW vw AS SELECT length(whereami()) AS n; CREATE MACRO outer_m() AS whereami() || 'x'`); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{"INSERT INTO u SELECT m0", "INSERT INTO u VALUES (m0)", "INSERT INTO u SELECT x FROM tm0",
		"INSERT INTO u SELECT * FROM tm0", `INSERT INTO u SELECT "m0"`, "INSERT INTO u SELECT main.m0"} {
		if _, err := c.Exec(ctx, sql); err == nil {
			t.Errorf("%s: DuckDB bound a macro named without parentheses", sql)
		}
	}
	for _, sql := range []string{"INSERT INTO u SELECT m0()", "INSERT INTO u SELECT x FROM tm0()", `INSERT INTO u SELECT "m0" ()`} {
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Errorf("%s: %v", sql, err)
		}
	}
	for _, tc := range []struct {
		sql  string
		want []string
	}{
		{"INSERT INTO u SELECT length(whereami())", []string{"current_schema"}},
		{"INSERT INTO u SELECT n FROM vw", []string{"length", "whereami", "current_schema"}},
		{"INSERT INTO u SELECT length(outer_m())", []string{"whereami", "current_schema"}},
		{"INSERT INTO u SELECT /* a comment */ main . whereami /* between */ ()", []string{"current_schema"}},
		{"INSERT INTO u VALUES (1 + 1)", nil},
		{"INSERT INTO u SELECT whereami FROM t", nil},
	} {
		defined, err := a.definedCallsOn(ctx, c, sqltext.Parse(tc.sql))
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		var got []string
		for _, d := range defined {
			got = append(got, d.name)
		}
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("%s: calls %v, want %s among them", tc.sql, got, w)
			}
		}
		if tc.want == nil && len(got) > 0 {
			t.Errorf("%s: calls %v, want none", tc.sql, got)
		}
	}
}

// TestNonFunctionKeywords: macroCandidates leaves out the names DuckDB
// never binds as a call: its reserved keywords, as duckdb_keywords() lists
// them, and VALUES. Each is checked against the engine: a macro of that
// name (quoted) exists, and the unquoted name before a parenthesis does
// not call it.
func TestNonFunctionKeywords(t *testing.T) {
	a := newAnalyzer(t)
	ctx := context.Background()
	c, err := a.pool.DB().Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reserved, err := c.QueryStrings(ctx, "SELECT keyword_name FROM duckdb_keywords() WHERE keyword_category = 'reserved'")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range reserved {
		if !nonFunctionKeywords[k] {
			t.Errorf("reserved keyword %s is missing from nonFunctionKeywords", k)
		}
	}
	for k := range nonFunctionKeywords {
		if k != "values" && !slices.Contains(reserved, k) {
			t.Errorf("%s is not a reserved keyword of this DuckDB: a macro may be called by it", k)
		}
		q := `"` + k + `"`
		if _, err := c.Exec(ctx, "CREATE MACRO "+q+"(x) AS 'user macro'"); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if out, err := c.QueryStrings(ctx, "SELECT "+q+"(1)"); err != nil || len(out) != 1 || out[0] != "user macro" {
			t.Fatalf("the quoted macro %s: %v, %v", q, out, err)
		}
		for _, sql := range []string{"SELECT " + k + "(1)", "SELECT * FROM (VALUES (" + k + "(1)))", "SELECT 1 WHERE 'user macro' = " + k + "(1)"} {
			if out, err := c.QueryStrings(ctx, sql); err == nil && slices.Contains(out, "user macro") {
				t.Errorf("%s called the macro %s", sql, q)
			}
		}
		if _, err := c.Exec(ctx, "DROP MACRO "+q); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMacroCandidates(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		want []string
	}{
		{"INSERT INTO bench VALUES (1, 2, 'payload-' || 1)", nil},
		{"INSERT INTO bench (thread, seq) VALUES (1, 2)", nil},
		{`INSERT OR REPLACE INTO main."bench" (thread) VALUES (1)`, nil},
		{"INSERT INTO bench SELECT * FROM (VALUES (1, 2)) v(a, b) WHERE a IN (1, 2)", []string{"v"}},
		{"INSERT INTO bench VALUES (upper('x'), m(1))", []string{"upper", "m"}},
		{`INSERT INTO bench VALUES ("select"(1), "Mixed""Q"(2))`, []string{"select", `mixed"q`}},
		{"INSERT INTO bench SELECT x FROM tm() JOIN s.tm2 /* c */ (1) ON true", []string{"tm", "tm2"}},
		{"UPDATE bench SET seq = CAST(seq AS BIGINT) + coalesce(seq, 0)", []string{"coalesce"}},
	} {
		if got := macroCandidates(sqltext.Parse(tc.sql)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.sql, got, tc.want)
		}
	}
}
