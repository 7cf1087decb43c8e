package sqltext

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/engine"
)

// leaderTime is the timestamp the tests give the leader: late in the UTC
// day, so that a replica in a zone ahead of UTC would see another date.
var leaderTime = time.Date(2026, 11, 30, 20, 11, 50, 123456789, time.UTC)

// testVolatile is what DuckDB 2.0 lists as VOLATILE.
var testVolatile = Volatile{
	"current_connection_id": true, "current_query": true, "current_query_id": true,
	"current_transaction_id": true, "currval": true, "error": true, "gen_random_uuid": true,
	"nextval": true, "random": true, "setseed": true, "setval": true, "sleep_ms": true, "stats": true,
	"uuid": true, "uuidv4": true, "uuidv7": true, "vector_type": true, "write_log": true,
}

func TestDeterministicRewrite(t *testing.T) {
	const tstz = "TIMESTAMPTZ '2026-11-30 20:11:50.123456+00'"
	tests := []struct{ sql, want string }{
		{"INSERT INTO t VALUES (now())", "INSERT INTO t VALUES (" + tstz + ")"},
		{"insert into t values (NOW ( ))", "insert into t values (" + tstz + ")"},
		{"INSERT INTO t SELECT current_timestamp, get_current_timestamp(), transaction_timestamp()",
			"INSERT INTO t SELECT " + tstz + ", " + tstz + ", " + tstz},
		{"INSERT INTO t VALUES (current_date, today(), current_date())",
			"INSERT INTO t VALUES (DATE '2026-11-30', DATE '2026-11-30', DATE '2026-11-30')"},
		{"INSERT INTO t VALUES (current_time, get_current_time(), localtime, current_localtime())",
			"INSERT INTO t VALUES (TIMETZ '20:11:50.123456+00', TIMETZ '20:11:50.123456+00', TIME '20:11:50.123456', TIME '20:11:50.123456')"},
		{"INSERT INTO t VALUES (localtimestamp, current_localtimestamp())",
			"INSERT INTO t VALUES (TIMESTAMP '2026-11-30 20:11:50.123456', TIMESTAMP '2026-11-30 20:11:50.123456')"},
		{"INSERT INTO t VALUES (epoch_ms(now()))", "INSERT INTO t VALUES (epoch_ms(" + tstz + "))"},
		{"UPDATE t SET seen = now() WHERE ts < now() - INTERVAL 1 DAY",
			"UPDATE t SET seen = " + tstz + " WHERE ts < " + tstz + " - INTERVAL 1 DAY"},
		{"DELETE FROM t WHERE d < current_date", "DELETE FROM t WHERE d < DATE '2026-11-30'"},
		{"CREATE TABLE s AS SELECT now() AS at", "CREATE TABLE s AS SELECT " + tstz + " AS at"},
		// Strings, quoted identifiers, comments and qualified names are not calls.
		{"INSERT INTO t VALUES ('now()', $$current_date$$, E'today()\\'') -- now()",
			"INSERT INTO t VALUES ('now()', $$current_date$$, E'today()\\'') -- now()"},
		{`/* now() /* current_date */ */ UPDATE t SET "now" = t.current_date`,
			`/* now() /* current_date */ */ UPDATE t SET "now" = t.current_date`},
		{"INSERT INTO t SELECT now AS x FROM t2", "INSERT INTO t SELECT now AS x FROM t2"},
		// Sequences and plain data are replicated as written.
		{"INSERT INTO t VALUES (nextval('s'), 1)", "INSERT INTO t VALUES (nextval('s'), 1)"},
		{"SELECT nextval('s')", "SELECT nextval('s')"},
		{"CREATE TABLE t (id INTEGER DEFAULT nextval('s'), x VARCHAR)", "CREATE TABLE t (id INTEGER DEFAULT nextval('s'), x VARCHAR)"},
		{"UPDATE t SET x = 1;", "UPDATE t SET x = 1;"},
		// Objects named like volatile functions are not calls.
		{"CREATE TABLE uuid (a INT)", "CREATE TABLE uuid (a INT)"},
		{"CREATE TABLE IF NOT EXISTS main.random (a INT)", "CREATE TABLE IF NOT EXISTS main.random (a INT)"},
		{"INSERT INTO random (a) VALUES (1)", "INSERT INTO random (a) VALUES (1)"},
		// FROM inside trim() and substring() does not name a file.
		{"UPDATE t SET s = trim(both 'x' FROM s), u = substring(s FROM 'a.')", "UPDATE t SET s = trim(both 'x' FROM s), u = substring(s FROM 'a.')"},
		{"EXPLAIN INSERT INTO t VALUES (random())", "EXPLAIN INSERT INTO t VALUES (random())"},
	}
	for _, tt := range tests {
		plan, err := Deterministic(Parse(tt.sql), leaderTime, testVolatile)
		if err != nil {
			t.Errorf("Deterministic(%q): %v", tt.sql, err)
			continue
		}
		if plan.Materialize != nil || plan.SQL != tt.want {
			t.Errorf("Deterministic(%q)\n got %q %+v\nwant %q", tt.sql, plan.SQL, plan.Materialize, tt.want)
		}
	}
}

