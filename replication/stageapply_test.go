package replication

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"strconv"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/wal"
)

// encodedRows returns the rows of query as encoded Q3 chunks.
func encodedRows(t testing.TB, db *engine.DB, query string) [][]byte {
	t.Helper()
	conn, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	res, err := conn.Query(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	var out [][]byte
	for {
		c, err := res.Next()
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			return out
		}
		enc, err := wire.AppendDataChunk(nil, c, wire.Q3)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, enc)
	}
}

// applyOne stores cmd as log entry idx in f's log, as raft does before it
// applies an entry, applies it and returns its result's error.
func applyOne(t *testing.T, f *fsm, idx uint64, cmd wal.Command) error {
	t.Helper()
	l := logEntry(t, idx, cmd)
	if err := f.stageLog.StoreLog(l); err != nil {
		t.Fatal(err)
	}
	r, ok := f.ApplyBatch([]*raft.Log{l})[0].(*entryResult)
	if !ok {
		t.Fatalf("entry %d: no result", idx)
	}
	return r.results[0].err
}

func TestStagedTransactionCommitsAtomically(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := openFSM(t, db)
	defer f.close()
	chunks := encodedRows(t, db, "SELECT i::INTEGER AS i, 'v' || i AS s FROM range(5000) r(i)")
	if len(chunks) < 2 {
		t.Fatalf("want several chunks, got %d", len(chunks))
	}
	const id = 0xfeedface
	idx := uint64(0)
	next := func() uint64 { idx++; return idx }
	offset := uint64(0)
	for _, c := range chunks {
		if err := applyOne(t, f, next(), wal.Command{Timestamp: 100, Entry: wal.Stage{ID: id, Offset: offset, Chunks: [][]byte{c}}}); err != nil {
			t.Fatal(err)
		}
		offset = uint64(queryInt(t, db, "SELECT rows FROM _duckraft.stages WHERE id = 4277009102"))
	}
	if offset != 5000 {
		t.Fatalf("staged %d rows, want 5000", offset)
	}
	// The rows stay in the log: the database lists the entries that hold
	// them, and the log keeps them from the first on.
	if n := queryInt(t, db, "SELECT count(*) FROM _duckraft.staged_entries WHERE idx IS NOT NULL AND body IS NULL"); n != int64(len(chunks)) {
		t.Fatalf("%d entries listed by log index, want %d", n, len(chunks))
	}
	if n := queryInt(t, db, "SELECT count(*) FROM duckdb_tables() WHERE schema_name = '_duckraft' AND starts_with(table_name, 'stage_')"); n != 0 {
		t.Fatalf("%d staging tables: the rows were written to the database before the commit", n)
	}
	if k := f.holds.keep(); k != 1 {
		t.Fatalf("the log is kept from %d, want 1 (the first Stage entry)", k)
	}
	// The rows are invisible until the transaction commits.
	if n := queryInt(t, db, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 't'"); n != 0 {
		t.Fatal("target exists before commit")
	}

	// A stage entry that does not continue the part is refused, and so is a
	// commit that expects other rows: the whole transaction fails.
	if err := applyOne(t, f, next(), wal.Command{Entry: wal.Stage{ID: id, Offset: 10, Chunks: chunks[:1]}}); err == nil {
		t.Fatal("a stage entry with a gap applied")
	}
	bad := wal.Txn{Entries: []wal.Entry{
		wal.Statement{SQL: "CREATE TABLE t (i INTEGER, s VARCHAR)"},
		wal.Staged{ID: id, Rows: 4999, Schema: "main", Table: "t"},
	}}
	if err := applyOne(t, f, next(), wal.Command{Entry: bad}); err == nil {
		t.Fatal("a commit expecting the wrong row count applied")
	}
	if n := queryInt(t, db, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 't'"); n != 0 {
		t.Fatal("a failed transaction left its table")
	}

	good := bad
	good.Entries = []wal.Entry{bad.Entries[0], wal.Staged{ID: id, Rows: 5000, Schema: "main", Table: "t"}}
	if err := applyOne(t, f, next(), wal.Command{Entry: good}); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM t WHERE s = 'v' || i"); n != 5000 {
		t.Fatalf("committed %d rows, want 5000", n)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM duckdb_tables() WHERE schema_name = '_duckraft' AND starts_with(table_name, 'stage_')"); n != 0 {
		t.Fatalf("%d staging tables left after commit", n)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM _duckraft.stages"); n != 0 {
		t.Fatalf("%d stages listed after commit", n)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM _duckraft.staged_entries"); n != 0 {
		t.Fatalf("%d staged entries listed after commit", n)
	}
	if k := f.holds.keep(); k != 0 {
		t.Fatalf("the log is still kept from %d after the commit", k)
	}
	// Committing again finds the stage gone.
	again := wal.Txn{Entries: []wal.Entry{wal.Staged{ID: id, Rows: 5000, Schema: "main", Table: "t"}, wal.Statement{SQL: "SELECT 1"}}}
	if err := applyOne(t, f, next(), wal.Command{Entry: again}); !errors.Is(err, ErrStageGone) {
		t.Fatalf("second commit: err = %v, want ErrStageGone", err)
	}
}

