package routing

import (
	"reflect"
	"testing"

	"github.com/duckraft/duckraft/wal"
)

// TestTakeStages: runs of appends to one table become Stage entries of at
// most the limit (a chunk larger than it goes alone), each continuing its
// part at the rows sent before; a statement between appends starts a new
// run; before the final take, the open run keeps less than an entry.
func TestTakeStages(t *testing.T) {
	chunk := func(n int) []byte { return make([]byte, n) }
	txn := &pendingTxn{stager: &stager{id: 7}}
	for _, size := range []int{40, 40, 40, 150, 10} {
		txn.addAppend(wal.Append{Schema: "main", Table: "a", Chunk: chunk(size)}, uint64(size))
	}
	txn.add(wal.Statement{SQL: "UPDATE a SET i = 1"})
	txn.addAppend(wal.Append{Schema: "main", Table: "a", Chunk: chunk(30)}, 30)
	txn.addAppend(wal.Append{Schema: "s", Parents: []string{"p"}, Table: "b", Chunk: chunk(30)}, 30)
	if txn.buffered != 340 {
		t.Fatalf("buffered %d bytes, want 340", txn.buffered)
	}

	type want struct {
		part           uint32
		offset, chunks int
	}
	check := func(got []wal.Stage, wants []want) {
		t.Helper()
		if len(got) != len(wants) {
			t.Fatalf("%d entries, want %d: %+v", len(got), len(wants), got)
		}
		for i, w := range wants {
			if got[i].ID != 7 || got[i].Part != w.part || got[i].Offset != uint64(w.offset) || len(got[i].Chunks) != w.chunks {
				t.Errorf("entry %d: part %d offset %d with %d chunks, want %+v", i, got[i].Part, got[i].Offset, len(got[i].Chunks), w)
			}
		}
	}
	// The runs no append can join any more leave whole; the last, open
	// one keeps what is less than an entry (limit 100).
	check(txn.takeStages(100, false), []want{{0, 0, 2}, {0, 80, 1}, {0, 120, 1}, {0, 270, 1}, {1, 0, 1}})
	if txn.buffered != 30 {
		t.Fatalf("%d bytes buffered after the take, want the open run's 30", txn.buffered)
	}
	check(txn.takeStages(100, true), []want{{2, 0, 1}})
	if txn.buffered != 0 {
		t.Fatalf("%d bytes left after the final take", txn.buffered)
	}

	// The COMMIT's entries: each staged run becomes one Staged move with
	// the rows it sent, in client order around the statement, once the
	// stager has sent what was left.
	txn.addAppend(wal.Append{Schema: "s", Parents: []string{"p"}, Table: "b", Chunk: chunk(5)}, 5)
	st := &stager{id: 7, queue: make(chan wal.Stage, 4), stop: make(chan struct{}), done: make(chan struct{})}
	txn.stager = st
	var sent []wal.Stage
	go func() {
		defer close(st.done)
		<-st.stop
		for len(st.queue) > 0 {
			sent = append(sent, <-st.queue)
		}
	}()
	ts := &txns{stageSize: 100}
	entries, _, err := ts.commitEntries(txn)
	if err != nil {
		t.Fatal(err)
	}
	check(sent, []want{{2, 30, 1}})
	wantEntries := []wal.Entry{
		wal.Staged{ID: 7, Part: 0, Rows: 280, Schema: "main", Table: "a"},
		wal.Statement{SQL: "UPDATE a SET i = 1"},
		wal.Staged{ID: 7, Part: 1, Rows: 30, Schema: "main", Table: "a"},
		wal.Staged{ID: 7, Part: 2, Rows: 35, Schema: "s", Parents: []string{"p"}, Table: "b"},
	}
	if !reflect.DeepEqual(entries, wantEntries) {
		t.Fatalf("COMMIT entries\n got %+v\nwant %+v", entries, wantEntries)
	}
}

// A transaction that never staged keeps its appends as appends.
func TestCommitEntriesWithoutStaging(t *testing.T) {
	txn := &pendingTxn{}
	a := wal.Append{Schema: "main", Table: "a", Chunk: []byte{1}}
	txn.addAppend(a, 1)
	txn.addAppend(a, 1)
	txn.add(wal.Statement{SQL: "DELETE FROM a"})
	entries, _, err := (&txns{}).commitEntries(txn)
	if err != nil {
		t.Fatal(err)
	}
	if want := []wal.Entry{a, a, wal.Statement{SQL: "DELETE FROM a"}}; !reflect.DeepEqual(entries, want) {
		t.Fatalf("got %+v, want %+v", entries, want)
	}
}

// Appends that alternate between two tables make a run each; what stays
// buffered is still bounded by about one entry.
func TestTakeStagesAlternatingTables(t *testing.T) {
	txn := &pendingTxn{stager: &stager{id: 1}}
	const limit = 100
	var entries int
	for i := range 200 {
		table := []string{"a", "b"}[i%2]
		txn.addAppend(wal.Append{Schema: "main", Table: table, Chunk: make([]byte, 30)}, 1)
		if txn.buffered >= limit {
			entries += len(txn.takeStages(limit, false))
		}
		if txn.buffered > limit+30 {
			t.Fatalf("after append %d: %d bytes buffered, want at most %d", i, txn.buffered, limit+30)
		}
	}
	entries += len(txn.takeStages(limit, true))
	if entries != 200 || txn.parts != 200 {
		t.Fatalf("%d entries in %d parts, want one per run (200)", entries, txn.parts)
	}
}