func TestDeterministicMaterialize(t *testing.T) {
	tests := []struct {
		sql  string
		want Materialize
	}{
		{"INSERT INTO t VALUES (random(), uuid())", Materialize{Table: "t", Query: "VALUES (random(), uuid())"}},
		{"insert into main.t (a, \"B\") select random(), x from u where x > 1;",
			Materialize{Table: "main.t", Columns: []string{"a", `"B"`}, Query: "select random(), x from u where x > 1"}},
		{`INSERT INTO "my db"."T" (SELECT gen_random_uuid())`, Materialize{Table: `"my db"."T"`, Query: "(SELECT gen_random_uuid())"}},
		{"INSERT INTO t SELECT random(), now() FROM range(3)",
			Materialize{Table: "t", Query: "SELECT random(), TIMESTAMPTZ '2026-11-30 20:11:50.123456+00' FROM range(3)"}},
		{"WITH c AS (SELECT 5 AS x) INSERT INTO t SELECT x, random() FROM c",
			Materialize{Table: "t", Query: "WITH c AS (SELECT 5 AS x) SELECT x, random() FROM c"}},
		{"WITH c AS (SELECT 1) INSERT INTO t VALUES (uuid())",
			Materialize{Table: "t", Query: "WITH c AS (SELECT 1) SELECT * FROM (VALUES (uuid()))"}},
		{"INSERT INTO t SELECT * FROM read_csv('/data/x.csv')", Materialize{Table: "t", Query: "SELECT * FROM read_csv('/data/x.csv')"}},
		{"INSERT INTO t FROM 'x.parquet'", Materialize{Table: "t", Query: "FROM 'x.parquet'"}},
		{"INSERT INTO t SELECT a FROM u JOIN v ON u.k = v.k WHERE random() < 0.5",
			Materialize{Table: "t", Query: "SELECT a FROM u JOIN v ON u.k = v.k WHERE random() < 0.5"}},
	}
	for _, tt := range tests {
		plan, err := Deterministic(Parse(tt.sql), leaderTime, testVolatile)
		if err != nil {
			t.Errorf("Deterministic(%q): %v", tt.sql, err)
			continue
		}
		if plan.SQL != "" || plan.Materialize == nil || !reflect.DeepEqual(*plan.Materialize, tt.want) {
			t.Errorf("Deterministic(%q)\n got %q %+v\nwant %+v", tt.sql, plan.SQL, plan.Materialize, tt.want)
		}
	}
}