func TestUnstageKeepsStagesInUse(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := openFSM(t, db)
	defer f.close()
	chunk := encodedRows(t, db, "SELECT 1::BIGINT AS x")[0]
	for i, cmd := range []wal.Command{
		{Timestamp: 1000, Entry: wal.Stage{ID: 1, Chunks: [][]byte{chunk}}},
		{Timestamp: 1000, Entry: wal.Stage{ID: 1, Part: 1, Chunks: [][]byte{chunk}}},
		{Timestamp: 5000, Entry: wal.Stage{ID: 2, Chunks: [][]byte{chunk}}},
		// The sweep drops what was idle since before 2000: stage 1 only.
		{Entry: wal.Unstage{ID: 1, IdleBefore: 2000}},
		{Entry: wal.Unstage{ID: 2, IdleBefore: 2000}},
	} {
		if err := applyOne(t, f, uint64(i+1), cmd); err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
	}
	if got := queryInt(t, db, "SELECT count(*) FROM _duckraft.stages WHERE id = 2"); got != 1 {
		t.Fatalf("stage 2 listed %d times, want 1 (it was written after the sweep's time)", got)
	}
	if got := queryInt(t, db, "SELECT count(*) FROM _duckraft.stages"); got != 1 {
		t.Fatalf("%d stages listed, want 1", got)
	}
	if got := queryInt(t, db, "SELECT count(*) FROM _duckraft.staged_entries"); got != 1 {
		t.Fatalf("%d staged entries listed, want stage 2's one", got)
	}
	// A client's rollback drops whatever the stage holds.
	if err := applyOne(t, f, 6, wal.Command{Entry: wal.Unstage{ID: 2, IdleBefore: math.MaxInt64}}); err != nil {
		t.Fatal(err)
	}
	if got := queryInt(t, db, "SELECT count(*) FROM _duckraft.stages"); got != 0 {
		t.Fatalf("%d stages left after rollback", got)
	}
	// A stage entry that continues a dropped part is refused.
	err := applyOne(t, f, 7, wal.Command{Entry: wal.Stage{ID: 2, Offset: 1, Chunks: [][]byte{chunk}}})
	if !errors.Is(err, ErrStageGone) {
		t.Fatalf("err = %v, want ErrStageGone", err)
	}
}

