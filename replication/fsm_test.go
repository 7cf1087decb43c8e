package replication

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/wal"
)

// TestReplayAfterCrash simulates a crash after DuckDB committed a batch but
// before raft recorded anything: a new FSM on the same database is handed
// the same entries again, plus new ones, and must apply only the new ones.
func TestReplayAfterCrash(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	defer db.Close()
	f, err := newFSM(db, 1<<20, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	logs := []*raft.Log{
		logEntry(t, 1, stmt("CREATE TABLE t(i INTEGER)")),
		{Index: 2, Term: 1, Type: raft.LogNoop},
		logEntry(t, 3, stmt("INSERT INTO t VALUES (1)"), stmt("INSERT INTO t VALUES (2)")),
		logEntry(t, 4, stmt("INSERT INTO t VALUES (3)")),
	}
	for _, r := range f.ApplyBatch(logs[:3]) {
		if err, ok := r.(error); ok {
			t.Fatal(err)
		}
	}
	f.close()

	f2, err := newFSM(db, 1<<20, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer f2.close()
	if f2.Applied() != 3 {
		t.Fatalf("applied after reopen = %d, want 3", f2.Applied())
	}
	resps := f2.ApplyBatch(logs)
	for i := range 3 {
		if err, _ := resps[i].(error); !errors.Is(err, errAlreadyApplied) {
			t.Fatalf("entry %d: response %v, want already applied", i+1, resps[i])
		}
	}
	if got := queryInt(t, db, "SELECT count(*) FROM t"); got != 3 {
		t.Fatalf("count = %d, want 3", got)
	}
	if f2.Applied() != 4 {
		t.Fatalf("applied = %d, want 4", f2.Applied())
	}
}

func TestRefusedStatementsFailAlone(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := openFSM(t, db)
	defer f.close()
	r := f.ApplyBatch([]*raft.Log{logEntry(t, 1,
		stmt("CREATE TABLE t(i INTEGER)"),
		stmt("INSERT INTO t VALUES (1); COMMIT"),
		stmt("/* hi */ commit"),
		stmt("SET threads = 1"),
		stmt("INSERT INTO t VALUES (2)"),
	)})
	res := r[0].(*entryResult).results
	for i, want := range []bool{false, true, true, true, false} {
		if got := res[i].err != nil; got != want || want && !errors.Is(res[i].err, ErrRefused) {
			t.Errorf("command %d: err = %v, want refused %v", i, res[i].err, want)
		}
	}
	if got := queryInt(t, db, "SELECT count(*) FROM t"); got != 1 {
		t.Fatalf("count = %d, want 1", got)
	}
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

func TestSnapshotRoundTrip(t *testing.T) {
	src := openDB(t, t.TempDir())
	defer src.Close()
	f, err := newFSM(src, 1<<20, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	ddl := []wal.Command{
		stmt("CREATE SCHEMA s"),
		stmt("CREATE TYPE mood AS ENUM ('happy', 'it''s')"),
		stmt("CREATE SEQUENCE s.seq START 10 INCREMENT 5"),
		stmt("CREATE TABLE s.parent(id BIGINT PRIMARY KEY DEFAULT nextval('s.seq'), m mood, tags VARCHAR[], ts TIMESTAMP)"),
		stmt("CREATE TABLE s.child(pid BIGINT REFERENCES s.parent(id), note VARCHAR)"),
		stmt("CREATE MACRO twice(x) AS x * 2"),
		stmt("CREATE MACRO firstn(n) AS TABLE SELECT * FROM range(n)"),
		stmt("INSERT INTO s.parent(m, tags, ts) SELECT 'happy', ['a', 'b'], TIMESTAMP '2024-01-01' FROM range(5000)"),
		stmt("INSERT INTO s.child SELECT id, 'n' || id FROM s.parent"),
		stmt("CREATE VIEW s.v AS SELECT twice(count(*)) AS n FROM s.child"),
		stmt("CREATE INDEX child_note ON s.child(note)"),
		// Generated columns are computed on read: the snapshot holds only
		// the stored ones, which a restore can append.
		stmt(`CREATE TABLE s.gen(i INTEGER, twice INTEGER GENERATED ALWAYS AS (i * 2), "note ""q""" VARCHAR)`),
		stmt(`INSERT INTO s.gen(i, "note ""q""") SELECT range, 'n' FROM range(3000)`),
		// DuckDB binds a table function's arguments when the table macro is
		// created, and a view's query: both must come after the tables
		// they name, whatever their kind.
		stmt("CREATE MACRO gen_summary() AS TABLE SELECT * FROM summary((SELECT i FROM s.gen LIMIT 3))"),
		stmt("CREATE VIEW s.summaries AS SELECT count(*) AS n FROM gen_summary()"),
		stmt("CREATE MACRO summary_rows(x) AS x + (SELECT count(*) FROM summary((SELECT i FROM s.gen LIMIT 2)))"),
		// A table DEFAULT calling a macro created before it.
		stmt("CREATE TABLE s.with_default(i INTEGER DEFAULT twice(4))"),
		stmt("INSERT INTO s.with_default DEFAULT VALUES"),
		// A view over a table created after the view's own schema objects.
		stmt("CREATE TABLE s.base(i INTEGER)"),
		stmt("CREATE VIEW s.over_base AS SELECT count(*) AS n FROM s.base"),
		stmt("INSERT INTO s.base SELECT range FROM range(4)"),
		{Key: []byte("k"), Entry: wal.Statement{SQL: "INSERT INTO s.child VALUES (NULL, 'keyed')"}},
	}
	for i, c := range ddl {
		r := f.ApplyBatch([]*raft.Log{logEntry(t, uint64(i+1), c)})[0].(*entryResult)
		if err := r.results[0].err; err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
	}

	start := time.Now()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Snapshot() blocked %v", time.Since(start))
	// Writes after the snapshot is pinned are not in it.
	f.ApplyBatch([]*raft.Log{logEntry(t, 100, stmt("INSERT INTO s.child VALUES (NULL, 'later')"))})
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	dst := openDB(t, t.TempDir())
	defer dst.Close()
	g, err := newFSM(dst, 1<<20, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	// Restore must clear what was there before.
	g.ApplyBatch([]*raft.Log{logEntry(t, 1, stmt("CREATE TABLE junk(i INT)"))})
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if g.Applied() != uint64(len(ddl)) {
		t.Fatalf("restored applied = %d, want %d", g.Applied(), len(ddl))
	}
	checks := []struct {
		sql  string
		want int64
	}{
		{"SELECT count(*) FROM s.parent WHERE m = 'happy' AND tags = ['a', 'b']", 5000},
		{"SELECT count(*) FROM s.child", 5001},
		{"SELECT n FROM s.v", 10002},
		{"SELECT twice(21)", 42},
		{"SELECT count(*) FROM firstn(3)", 3},
		{"SELECT nextval('s.seq')", 10 + 5*5000},
		{"SELECT count(*) FROM duckdb_indexes() WHERE index_name = 'child_note'", 1},
		{"SELECT count(*) FROM duckdb_tables() WHERE table_name = 'junk'", 0},
		{"SELECT count(*) FROM _duckraft.keys WHERE key = '6b'", 1},
		{"SELECT count(*) FROM (SELECT 'it''s'::mood)", 1},
		{"SELECT n FROM s.summaries", 3},
		{"SELECT n FROM s.over_base", 4},
		{"SELECT summary_rows(1)", 3},
		{"SELECT i FROM s.with_default", 8},
		{`SELECT sum(twice)::BIGINT FROM s.gen WHERE "note ""q""" = 'n'`, 2 * 2999 * 3000 / 2},
	}
	for _, c := range checks {
		if got := queryInt(t, dst, c.sql); got != c.want {
			t.Errorf("%s = %d, want %d", c.sql, got, c.want)
		}
	}

	// A damaged snapshot is refused and leaves the database as it was.
	bad := append([]byte(nil), sink.Bytes()...)
	bad[len(bad)/2] ^= 0xff
	if err := g.Restore(io.NopCloser(bytes.NewReader(bad))); !errors.Is(err, ErrSnapshotCorrupt) {
		t.Fatalf("corrupt restore: err = %v, want ErrSnapshotCorrupt", err)
	}
	if got := queryInt(t, dst, "SELECT count(*) FROM s.child"); got != 5001 {
		t.Fatalf("after failed restore count = %d, want 5001", got)
	}
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()[:sink.Len()-3]))); !errors.Is(err, ErrSnapshotCorrupt) {
		t.Fatalf("truncated restore: err = %v, want ErrSnapshotCorrupt", err)
	}
}

// BenchmarkSnapshotPin measures how long FSM.Snapshot blocks the apply
// goroutine on a large database (~1 GB of rows; set DUCKRAFT_SNAPSHOT_ROWS
// to change the size) and how long Persist then streams.
func BenchmarkSnapshotPin(b *testing.B) {
	rows := "12000000"
	if v := os.Getenv("DUCKRAFT_SNAPSHOT_ROWS"); v != "" {
		rows = v
	}
	dir := b.TempDir()
	db := openDB(b, dir)
	defer db.Close()
	f, err := newFSM(db, 1<<20, testLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer f.close()
	r := f.ApplyBatch([]*raft.Log{logEntry(b, 1, stmt(
		"CREATE TABLE big AS SELECT range AS id, md5(range::VARCHAR) || md5((range + 1)::VARCHAR) AS s, range * 1.5 AS d FROM range("+rows+")"))})
	if err := r[0].(*entryResult).results[0].err; err != nil {
		b.Fatal(err)
	}
	if st, err := os.Stat(dir + "/duck.db"); err == nil {
		b.Logf("database file %d MB", st.Size()>>20)
	}
	var persisted bool
	for b.Loop() {
		snap, err := f.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		if !persisted {
			b.StopTimer()
			start := time.Now()
			var sink countSink
			if err := snap.Persist(&sink); err != nil {
				b.Fatal(err)
			}
			b.Logf("Persist streamed %d MB in %v", sink.n>>20, time.Since(start))
			persisted = true
			b.StartTimer()
		}
		snap.Release()
	}
}

type countSink struct{ n int64 }

func (s *countSink) Write(p []byte) (int, error) { s.n += int64(len(p)); return len(p), nil }
func (s *countSink) ID() string                  { return "count" }
func (s *countSink) Close() error                { return nil }
func (s *countSink) Cancel() error               { return nil }

func TestNeedRestore(t *testing.T) {
	logs := raft.NewInmemStore()
	snaps := raft.NewInmemSnapshotStore()
	if got, _ := needRestore(0, snaps, logs); got {
		t.Fatal("restore without snapshots")
	}
	sink, err := snaps.Create(raft.SnapshotVersionMax, 10, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink.Close()
	for i := uint64(5); i <= 12; i++ {
		typ := raft.LogCommand
		if i == 9 || i == 10 {
			typ = raft.LogNoop
		}
		logs.StoreLog(&raft.Log{Index: i, Type: typ})
	}
	tests := []struct {
		applied uint64
		want    bool
	}{
		{12, false}, // database ahead of the snapshot
		{10, false},
		{8, false}, // only no-ops between applied and the snapshot
		{7, true},  // a command the snapshot covers is missing
		{0, true},  // fresh database, log compacted
	}
	for _, tt := range tests {
		if got, err := needRestore(tt.applied, snaps, logs); got != tt.want || err != nil {
			t.Errorf("needRestore(%d) = %v, %v; want %v", tt.applied, got, err, tt.want)
		}
	}
}

// TestGroupingDoesNotChangeSequences applies the same entries in one
// ApplyBatch call on one FSM and one call per entry on another, as raft may
// on a leader and a follower. A failing command re-runs its transaction,
// and DuckDB sequences are not transactional, so a re-run that reached back
// into the earlier entry would hand out different values on the two nodes.
func TestGroupingDoesNotChangeSequences(t *testing.T) {
	logs := []*raft.Log{
		logEntry(t, 1, stmt("CREATE SEQUENCE s"), stmt("CREATE TABLE t(id INTEGER PRIMARY KEY, n BIGINT DEFAULT nextval('s'))")),
		logEntry(t, 2, stmt("INSERT INTO t (id) VALUES (1)")),
		logEntry(t, 3, stmt("INSERT INTO t (id) VALUES (2)"), stmt("INSERT INTO t (id) VALUES (1)")),
		logEntry(t, 4, stmt("INSERT INTO t (id) VALUES (3)")),
	}
	state := func(calls [][]*raft.Log) [][]any {
		db := openDB(t, t.TempDir())
		defer db.Close()
		f := openFSM(t, db)
		defer f.close()
		for _, c := range calls {
			f.ApplyBatch(c)
		}
		return dump(t, db, "SELECT id, n FROM t ORDER BY id")
	}
	together := state([][]*raft.Log{logs})
	apart := state([][]*raft.Log{logs[:1], logs[1:2], logs[2:3], logs[3:]})
	if !reflect.DeepEqual(together, apart) {
		t.Fatalf("one call: %v\nper entry: %v", together, apart)
	}
	if len(together) != 3 {
		t.Fatalf("rows %v, want ids 1, 2, 3", together)
	}
}

// TestViewsCannotOutliveTheirTables: the applier keeps DuckDB's view
// dependencies, so a table a view reads is dropped or replaced only with
// CASCADE. A view left reading nothing cannot be recreated from a snapshot
// (CREATE VIEW binds its query), and the follower restoring it never
// caught up.
func TestViewsCannotOutliveTheirTables(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := openFSM(t, db)
	defer f.close()
	steps := []struct {
		sql  string
		fail bool
	}{
		{"CREATE TABLE d(i INTEGER)", false},
		{"CREATE VIEW dv AS SELECT i FROM d", false},
		{"DROP TABLE d", true},
		{"CREATE OR REPLACE TABLE d AS SELECT 1 AS i", true},
		{"DROP TABLE d CASCADE", false},
	}
	for i, s := range steps {
		if err := results(t, f, logEntry(t, uint64(i+1), stmt(s.sql)))[0].err; (err != nil) != s.fail {
			t.Fatalf("%s: err = %v, want failure %v", s.sql, err, s.fail)
		}
	}
	if err := f.haltErr(); err != nil {
		t.Fatalf("FSM halted: %v", err)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM duckdb_views() WHERE NOT internal"); n != 0 {
		t.Fatalf("%d views left after DROP TABLE … CASCADE", n)
	}
}

// TestSnapshotSequencesAtItsIndex: a snapshot holds each sequence's value
// at the snapshot's applied index. DuckDB's sequences are not
// transactional, so read when the snapshot is persisted, while entries
// after its index go on drawing values, they ran ahead, and a node
// restored from it handed out other values than the rest when it replayed
// those entries (found by the divergence hunter, seed 42).
func TestSnapshotSequencesAtItsIndex(t *testing.T) {
	src := openDB(t, t.TempDir())
	defer src.Close()
	f := openFSM(t, src)
	defer f.close()
	cmds := []string{"CREATE SEQUENCE sq", "CREATE TABLE t(v BIGINT)", "INSERT INTO t SELECT nextval('sq') FROM range(5)"}
	applyEach(t, f, 1, cmds...)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	// Entries after the snapshot's index draw more values before it is
	// persisted.
	f.ApplyBatch([]*raft.Log{logEntry(t, 4, stmt("INSERT INTO t SELECT nextval('sq') FROM range(7)"))})
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}

	dst := openDB(t, t.TempDir())
	defer dst.Close()
	g := openFSM(t, dst)
	defer g.close()
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	// Replaying entry 4 on the restored node must give what it gave on the
	// source.
	g.ApplyBatch([]*raft.Log{logEntry(t, 4, stmt("INSERT INTO t SELECT nextval('sq') FROM range(7)"))})
	if got, want := queryInt(t, dst, "SELECT max(v) FROM t"), queryInt(t, src, "SELECT max(v) FROM t"); got != want {
		t.Fatalf("restored node's sequence: max(v) = %d, the source's %d", got, want)
	}
}

// TestSnapshotKeepsCurrval: a sequence that handed out values answers
// currval() after a restore as on its source. DuckDB's own DDL for it
// starts a fresh sequence, whose currval() is an error until nextval() is
// called, so a DEFAULT or an INSERT calling currval failed on the restored
// node alone and left it without the rows (found by the divergence
// hunter).
func TestSnapshotKeepsCurrval(t *testing.T) {
	f := openFSM(t, openDB(t, t.TempDir()))
	cmds := []string{
		"CREATE SEQUENCE sq START WITH 10 INCREMENT BY 3", "CREATE SEQUENCE unused", `CREATE SCHEMA "s.x"`,
		`CREATE SEQUENCE "s.x".cyc MINVALUE 1 MAXVALUE 2 CYCLE`,
		"CREATE TABLE t(id INTEGER, v BIGINT DEFAULT currval('sq'))",
		`SELECT nextval('sq'), nextval('sq'), nextval('"s.x".cyc'), nextval('"s.x".cyc')`,
	}
	applyEach(t, f, 1, cmds...)
	g := restoredCopy(t, f)
	// The state hash reads the sequences' DDL.
	const ddl = "SELECT string_agg(sql, ' ' ORDER BY sequence_name) FROM duckdb_sequences()"
	if want, got := queryStrings(t, f, ddl), queryStrings(t, g, ddl); got != want {
		t.Errorf("restored sequences: %s\nsource: %s", got, want)
	}
	// The same entries, applied on the source and on the restored node,
	// give the same rows.
	next := []string{
		"INSERT INTO t(id) VALUES (1)",
		`INSERT INTO t VALUES (2, nextval('sq')), (3, nextval('"s.x".cyc')), (4, nextval('"s.x".cyc')), (5, nextval('unused'))`,
	}
	for _, n := range []*fsm{f, g} {
		applyEach(t, n, uint64(len(cmds)+1), next...)
	}
	const rows = "SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM t"
	if want, got := queryStrings(t, f, rows), queryStrings(t, g, rows); got != want {
		t.Errorf("restored node: %s, source: %s", got, want)
	}
}

// queryStrings returns the single string sql yields on f's connection.
func queryStrings(t *testing.T, f *fsm, sql string) string {
	t.Helper()
	out, err := f.conn.QueryStrings(context.Background(), sql)
	if err != nil || len(out) != 1 {
		t.Fatalf("%s: %v, %v", sql, out, err)
	}
	return out[0]
}

// TestRestoreKeepsScanOrder: a snapshot restore stores each table's rows
// in the order a scan of the source yields them, after deletes, in-place
// updates and an indexed column's update (which DuckDB applies as a
// delete and an insert). The applier relies on it where it lets scan
// order decide a write: the values nextval() hands to the rows of an
// INSERT … SELECT (docs/determinism.md, rules 2 and 10).
func TestRestoreKeepsScanOrder(t *testing.T) {
	f := openFSM(t, openDB(t, t.TempDir()))
	writes := []string{
		"CREATE TABLE t(id INTEGER, v INTEGER, s VARCHAR)",
		"INSERT INTO t SELECT range, range, 's' || range FROM range(300000)",
		"DELETE FROM t WHERE id % 3 = 0",
		"UPDATE t SET s = s || repeat('u', 40) WHERE id % 7 = 1",
		"INSERT INTO t SELECT range, range, 'x' FROM range(10)",
		"CREATE TABLE p(id INTEGER PRIMARY KEY, v INTEGER)",
		"INSERT INTO p SELECT range, range FROM range(1000)",
		"UPDATE p SET id = id + 5000 WHERE id < 10",
		"DELETE FROM p WHERE id BETWEEN 100 AND 200",
		"INSERT INTO p VALUES (150, 1)",
	}
	applyEach(t, f, 1, writes...)
	if _, err := f.conn.Exec(context.Background(), "CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	g := restoredCopy(t, f)
	for _, table := range []string{"t", "p"} {
		q := "SELECT md5(string_agg(id::VARCHAR, ',')) FROM " + table
		want, err := f.conn.QueryStrings(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := g.conn.QueryStrings(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != want[0] {
			t.Errorf("%s scans in another order after a restore: %s, source %s", table, got[0], want[0])
		}
	}
}

// restoredCopy returns a new FSM restored from a snapshot of f.
func restoredCopy(t *testing.T, f *fsm) *fsm {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	g := openFSM(t, openDB(t, t.TempDir()))
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestAppendToMetaSchemaRefused: an append names its schema as data, not in
// SQL text, so checkStatement never sees it; an append into the applier's
// bookkeeping (an idempotency key at a huge index raises the applied index
// every node restarts from) must be refused like a statement naming it,
// whatever the case or nesting of the name.
func TestAppendToMetaSchemaRefused(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := openFSM(t, db)
	defer f.close()
	conn, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	res, err := conn.Query(context.Background(), `SELECT 'evil' AS key, 1000000000::UBIGINT AS idx, 0::BIGINT AS ts, 0::BIGINT AS changed,
		NULL::VARCHAR AS err_type, NULL::VARCHAR AS err_msg, NULL::BLOB AS result`)
	if err != nil {
		t.Fatal(err)
	}
	chunk, err := res.Next()
	res.Close()
	if err != nil {
		t.Fatal(err)
	}
	enc, err := wire.AppendDataChunk(nil, chunk, wire.Q3)
	if err != nil {
		t.Fatal(err)
	}
	tests := []wal.Append{
		{Schema: metaSchema, Table: "keys", Chunk: enc},
		{Schema: "_DuckRaft", Table: "keys", Chunk: enc},
		{Schema: "x", Parents: []string{metaSchema}, Table: "keys", Chunk: enc},
	}
	for i, a := range tests {
		r := f.ApplyBatch([]*raft.Log{logEntry(t, uint64(i+1), wal.Command{Entry: a})})[0].(*entryResult)
		if err := r.results[0].err; !errors.Is(err, ErrRefused) {
			t.Errorf("append to %q.%s: err = %v, want refused", a.Path(), a.Table, err)
		}
	}
	if got := queryInt(t, db, "SELECT count(*) FROM "+metaSchema+".keys WHERE key = 'evil'"); got != 0 {
		t.Fatalf("%d rows appended to the applier's keys", got)
	}
	if f.Applied() != uint64(len(tests)) {
		t.Fatalf("applied = %d, want %d", f.Applied(), len(tests))
	}
}

// fsmHash is the state hash of f's database, as Store.StateHash reads it.
func fsmHash(t *testing.T, f *fsm) StateHash {
	t.Helper()
	conn, err := f.db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	schema, err := hashSchema(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	h, err := hashRows(ctx, conn, f.Applied(), schema)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestSnapshotNestedSchemasAndTriggers: DuckDB 2.0 nests schemas (two of
// one name in different parents, three deep, quoted names) and has
// triggers. A
// snapshot restores them, the triggers after the rows so that restoring
// fires none, and the restored copy hashes equal; a restore over a database
// with nested schemas of its own clears them first.
func TestSnapshotNestedSchemasAndTriggers(t *testing.T) {
	f := openFSM(t, openDB(t, t.TempDir()))
	defer f.close()
	cmds := []wal.Command{
		stmt("CREATE SCHEMA a"), stmt("CREATE SCHEMA a.b"), stmt("CREATE SCHEMA x"), stmt(`CREATE SCHEMA x."b"`),
		stmt(`CREATE SCHEMA a."odd ""name"""`), stmt("CREATE SCHEMA a.b.c"),
		stmt("CREATE TYPE a.b.mood AS ENUM ('sad', 'ok')"),
		stmt("CREATE SEQUENCE a.b.ids START 10"),
		stmt("CREATE SEQUENCE x.b.fresh START 5"),
		stmt(`CREATE TABLE a.b.t(id BIGINT DEFAULT nextval('a.b.ids'), m a.b.mood, twice BIGINT GENERATED ALWAYS AS (id * 2))`),
		stmt("CREATE TABLE x.b.t(id BIGINT, note VARCHAR)"),
		stmt(`CREATE TABLE a."odd ""name""".t(i INTEGER)`),
		stmt("CREATE TABLE a.b.c.deep(i INTEGER)"),
		stmt("CREATE TABLE log(what VARCHAR)"),
		stmt("CREATE TRIGGER on_t AFTER INSERT ON a.b.t INSERT INTO log VALUES ('a.b.t')"),
		stmt("CREATE TRIGGER on_x AFTER INSERT ON x.b.t FOR EACH ROW INSERT INTO log VALUES (NEW.note)"),
		stmt("INSERT INTO a.b.t(m) SELECT 'ok' FROM range(100)"),
		stmt("INSERT INTO x.b.t SELECT range, 'n' || range FROM range(3)"),
		stmt(`INSERT INTO a."odd ""name""".t VALUES (7)`),
		stmt("INSERT INTO a.b.c.deep VALUES (1), (2)"),
		stmt("CREATE VIEW a.b.v AS SELECT count(*) AS n FROM a.b.t"),
		stmt("CREATE INDEX t_m ON a.b.t(m)"),
	}
	for i, c := range cmds {
		r := f.ApplyBatch([]*raft.Log{logEntry(t, uint64(i+1), c)})[0].(*entryResult)
		if err := r.results[0].err; err != nil {
			t.Fatalf("%s: %v", c.Entry.(wal.Statement).SQL, err)
		}
	}
	want := fsmHash(t, f)

	g := restoredCopy(t, f)
	defer g.close()
	if got := fsmHash(t, g); got != want {
		t.Fatalf("restored hash %+v, want %+v", got, want)
	}
	checks := []struct {
		sql  string
		want int64
	}{
		{"SELECT count(*) FROM log", 4},
		{"SELECT count(*) FROM a.b.t WHERE m = 'ok' AND twice = id * 2", 100},
		{"SELECT n FROM a.b.v", 100},
		{"SELECT count(*) FROM x.b.t", 3},
		{`SELECT i FROM a."odd ""name""".t`, 7},
		{"SELECT sum(i)::BIGINT FROM a.b.c.deep", 3},
		{"SELECT last_value FROM duckdb_sequences() WHERE sequence_name = 'ids'", 109},
		{"SELECT start_value FROM duckdb_sequences() WHERE sequence_name = 'fresh' AND last_value IS NULL", 5},
		{"SELECT count(*) FROM duckdb_indexes() WHERE index_name = 't_m'", 1},
		{"SELECT count(*) FROM duckdb_triggers()", 2},
	}
	for _, c := range checks {
		if got := queryInt(t, g.db, c.sql); got != c.want {
			t.Errorf("restored: %s = %d, want %d", c.sql, got, c.want)
		}
	}
	// The triggers work on the restored copy as on the original.
	for _, h := range []*fsm{f, g} {
		r := h.ApplyBatch([]*raft.Log{logEntry(t, uint64(len(cmds)+1), stmt("INSERT INTO x.b.t VALUES (9, 'later')"))})[0].(*entryResult)
		if err := r.results[0].err; err != nil {
			t.Fatal(err)
		}
	}
	if a, b := fsmHash(t, f), fsmHash(t, g); a != b {
		t.Fatalf("after a write that fires a trigger: %+v and %+v", a, b)
	}

	// Restoring g's snapshot into f, which has nested schemas of its own
	// that the snapshot lacks, leaves f as g.
	h := restoredCopy(t, g)
	defer h.close()
	r := f.ApplyBatch([]*raft.Log{logEntry(t, uint64(len(cmds)+2), stmt("CREATE SCHEMA a.b.extra"))})[0].(*entryResult)
	if err := r.results[0].err; err != nil {
		t.Fatal(err)
	}
	snap, err := g.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if err := f.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got, want := fsmHash(t, f), fsmHash(t, g); got != want {
		t.Fatalf("restored over nested schemas: %+v, want %+v", got, want)
	}
	if got := queryInt(t, f.db, "SELECT count(*) FROM duckdb_schemas() WHERE schema_name = 'extra'"); got != 0 {
		t.Fatalf("a.b.extra survived the restore")
	}
}