func TestDeterministicRefused(t *testing.T) {
	tests := []struct{ sql, why string }{
		{"UPDATE t SET x = random()", "random() in UPDATE would give each replica a different value"},
		{"DELETE FROM t WHERE random() < 0.5", "random() in DELETE"},
		{"UPDATE t SET id = uuid() FROM u", "uuid() in UPDATE"},
		{"MERGE INTO t USING u ON t.k = u.k WHEN MATCHED THEN UPDATE SET x = random()", "random() in MERGE"},
		{"CREATE TABLE t AS SELECT random() AS r", "create the table with its column types first"},
		{"CREATE OR REPLACE TABLE t AS FROM read_csv('x.csv')", "read_csv() in CREATE TABLE … AS reads files"},
		{"CREATE TABLE t (a INT, b DOUBLE DEFAULT random())", "random() in a column default"},
		{"CREATE TABLE t (a INT, at TIMESTAMP DEFAULT current_timestamp)", "current_timestamp in a column default"},
		{"CREATE TABLE t (a INT, b DOUBLE GENERATED ALWAYS AS (random()))", "generated column"},
		{"CREATE VIEW v AS SELECT * FROM t WHERE ts > now() - INTERVAL 1 HOUR", "now() in a stored view"},
		{"CREATE MACRO r() AS random()", "random() in a stored view, macro"},
		{"CREATE TABLE g (i INT, j BIGINT GENERATED ALWAYS AS (nextval('s')))", "nextval()/currval() in a generated column"},
		{"CREATE TABLE g (i INT, j BIGINT AS (1 + currval('s')), k INT DEFAULT nextval('s'))", "nextval()/currval() in a generated column"},
		{`CREATE VIEW v AS SELECT "nextval"('s') AS n`, "nextval()/currval() in a stored view"},
		{"CREATE MACRO n() AS nextval('s')", "nextval()/currval() in a stored view, macro"},
		{"CREATE VIEW v AS SELECT * FROM read_csv('x.csv')", "read_csv() in a stored view"},
		{"CREATE TEMP TABLE t (a INT)", "temporary objects"},
		{"CREATE OR REPLACE TEMPORARY VIEW v AS SELECT 1", "temporary objects"},
		{"ALTER TABLE t ADD COLUMN at TIMESTAMP DEFAULT now()", "now() in ALTER TABLE"},
		{"ALTER TABLE t ADD COLUMN r DOUBLE DEFAULT random()", "random() in ALTER"},
		{"INSERT INTO t VALUES (random()) RETURNING *", "drop the RETURNING clause"},
		{"INSERT INTO t VALUES (uuid()) ON CONFLICT DO NOTHING", "INSERT … ON"},
		{"INSERT OR REPLACE INTO t VALUES (uuid())", "INSERT OR REPLACE"},
		{"INSERT INTO t BY NAME SELECT uuid() AS id", "with BY NAME"},
		{"INSERT INTO t VALUES (DEFAULT, random())", "with DEFAULT"},
		{"INSERT INTO t SELECT nextval('s'), random()", "nextval()/currval() in the same INSERT"},
		{"INSERT INTO t VALUES (getvariable('x'))", "getvariable() depends on the client's session"},
		{"INSERT INTO t SELECT setseed(0.5)", "setseed() depends"},
		{"INSERT INTO t VALUES (current_setting('threads'))", "current_setting()"},
		{"UPDATE t SET x = u.x FROM read_parquet('u.parquet') u", "read_parquet() reads files local to each node in UPDATE"},
		{"DELETE FROM t USING 'keys.csv' k WHERE t.k = k.k", "the file 'keys.csv'"},
		{"COPY t FROM 'x.csv'", "COPY reads or writes files local to each node"},
		{"COPY t TO 'x.csv'", "COPY reads or writes"},
		{"ATTACH 'other.db' AS o", "ATTACH"},
		{"INSTALL httpfs", "INSTALL"},
		{"LOAD httpfs", "LOAD"},
		{"IMPORT DATABASE 'dir'", "IMPORT"},
		{"EXPORT DATABASE 'dir'", "EXPORT"},
		{"SELECT * FROM read_json('https://example.com/x.json')", "read_json() reads files"},
		{"EXPLAIN ANALYZE INSERT INTO t VALUES (1)", "EXPLAIN ANALYZE"},
		{"EXECUTE p(1)", "EXECUTE runs a statement prepared"},
		{"SET threads = 1", "SET changes session state"},
		{"BEGIN", "transaction control"},
		{"INSERT INTO t SELECT main.now()", "without a qualifier"},
		{"INSERT INTO t SELECT now(1)", "takes no arguments"},
		{"UPDATE EXTENSIONS", "on each node"},
		{"CHECKPOINT", "does not know how to replicate CHECKPOINT"},
		{"INSERT INTO t SELECT * FROM query('SELECT random()')", ""}, // materialized, not refused
	}
	for _, tt := range tests {
		plan, err := Deterministic(Parse(tt.sql), leaderTime, testVolatile)
		if tt.why == "" {
			if err != nil || plan.Materialize == nil {
				t.Errorf("Deterministic(%q) = %+v, %v; want a Materialize plan", tt.sql, plan, err)
			}
			continue
		}
		if !errors.Is(err, ErrNondeterministic) || !strings.Contains(err.Error(), tt.why) {
			t.Errorf("Deterministic(%q) error = %v\nwant ErrNondeterministic with %q", tt.sql, err, tt.why)
		}
	}
}