func TestStagedIntoMetaSchemaRefused(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := openFSM(t, db)
	defer f.close()
	chunk := encodedRows(t, db, "SELECT 'evil' AS key, 1000000000::UBIGINT AS idx, 0::BIGINT AS ts, 0::BIGINT AS changed, NULL::VARCHAR AS err_type, NULL::VARCHAR AS err_msg, NULL::BLOB AS result")[0]
	if err := applyOne(t, f, 1, wal.Command{Entry: wal.Stage{ID: 1, Chunks: [][]byte{chunk}}}); err != nil {
		t.Fatal(err)
	}
	for i, target := range []wal.Staged{
		{ID: 1, Rows: 1, Schema: "_DuckRaft", Table: "keys"},
		{ID: 1, Rows: 1, Schema: "x", Parents: []string{metaSchema}, Table: "keys"},
	} {
		if err := applyOne(t, f, uint64(i+2), wal.Command{Entry: target}); !errors.Is(err, ErrRefused) {
			t.Errorf("staged into %v: err = %v, want refused", target.Path(), err)
		}
	}
	if got := queryInt(t, db, "SELECT count(*) FROM _duckraft.keys WHERE key = 'evil'"); got != 0 {
		t.Fatal("staged rows reached the applier's keys")
	}
}

// A node restored from a snapshot taken while a transaction was staging
// commits it as the others do.
func TestSnapshotCarriesStages(t *testing.T) {
	src := openDB(t, t.TempDir())
	defer src.Close()
	f := openFSM(t, src)
	defer f.close()
	chunks := encodedRows(t, src, "SELECT i AS i, [i, i + 1] AS l FROM range(3000) r(i)")
	var offset uint64
	idx := uint64(0)
	for _, c := range chunks {
		idx++
		if err := applyOne(t, f, idx, wal.Command{Timestamp: 7, Entry: wal.Stage{ID: 42, Offset: offset, Chunks: [][]byte{c}}}); err != nil {
			t.Fatal(err)
		}
		offset = uint64(queryInt(t, src, "SELECT rows FROM _duckraft.stages WHERE id = 42"))
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	dst := openDB(t, t.TempDir())
	defer dst.Close()
	g := openFSM(t, dst)
	defer g.close()
	// What the restored node staged before is replaced by the snapshot's.
	if err := applyOne(t, g, 1, wal.Command{Entry: wal.Stage{ID: 99, Chunks: chunks[:1]}}); err != nil {
		t.Fatal(err)
	}
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got := queryInt(t, dst, "SELECT count(*) FROM _duckraft.stages"); got != 1 {
		t.Fatalf("%d stages after restore, want 1", got)
	}
	commit := wal.Command{Entry: wal.Txn{Entries: []wal.Entry{
		wal.Statement{SQL: "CREATE TABLE t (i BIGINT, l BIGINT[])"},
		wal.Staged{ID: 42, Rows: 3000, Schema: "main", Table: "t"},
	}}}
	for _, n := range []struct {
		f  *fsm
		db *engine.DB
	}{{f, src}, {g, dst}} {
		if err := applyOne(t, n.f, idx+1, commit); err != nil {
			t.Fatal(err)
		}
		if got := queryInt(t, n.db, "SELECT count(*) FROM t WHERE l = [i, i + 1]"); got != 3000 {
			t.Fatalf("%d rows committed, want 3000", got)
		}
	}
}

// A client names the types of its chunks, and its staged rows are cast to
// them on the way into their table (and into a staging table of those types
// by older builds), so nothing a client puts in a type may run as SQL on
// the nodes (the attack: an alias or collation that closes the column list).
func TestStageTypesCannotInjectSQL(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := openFSM(t, db)
	defer f.close()
	evil := "INTEGER); DROP TABLE _duckraft.keys; CREATE TABLE pwned(i INTEGER); --"
	for i, typ := range []wire.LogicalType{
		{ID: wire.TypeInteger, Alias: evil},
		{ID: wire.TypeVarchar, Collation: "nocase); DROP TABLE _duckraft.keys; --"},
		{ID: wire.TypeList, Child: &wire.LogicalType{ID: wire.TypeInteger, Alias: evil}},
		{ID: wire.TypeStruct, Fields: []wire.Field{{Name: `a" INTEGER); DROP TABLE _duckraft.keys; --`, Type: wire.LogicalType{ID: wire.TypeInteger}}}},
		{ID: wire.TypeEnum, EnumValues: []string{"x'); DROP TABLE _duckraft.keys; --"}},
	} {
		var value any = int32(1)
		switch typ.ID {
		case wire.TypeVarchar:
			value = "v"
		case wire.TypeList:
			value = []any{int32(1)}
		case wire.TypeStruct:
			value = []any{int32(1)}
		case wire.TypeEnum:
			value = typ.EnumValues[0]
		}
		chunk, err := wire.ChunkFromRows([]wire.LogicalType{typ}, [][]any{{value}})
		if err != nil {
			t.Fatalf("type %d: %v", i, err)
		}
		enc, err := wire.AppendDataChunk(nil, chunk, wire.Q3)
		if err != nil {
			t.Fatalf("type %d: %v", i, err)
		}
		// Whether the rows are staged and committed or refused, nothing
		// else runs.
		applyOne(t, f, uint64(2*i+1), wal.Command{Entry: wal.Stage{ID: uint64(100 + i), Chunks: [][]byte{enc}}})
		applyOne(t, f, uint64(2*i+2), wal.Command{Entry: wal.Txn{Entries: []wal.Entry{
			wal.Statement{SQL: "CREATE TABLE t" + strconv.Itoa(i) + " (v VARCHAR)"},
			wal.Staged{ID: uint64(100 + i), Rows: 1, Schema: "main", Table: "t" + strconv.Itoa(i)},
		}}})
	}
	if f.haltErr() != nil {
		t.Fatalf("the FSM halted: %v", f.haltErr())
	}
	if n := queryInt(t, db, "SELECT count(*) FROM duckdb_tables() WHERE table_name IN ('keys', 'pwned')"); n != 1 {
		t.Fatalf("%d of keys and pwned exist, want keys alone", n)
	}
	if f.Applied() != 10 {
		t.Fatalf("applied %d entries, want 10", f.Applied())
	}
}

// encodeChunk is the Q3 encoding of rows of the given types.
func encodeChunk(t *testing.T, types []wire.LogicalType, rows [][]any) []byte {
	t.Helper()
	c, err := wire.ChunkFromRows(types, rows)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := wire.AppendDataChunk(nil, c, wire.Q3)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// Rows read back from the log at the COMMIT reach their table as they did
// through the staging table of older builds: cast to the types of the
// part's first rows, then into the table's columns. The same entries are
// applied both ways, on a node whose part is in the log and on one that has
// the part's staging table (as after an upgrade in the middle of the
// transaction), and both tables must hold the same rows, or both commits
// fail.
func TestStagedRowsMatchStagingTable(t *testing.T) {
	integer := []wire.LogicalType{{ID: wire.TypeInteger}}
	double := []wire.LogicalType{{ID: wire.TypeDouble}}
	varchar := []wire.LogicalType{{ID: wire.TypeVarchar}}
	for _, tc := range []struct {
		name   string
		chunks [][]byte
		target string
	}{
		{"same types", [][]byte{encodeChunk(t, integer, [][]any{{int32(1)}, {nil}}), encodeChunk(t, integer, [][]any{{int32(3)}})}, "v BIGINT"},
		// The part's first rows are INTEGER: the doubles are rounded on the
		// way, although the table's column is a DOUBLE.
		{"cast to the first rows' types", [][]byte{encodeChunk(t, integer, [][]any{{int32(1)}}), encodeChunk(t, double, [][]any{{1.5}, {2.5}})}, "v DOUBLE"},
		{"cast into the table", [][]byte{encodeChunk(t, varchar, [][]any{{"12"}, {"x"}})}, "v VARCHAR"},
		{"a cast that fails", [][]byte{encodeChunk(t, varchar, [][]any{{"12"}, {"x"}})}, "v INTEGER"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const id = 0xabc
			var contents [2]string
			var commitErr [2]error
			for i, legacy := range []bool{false, true} {
				db := openDB(t, t.TempDir())
				defer db.Close()
				f := openFSM(t, db)
				defer f.close()
				if legacy {
					if _, err := f.conn.Exec(context.Background(), "CREATE TABLE _duckraft."+stageTable(id, 0)+" (c1 "+stageType(mustDecode(t, tc.chunks[0]).Columns[0].Type).String()+")"); err != nil {
						t.Fatal(err)
					}
				}
				var offset uint64
				for j, c := range tc.chunks {
					if err := applyOne(t, f, uint64(j+1), wal.Command{Entry: wal.Stage{ID: id, Offset: offset, Chunks: [][]byte{c}}}); err != nil {
						// The older builds refused a cast at the append;
						// the transaction then fails at its COMMIT.
						t.Logf("legacy %v: stage %d: %v", legacy, j, err)
					}
					offset += uint64(mustDecode(t, c).Rows)
				}
				commitErr[i] = applyOne(t, f, uint64(len(tc.chunks)+1), wal.Command{Entry: wal.Txn{Entries: []wal.Entry{
					wal.Statement{SQL: "CREATE TABLE t (" + tc.target + ")"},
					wal.Staged{ID: id, Rows: offset, Schema: "main", Table: "t"},
				}}})
				if commitErr[i] == nil {
					rows, err := f.conn.QueryStrings(context.Background(), "SELECT string_agg(coalesce(v::VARCHAR, 'NULL'), ',' ORDER BY rowid) FROM t")
					if err != nil {
						t.Fatal(err)
					}
					contents[i] = rows[0]
				}
			}
			if (commitErr[0] == nil) != (commitErr[1] == nil) {
				t.Fatalf("commit from the log: %v; from a staging table: %v", commitErr[0], commitErr[1])
			}
			if contents[0] != contents[1] {
				t.Fatalf("from the log %q, from a staging table %q", contents[0], contents[1])
			}
			t.Logf("committed %q (err %v)", contents[0], commitErr[0])
		})
	}
}

func mustDecode(t testing.TB, b []byte) *wire.DataChunk {
	t.Helper()
	c, err := wire.DecodeDataChunk(wire.NewReader(b), wire.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The log keeps the entries that hold an open part's rows: a compaction of
// its head stops before the first of them, and so does one while a
// snapshot that reads them is being written; after the COMMIT, or the
// snapshot's release, the log is compacted as raft asks.
func TestLogKeepsStagedEntries(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := openFSM(t, db)
	defer f.close()
	cache, err := newLogCache(4, 1<<20, raft.NewInmemStore())
	if err != nil {
		t.Fatal(err)
	}
	cache.keep = f.holds.keep
	f.stageLog = cache
	chunk := encodedRows(t, db, "SELECT i FROM range(10) r(i)")[0]
	cmds := []wal.Command{
		stmt("CREATE TABLE a (i BIGINT)"),
		{Entry: wal.Stage{ID: 5, Chunks: [][]byte{chunk}}},
		stmt("INSERT INTO a VALUES (1)"),
		{Entry: wal.Stage{ID: 5, Offset: 10, Chunks: [][]byte{chunk}}},
		stmt("INSERT INTO a VALUES (2)"),
	}
	for i, c := range cmds {
		if err := applyOne(t, f, uint64(i+1), c); err != nil {
			t.Fatal(err)
		}
	}
	first := func() uint64 {
		t.Helper()
		n, err := cache.FirstIndex()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := cache.DeleteRange(1, 4); err != nil {
		t.Fatal(err)
	}
	if got := first(); got != 2 {
		t.Fatalf("first index %d after compacting to 4, want 2 (the first Stage entry)", got)
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := applyOne(t, f, 6, wal.Command{Entry: wal.Txn{Entries: []wal.Entry{
		wal.Statement{SQL: "CREATE TABLE t (i BIGINT)"},
		wal.Staged{ID: 5, Rows: 20, Schema: "main", Table: "t"},
	}}}); err != nil {
		t.Fatal(err)
	}
	if got := queryInt(t, db, "SELECT count(*) FROM t"); got != 20 {
		t.Fatalf("%d rows committed, want 20", got)
	}
	// The snapshot, pinned before the commit, still reads the entries.
	if err := cache.DeleteRange(2, 5); err != nil {
		t.Fatal(err)
	}
	if got := first(); got != 2 {
		t.Fatalf("first index %d while a snapshot reads from 2", got)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if err := cache.DeleteRange(2, 5); err != nil {
		t.Fatal(err)
	}
	if got := first(); got != 6 {
		t.Fatalf("first index %d after the commit and the snapshot's release, want 6", got)
	}

	// The snapshot carried the open part: restored elsewhere, it commits.
	dst := openDB(t, t.TempDir())
	defer dst.Close()
	g := openFSM(t, dst)
	defer g.close()
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if err := applyOne(t, g, 6, wal.Command{Entry: wal.Txn{Entries: []wal.Entry{
		wal.Statement{SQL: "CREATE TABLE t (i BIGINT)"},
		wal.Staged{ID: 5, Rows: 20, Schema: "main", Table: "t"},
	}}}); err != nil {
		t.Fatal(err)
	}
	if got := queryInt(t, dst, "SELECT count(*) FROM t"); got != 20 {
		t.Fatalf("%d rows committed on the restored node, want 20", got)
	}
}

// The whole log is deleted as raft asks (after it installs a snapshot, which
// carries the staged rows), and so is its tail (a follower's conflicting
// entries), whatever is kept.
func TestLogCacheDeletesWholeLogAndTail(t *testing.T) {
	cache, err := newLogCache(4, 1<<20, raft.NewInmemStore())
	if err != nil {
		t.Fatal(err)
	}
	cache.keep = func() uint64 { return 3 }
	for i := uint64(1); i <= 6; i++ {
		if err := cache.StoreLog(&raft.Log{Index: i, Type: raft.LogCommand}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cache.DeleteRange(5, 6); err != nil {
		t.Fatal(err)
	}
	if last, _ := cache.LastIndex(); last != 4 {
		t.Fatalf("last index %d after deleting the tail from 5, want 4", last)
	}
	if err := cache.DeleteRange(1, 4); err != nil {
		t.Fatal(err)
	}
	if first, _ := cache.FirstIndex(); first != 0 {
		t.Fatalf("first index %d after deleting the whole log, want 0 (empty)", first)
	}
}

// A node that restarts in the middle of a staged transaction (its database
// reopened, its log as raft left it) keeps the log from the part's first
// entry and commits the rows from it.
func TestStagedCommitAfterRestart(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	f := openFSM(t, db)
	logs := f.stageLog
	chunks := encodedRows(t, db, "SELECT i, i::VARCHAR AS s FROM range(4000) r(i)")
	var offset uint64
	for i, c := range chunks {
		if err := applyOne(t, f, uint64(i+1), wal.Command{Entry: wal.Stage{ID: 9, Offset: offset, Chunks: [][]byte{c}}}); err != nil {
			t.Fatal(err)
		}
		offset += uint64(mustDecode(t, c).Rows)
	}
	f.close()
	db.Close()

	db = openDB(t, dir)
	defer db.Close()
	f = openFSM(t, db)
	defer f.close()
	f.stageLog = logs
	if k := f.holds.keep(); k != 1 {
		t.Fatalf("reopened, the log is kept from %d, want 1", k)
	}
	if err := applyOne(t, f, uint64(len(chunks)+1), wal.Command{Entry: wal.Txn{Entries: []wal.Entry{
		wal.Statement{SQL: "CREATE TABLE t (i BIGINT, s VARCHAR)"},
		wal.Staged{ID: 9, Rows: offset, Schema: "main", Table: "t"},
	}}}); err != nil {
		t.Fatal(err)
	}
	if got := queryInt(t, db, "SELECT count(*) FROM t WHERE s = i::VARCHAR"); got != 4000 {
		t.Fatalf("%d rows committed after the restart, want 4000", got)
	}
}
