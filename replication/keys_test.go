package replication

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/wal"
)

func keyed(key, sql string) wal.Command {
	return wal.Command{Key: []byte(key), Timestamp: 1, Entry: wal.Statement{SQL: sql, Returning: true}}
}

// results applies one entry and returns its command results.
func results(t *testing.T, f *fsm, l *raft.Log) []cmdResult {
	t.Helper()
	r, ok := f.ApplyBatch([]*raft.Log{l})[0].(*entryResult)
	if !ok {
		t.Fatalf("entry %d: no entry result", l.Index)
	}
	return r.results
}

// applyEach applies each statement of sqls as its own entry, from index
// first on, and fails the test at the first that fails.
func applyEach(t *testing.T, f *fsm, first uint64, sqls ...string) {
	t.Helper()
	for i, sql := range sqls {
		if err := results(t, f, logEntry(t, first+uint64(i), stmt(sql)))[0].err; err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// TestKeysSurviveRestartAndRestore checks that a retried command is
// replayed, not applied, whether its first application is in the same
// entry, in memory, only in the database (after a restart) or only in a
// snapshot (after a restore), and that the window bounds all of them alike.
func TestKeysSurviveRestartAndRestore(t *testing.T) {
	const window = 10
	db := openDB(t, t.TempDir())
	defer db.Close()
	f, err := newFSM(db, window, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	results(t, f, logEntry(t, 1, stmt("CREATE TABLE t(i INTEGER PRIMARY KEY)")))
	r := results(t, f, logEntry(t, 2,
		keyed("a", "INSERT INTO t VALUES (1)"),
		keyed("b", "INSERT INTO t VALUES (1)"), // fails: duplicate
		keyed("a", "INSERT INTO t VALUES (1)"), // same entry: replayed
	))
	if r[0].err != nil || r[1].err == nil || r[2].err != nil || !r[2].res.Replayed || r[2].res.Index != 2 {
		t.Fatalf("entry 2 results: %+v", r)
	}
	first := r[0].res
	firstErr := r[1].err.Error()

	check := func(f *fsm, idx uint64, wantReplay bool) {
		t.Helper()
		r := results(t, f, logEntry(t, idx, keyed("a", "INSERT INTO t VALUES (1)"), keyed("b", "INSERT INTO t VALUES (2)")))
		if !wantReplay {
			if r[0].err == nil || r[1].err != nil || r[1].res.Replayed {
				t.Fatalf("entry %d outside the window: %+v", idx, r)
			}
			return
		}
		if r[0].err != nil || !r[0].res.Replayed || r[0].res.Index != 2 {
			t.Fatalf("entry %d: key a = %+v", idx, r[0])
		}
		want := *first
		want.Replayed = true
		if !reflect.DeepEqual(*r[0].res, want) {
			t.Fatalf("entry %d: replayed %+v, first %+v", idx, *r[0].res, want)
		}
		if r[1].err == nil || r[1].err.Error() != firstErr {
			t.Fatalf("entry %d: key b = %v, want %q", idx, r[1].err, firstErr)
		}
	}
	check(f, 3, true)

	// Restart: the cache is rebuilt from _duckraft.keys.
	f.close()
	if f, err = newFSM(db, window, testLogger()); err != nil {
		t.Fatal(err)
	}
	check(f, 4, true)

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	f.close()

	// Restore into another database: the keys come with the snapshot.
	dst := openDB(t, t.TempDir())
	defer dst.Close()
	g, err := newFSM(dst, window, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	results(t, g, logEntry(t, 1, keyed("a", "CREATE TABLE junk(i INT)")))
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	check(g, 5, true)
	check(g, 12, true)  // 12 - window = 2: still seen
	check(g, 13, false) // key a applied at 2 is out of the window
	if got := queryInt(t, dst, "SELECT count(*) FROM t"); got != 2 {
		t.Fatalf("rows = %d, want 2", got)
	}
}

// TestKeysOfRolledBackAttempt checks that a key recorded by an attempt that
// was rolled back (another command of the batch failed) is not remembered.
func TestKeysOfRolledBackAttempt(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := openFSM(t, db)
	defer f.close()
	results(t, f, logEntry(t, 1, stmt("CREATE TABLE t(i INTEGER PRIMARY KEY)")))
	r := results(t, f, logEntry(t, 2, keyed("a", "INSERT INTO t VALUES (1)"), stmt("INSERT INTO t VALUES (1)")))
	if r[0].err != nil || r[0].res.Replayed || r[1].err == nil {
		t.Fatalf("results: %+v", r)
	}
	if got := queryInt(t, db, "SELECT count(*) FROM _duckraft.keys WHERE key <> ''"); got != 1 {
		t.Fatalf("stored keys = %d, want 1", got)
	}
}

// TestCountResult checks that a DML statement without RETURNING returns
// exactly what DuckDB's query path returns: one BIGINT "Count" row.
func TestCountResult(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := openFSM(t, db)
	defer f.close()
	other := openDB(t, t.TempDir())
	defer other.Close()
	conn, err := other.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	cases := []string{
		"CREATE TABLE t(i INTEGER PRIMARY KEY, s VARCHAR)",
		"INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'returning')",
		"INSERT INTO t VALUES (1, 'x') ON CONFLICT DO NOTHING",
		"UPDATE t SET s = 'c' WHERE i >= 2",
		"DELETE FROM t WHERE i = 1",
	}
	for i, sql := range cases {
		r := results(t, f, logEntry(t, uint64(i+1), wal.Command{Entry: wal.Statement{SQL: sql, Returning: true}}))
		if r[0].err != nil {
			t.Fatalf("%s: %v", sql, r[0].err)
		}
		got := r[0].res
		q, err := conn.Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		want := &wal.Result{Columns: q.Names(), Types: q.Types()}
		for {
			c, err := q.Next()
			if err != nil {
				t.Fatal(err)
			}
			if c == nil {
				break
			}
			enc, err := wire.AppendDataChunk(nil, c, wire.Q3)
			if err != nil {
				t.Fatal(err)
			}
			want.Chunks = append(want.Chunks, enc)
		}
		q.Close()
		if !reflect.DeepEqual(got.Columns, want.Columns) || !reflect.DeepEqual(got.Types, want.Types) ||
			!reflect.DeepEqual(got.Chunks, want.Chunks) {
			t.Errorf("%s: got %+v, DuckDB returns %+v", sql, got, want)
		}
	}
}

// TestInvalidUTF8ErrorIsRecorded applies a hand-made keyed entry whose
// statement fails with an error that quotes bytes that are not UTF-8 (a
// leader never proposes one: DuckDB's parser refuses such text). Before,
// the key record could not be stored and the applier retried the batch
// forever; now the error is recorded with U+FFFD in place of the bytes,
// and a retry with the same key replays exactly the first answer.
func TestInvalidUTF8ErrorIsRecorded(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := openFSM(t, db)
	defer f.close()
	results(t, f, logEntry(t, 1, stmt("CREATE TABLE t(s VARCHAR)")))
	bad := wal.Command{Key: []byte("a"), Timestamp: 1, Entry: wal.Statement{SQL: "INSERT INTO \"t\xff\" VALUES (1)"}}
	apply := func(idx uint64) cmdResult {
		t.Helper()
		done := make(chan []cmdResult, 1)
		go func() { done <- f.ApplyBatch([]*raft.Log{logEntry(t, idx, bad)})[0].(*entryResult).results }()
		select {
		case r := <-done:
			return r[0]
		case <-time.After(time.Minute):
			t.Fatalf("entry %d was not applied within a minute: the applier is stuck on its key record", idx)
		}
		return cmdResult{}
	}
	first := apply(2)
	if first.err == nil || !utf8.ValidString(first.err.Error()) || !strings.Contains(first.err.Error(), "t\uFFFD") {
		t.Fatalf("first answer: %v, want an error naming t\\uFFFD", first.err)
	}
	again := apply(3)
	if again.err == nil || again.err.Error() != first.err.Error() {
		t.Fatalf("retry answered %v, want the first answer %v", again.err, first.err)
	}
	if got := queryInt(t, db, "SELECT count(*) FROM _duckraft.keys WHERE key <> '' AND err_msg IS NOT NULL"); got != 1 {
		t.Fatalf("recorded failed keys = %d, want 1", got)
	}
}

// TestKeyWriterLayouts writes batches of every row layout through the
// keyWriter's prepared INSERTs, and the same batches through the
// appender in their place, and checks the two tables hold the same
// rows, the applied index the batch's last, and a marker row only where
// the last entry left no key record.
func TestKeyWriterLayouts(t *testing.T) {
	ok := func(key string, idx uint64) *keyRecord {
		return &keyRecord{key: key, idx: idx, ts: int64(idx) * 10, changed: 1}
	}
	ret := func(key string, idx uint64) *keyRecord {
		r := ok(key, idx)
		r.result = []byte{0, 1, 2, 0xff}
		return r
	}
	failed := func(key string, idx uint64) *keyRecord {
		r := ok(key, idx)
		r.changed, r.failed, r.errType, r.errMsg = 0, true, "Constraint", "Duplicate key \"i: 1\""
		return r
	}
	var many []*keyRecord
	for i := range maxPreparedKeyRows + 3 {
		many = append(many, ok(fmt.Sprintf("m%d", i), uint64(100+i)))
	}
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := openFSM(t, db)
	defer f.close()
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		records  []*keyRecord
		last     uint64
		prepared bool
		marker   bool
	}{
		{"no keys", nil, 5, true, true},
		{"last entry keyed", []*keyRecord{ok("a", 7)}, 7, true, false},
		{"last entry unkeyed", []*keyRecord{ok("a", 7)}, 8, true, true},
		{"returning", []*keyRecord{ret("r", 9)}, 9, true, false},
		{"failed", []*keyRecord{failed("f", 10)}, 10, true, false},
		{"empty error type", []*keyRecord{{key: "e", idx: 11, failed: true, errMsg: "x"}}, 11, true, false},
		{"binary key", []*keyRecord{ok("\x00\xff", 12)}, 12, true, false},
		{"mixed", []*keyRecord{ok("a", 20), failed("b", 21), ret("c", 22), ok("d", 23)}, 24, true, true},
		{"full prepared", many[:maxPreparedKeyRows], many[maxPreparedKeyRows-1].idx, true, false},
		{"past prepared", many, many[len(many)-1].idx + 1, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tables [2]string
			for i, viaAppender := range []bool{false, true} {
				if _, err := f.conn.Exec(ctx, "DELETE FROM _duckraft.keys"); err != nil {
					t.Fatal(err)
				}
				f.keyWriter.reset()
				if err := f.conn.Begin(ctx); err != nil {
					t.Fatal(err)
				}
				var err error
				if viaAppender {
					err = appendKeys(f.conn, tc.records, tc.last, tc.marker)
				} else {
					err = f.keyWriter.store(tc.records, tc.last)
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := f.conn.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				if !viaAppender && (len(f.keyWriter.stmts) > 0) != tc.prepared {
					t.Errorf("%d prepared layouts kept, want prepared %v", len(f.keyWriter.stmts), tc.prepared)
				}
				applied, err := readApplied(f.conn)
				if err != nil {
					t.Fatal(err)
				}
				if applied != tc.last {
					t.Errorf("applied %d, want %d", applied, tc.last)
				}
				if got := queryInt(t, db, "SELECT count(*) FROM _duckraft.keys WHERE key = ''"); got != map[bool]int64{false: 0, true: 1}[tc.marker] {
					t.Errorf("%d marker rows, want marker %v", got, tc.marker)
				}
				res, err := f.conn.QueryStrings(ctx, "SELECT concat_ws('|', key, idx, ts, changed, coalesce(err_type, '<null>'), "+
					"coalesce(err_msg, '<null>'), coalesce(hex(result), '<null>')) FROM _duckraft.keys ORDER BY idx, key")
				if err != nil {
					t.Fatal(err)
				}
				tables[i] = strings.Join(res, "\n")
			}
			if tables[0] != tables[1] {
				t.Errorf("prepared:\n%s\nappender:\n%s", tables[0], tables[1])
			}
		})
	}
}