func TestDeterministicInput(t *testing.T) {
	for _, sql := range []string{"INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)", "INSERT INTO t VALUES ('x", ""} {
		if _, err := Deterministic(Parse(sql), leaderTime, testVolatile); err == nil || errors.Is(err, ErrNondeterministic) {
			t.Errorf("Deterministic(%q) error = %v, want an input error", sql, err)
		}
	}
}

// replica is one node of a simulated cluster: its own in-memory DuckDB.
type replica struct {
	db   *engine.DB
	conn *engine.Conn
}

func openReplica(t *testing.T, timeZone string) *replica {
	t.Helper()
	db, err := engine.Open("", engine.Options{Threads: 2})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Connect()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	r := &replica{db: db, conn: conn}
	r.exec(t, "SET TimeZone = '"+timeZone+"'")
	return r
}

func (r *replica) exec(t *testing.T, sql string) {
	t.Helper()
	if _, err := r.conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

// rows returns every row of sql as text, one string per row.
func (r *replica) rows(t *testing.T, sql string) []string {
	t.Helper()
	res, err := r.conn.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("query %q: %v", sql, err)
	}
	defer res.Close()
	var out []string
	for {
		chunk, err := res.Next()
		if err != nil {
			t.Fatalf("query %q: %v", sql, err)
		}
		if chunk == nil {
			return out
		}
		for i := 0; i < chunk.Rows; i++ {
			var cols []string
			for _, v := range chunk.Columns {
				s, err := v.Text(i)
				if err != nil {
					t.Fatalf("query %q: row %d: %v", sql, i, err)
				}
				cols = append(cols, s)
			}
			out = append(out, strings.Join(cols, " | "))
		}
	}
}

// literalRows runs a materialized query on the leader and renders its rows
// as a VALUES list of typed literals, the way a leader turns them into data.
func (r *replica) literalRows(t *testing.T, query string) string {
	t.Helper()
	res, err := r.conn.Query(context.Background(), query)
	if err != nil {
		t.Fatalf("materialize %q: %v", query, err)
	}
	defer res.Close()
	var rows []string
	for {
		chunk, err := res.Next()
		if err != nil {
			t.Fatalf("materialize %q: %v", query, err)
		}
		if chunk == nil {
			return "VALUES " + strings.Join(rows, ", ")
		}
		for i := 0; i < chunk.Rows; i++ {
			var vals []string
			for c, v := range chunk.Columns {
				x, err := v.Value(i)
				if err != nil {
					t.Fatalf("materialize %q: %v", query, err)
				}
				if x == nil {
					vals = append(vals, "NULL")
					continue
				}
				s, err := v.Text(i)
				if err != nil {
					t.Fatalf("materialize %q: %v", query, err)
				}
				vals = append(vals, fmt.Sprintf("CAST('%s' AS %s)", strings.ReplaceAll(s, "'", "''"), res.Types()[c]))
			}
			rows = append(rows, "("+strings.Join(vals, ", ")+")")
		}
	}
}

// apply replicates one client write to every replica the way duckraft does:
// leader is replicas[0], which alone evaluates materialized queries.
func apply(t *testing.T, replicas []*replica, sql string) {
	t.Helper()
	plan, err := Deterministic(Parse(sql), leaderTime, testVolatile)
	if err != nil {
		t.Fatalf("Deterministic(%q): %v", sql, err)
	}
	stmt := plan.SQL
	if m := plan.Materialize; m != nil {
		stmt = "INSERT INTO " + m.Table
		if m.Columns != nil {
			stmt += " (" + strings.Join(m.Columns, ", ") + ")"
		}
		stmt += " " + replicas[0].literalRows(t, m.Query)
	}
	for _, r := range replicas {
		r.exec(t, stmt)
	}
}

