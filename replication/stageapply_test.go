package replication

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/wal"
)

// encodedRows returns the rows of query as encoded Q3 chunks.
func encodedRows(t *testing.T, db *engine.DB, query string) [][]byte {
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

// applyOne applies cmd as log entry idx and returns its result's error.
func applyOne(t *testing.T, f *fsm, idx uint64, cmd wal.Command) error {
	t.Helper()
	r, ok := f.ApplyBatch([]*raft.Log{logEntry(t, idx, cmd)})[0].(*entryResult)
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
	if got := queryInt(t, db, "SELECT count(*) FROM duckdb_tables() WHERE schema_name = '_duckraft' AND starts_with(table_name, 'stage_')"); got != 1 {
		t.Fatalf("%d staging tables, want 1", got)
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

// A client names the types of its chunks; the staging table's DDL is built
// from them, so nothing a client puts in a type may run as SQL on the
// nodes (the attack: an alias or collation that closes the column list).
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
		// Whether the stage is created or refused, nothing else runs.
		applyOne(t, f, uint64(i+1), wal.Command{Entry: wal.Stage{ID: uint64(100 + i), Chunks: [][]byte{enc}}})
	}
	if f.haltErr() != nil {
		t.Fatalf("the FSM halted: %v", f.haltErr())
	}
	if n := queryInt(t, db, "SELECT count(*) FROM duckdb_tables() WHERE table_name IN ('keys', 'pwned')"); n != 1 {
		t.Fatalf("%d of keys and pwned exist, want keys alone", n)
	}
	if f.Applied() != 5 {
		t.Fatalf("applied %d entries, want 5", f.Applied())
	}
}