// TestReplicasAgree applies writes to two databases whose sessions are in
// different time zones and checks that they end up with the same rows.
func TestReplicasAgree(t *testing.T) {
	tests := []struct {
		name   string
		setup  []string
		writes []string
		check  string
		want   []string // when set, the leader's rows must be exactly these
	}{
		{
			name:  "clock",
			setup: []string{"CREATE TABLE c (k VARCHAR, tstz TIMESTAMPTZ, ts TIMESTAMP, d DATE, ttz TIMETZ, tm TIME, ms BIGINT)"},
			writes: []string{
				"INSERT INTO c VALUES ('now', now(), localtimestamp, current_date, current_time, localtime, epoch_ms(now()))",
				"INSERT INTO c SELECT 'fns', get_current_timestamp(), current_localtimestamp(), today(), get_current_time(), current_localtime(), epoch_ms(transaction_timestamp())",
				"INSERT INTO c VALUES ('upd', NULL, NULL, NULL, NULL, NULL, NULL)",
				"UPDATE c SET tstz = current_timestamp, d = current_date WHERE k = 'upd'",
			},
			check: "SELECT * FROM c ORDER BY ALL",
			want: []string{
				"fns | 2026-11-30 20:11:50.123456+00 | 2026-11-30 20:11:50.123456 | 2026-11-30 | 20:11:50.123456+00 | 20:11:50.123456 | 1796069510123",
				"now | 2026-11-30 20:11:50.123456+00 | 2026-11-30 20:11:50.123456 | 2026-11-30 | 20:11:50.123456+00 | 20:11:50.123456 | 1796069510123",
				"upd | 2026-11-30 20:11:50.123456+00 | NULL | 2026-11-30 | NULL | NULL | NULL",
			},
		},
		{
			name:  "clock in delete and create table as",
			setup: []string{"CREATE TABLE e (happened TIMESTAMPTZ)", "INSERT INTO e VALUES ('2026-11-29 20:00:00+00'), ('2026-11-30 20:00:00+00')"},
			writes: []string{
				"DELETE FROM e WHERE happened < now() - INTERVAL 1 DAY",
				"CREATE TABLE snap AS SELECT happened, now() AS taken FROM e",
			},
			check: "SELECT * FROM snap ORDER BY ALL",
			want:  []string{"2026-11-30 20:00:00+00 | 2026-11-30 20:11:50.123456+00"},
		},
		{
			name:  "nextval in log order",
			setup: []string{"CREATE SEQUENCE s START 10", "CREATE TABLE n (id BIGINT DEFAULT nextval('s'), x INT)"},
			writes: []string{
				"INSERT INTO n VALUES (nextval('s'), 1), (nextval('s'), 2)",
				"INSERT INTO n (x) SELECT i FROM range(3, 6) r(i)",
				"SELECT nextval('s')",
				"INSERT INTO n VALUES (currval('s') * 100, 9)",
			},
			check: "SELECT * FROM n ORDER BY ALL",
			want:  []string{"10 | 1", "11 | 2", "12 | 3", "13 | 4", "14 | 5", "1500 | 9"},
		},
		{
			// setval (DuckDB 2.0) sets the sequence on the node that runs
			// it, so it runs on every node, as nextval does.
			name:  "setval in log order",
			setup: []string{"CREATE SEQUENCE s", "CREATE TABLE n (id BIGINT, x INT)"},
			writes: []string{
				"SELECT setval('s', 41)",
				"INSERT INTO n VALUES (nextval('s'), 1)",
				"INSERT INTO n VALUES (setval('s', 100), 2)",
				"INSERT INTO n SELECT nextval('s'), 3",
			},
			check: "SELECT * FROM n ORDER BY ALL",
			want:  []string{"42 | 1", "100 | 2", "101 | 3"},
		},
		{
			name:  "random and uuid materialized",
			setup: []string{"CREATE TABLE r (id UUID, x DOUBLE, g INT)"},
			writes: []string{
				"INSERT INTO r VALUES (uuid(), random(), 1), (gen_random_uuid(), random(), 2)",
				"INSERT INTO r SELECT uuidv7(), random(), i FROM range(3, 50) t(i)",
				"INSERT INTO r (g, id) SELECT 99, uuid()",
				"WITH k AS (SELECT 7 AS g) INSERT INTO r SELECT uuid(), random() * g, g FROM k",
			},
			check: "SELECT * FROM r ORDER BY ALL",
		},
		{
			name:  "file source materialized",
			setup: []string{"CREATE TABLE f (a INT, b VARCHAR)"},
			writes: []string{
				// Only the leader could read a real file; a VALUES table function stands in.
				"INSERT INTO f SELECT * FROM query('SELECT 1, ''x'' UNION ALL SELECT 2, ''y''')",
			},
			check: "SELECT * FROM f ORDER BY ALL",
			want:  []string{"1 | x", "2 | y"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Kiritimati is UTC+14: its current_date at the leader's time is
			// already December 1st.
			replicas := []*replica{openReplica(t, "UTC"), openReplica(t, "Pacific/Kiritimati")}
			for _, r := range replicas {
				for _, sql := range tt.setup {
					r.exec(t, sql)
				}
			}
			for _, sql := range tt.writes {
				apply(t, replicas, sql)
			}
			leader, follower := replicas[0].rows(t, tt.check), replicas[1].rows(t, tt.check)
			if len(leader) == 0 || !reflect.DeepEqual(leader, follower) {
				t.Fatalf("replicas differ:\nleader   %q\nfollower %q", leader, follower)
			}
			if tt.want != nil && !reflect.DeepEqual(leader, tt.want) {
				t.Fatalf("rows:\n got %q\nwant %q", leader, tt.want)
			}
		})
	}
}

// TestReplicasDivergeUnplanned is the control for TestReplicasAgree: the
// same write applied as written leaves the replicas different.
func TestReplicasDivergeUnplanned(t *testing.T) {
	replicas := []*replica{openReplica(t, "UTC"), openReplica(t, "UTC")}
	var rows [2][]string
	for i, r := range replicas {
		r.exec(t, "CREATE TABLE r (x DOUBLE); INSERT INTO r SELECT random() FROM range(10)")
		rows[i] = r.rows(t, "SELECT * FROM r ORDER BY ALL")
	}
	if reflect.DeepEqual(rows[0], rows[1]) {
		t.Fatalf("replicas agree without a plan: %q", rows[0])
	}
}

// TestSequenceOrderSingleThreaded checks nextval() over a source of several
// row groups: replicas agree when they apply it on one thread. With more
// threads DuckDB hands sequence values to rows in scheduling order, which
// differs between runs (see docs/determinism.md), so appliers use one.
func TestSequenceOrderSingleThreaded(t *testing.T) {
	var sums [2][]string
	for i := range sums {
		db, err := engine.Open("", engine.Options{Threads: 1})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer db.Close()
		conn, err := db.Connect()
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer conn.Close()
		r := &replica{db: db, conn: conn}
		r.exec(t, "CREATE TABLE big AS SELECT i FROM range(300000) r(i); CREATE SEQUENCE s; CREATE TABLE n (id BIGINT, i BIGINT)")
		apply(t, []*replica{r}, "INSERT INTO n SELECT nextval('s'), i FROM big")
		sums[i] = r.rows(t, "SELECT sum(hash(id, i)), count(*) FILTER (WHERE id <> i + 1) FROM n")
	}
	if !reflect.DeepEqual(sums[0], sums[1]) || !strings.HasSuffix(sums[0][0], " | 0") {
		t.Fatalf("replicas differ: %q vs %q", sums[0], sums[1])
	}
}

// TestVolatileList checks testVolatile against the DuckDB this build links,
// so that the rules above are tested with the real list.
func TestVolatileList(t *testing.T) {
	r := openReplica(t, "UTC")
	got := Volatile{}
	for _, name := range r.rows(t, "SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE stability = 'VOLATILE'") {
		got[name] = true
	}
	for name := range testVolatile {
		if !got[name] {
			t.Errorf("%s is no longer VOLATILE in DuckDB %s", name, r.db.Version())
		}
	}
	for name := range got {
		if !testVolatile[name] {
			t.Errorf("DuckDB %s lists %s as VOLATILE; add it to testVolatile and check the rules", r.db.Version(), name)
		}
	}
	for name := range clockFuncs {
		if got[name] {
			t.Errorf("clock function %s is VOLATILE; it must still be rewritten, not materialized", name)
		}
	}
}
