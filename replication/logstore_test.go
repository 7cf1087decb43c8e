package replication

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// logStores are the log stores every test of forEachLogStore runs with.
var logStores = []string{LogStoreBoltDB, LogStoreWAL}

// forEachLogStore runs test once per log store, with a Config modifier
// that picks it.
func forEachLogStore(t *testing.T, test func(t *testing.T, store func(*Config))) {
	for _, kind := range logStores {
		t.Run(kind, func(t *testing.T) {
			test(t, func(c *Config) { c.LogStore = kind })
		})
	}
}

// both applies the Config modifiers a and b in turn.
func both(a, b func(*Config)) func(*Config) {
	return func(c *Config) { a(c); b(c) }
}

// loseDatabase stops n and deletes its DuckDB files, leaving only its Raft
// state, so what n has after the next start came from its log store and
// snapshots.
func loseDatabase(t *testing.T, n *testNode) {
	t.Helper()
	n.stop(t, true)
	files, err := filepath.Glob(filepath.Join(n.dir, "duck.db*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("database files: %v %v", files, err)
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
}

// termOf returns s's current raft term.
func termOf(t *testing.T, s *Store) uint64 {
	t.Helper()
	term, err := strconv.ParseUint(s.Stats()["term"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return term
}

// TestLogStoreKeepsCommittedEntries: the committed entries, the term and
// the vote survive a restart in each log store. The database is deleted
// before the restart, so the rows can only come back from the log.
func TestLogStoreKeepsCommittedEntries(t *testing.T) {
	forEachLogStore(t, func(t *testing.T, store func(*Config)) {
		nodes := startCluster(t, 1, store)
		nd := nodes[0]
		mustExec(t, nd.store, stmt("CREATE TABLE t(id INTEGER PRIMARY KEY)"))
		const n = 30
		var last uint64
		for i := range n {
			last = mustExec(t, nd.store, stmt("INSERT INTO t VALUES (?)", i)).Index
		}
		term := termOf(t, nd.store)

		loseDatabase(t, nd)
		nd.start(t, true)
		waitLeader(t, nodes)
		waitApplied(t, nodes, last)
		if got := queryInt(t, nd.db, "SELECT count(*) FROM t"); got != n {
			t.Fatalf("after restart from the log alone: %d rows, want %d", got, n)
		}
		// A restarted node stands in the next term; one that lost its
		// stable state would stand in term 1 again.
		if got := termOf(t, nd.store); got <= term {
			t.Fatalf("term %d after restart, was %d: the stable store lost it", got, term)
		}
		var l raft.Log
		if err := nd.store.logs.GetLog(last, &l); err != nil || l.Type != raft.LogCommand {
			t.Fatalf("entry %d after restart: %v (type %v)", last, err, l.Type)
		}
		// The log goes on where it was.
		res := mustExec(t, nd.store, stmt("INSERT INTO t VALUES (?)", n))
		if res.Index <= last {
			t.Fatalf("new entry at %d, not after %d", res.Index, last)
		}
	})
}

// TestLogStoreCompacts: a snapshot truncates the head of each log store,
// and a node whose database is lost comes back from the snapshot plus the
// entries after it.
func TestLogStoreCompacts(t *testing.T) {
	forEachLogStore(t, func(t *testing.T, store func(*Config)) {
		small := func(c *Config) { c.SnapshotThreshold, c.TrailingLogs = 32, 8 }
		nodes := startCluster(t, 1, both(store, small))
		nd := nodes[0]
		mustExec(t, nd.store, stmt("CREATE TABLE t(id INTEGER)"))
		const n = 100
		for i := range n {
			mustExec(t, nd.store, stmt("INSERT INTO t VALUES (?)", i))
		}
		if err := nd.store.Snapshot(); err != nil {
			t.Fatal(err)
		}
		first, err := nd.store.logs.FirstIndex()
		if err != nil {
			t.Fatal(err)
		}
		lastIdx, err := nd.store.logs.LastIndex()
		if err != nil {
			t.Fatal(err)
		}
		// The snapshot is at the last index; TrailingLogs entries stay.
		if first <= 1 || lastIdx-first+1 > 8+1 {
			t.Fatalf("log holds %d..%d after the snapshot: not truncated to the trailing 8", first, lastIdx)
		}
		// Compacted entries are gone for readers too, so raft sends a
		// lagging follower the snapshot instead of the old entries.
		var l raft.Log
		if err := nd.store.logs.GetLog(first-1, &l); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("entry %d before the first index %d: %v, want ErrLogNotFound", first-1, first, err)
		}
		last := mustExec(t, nd.store, stmt("INSERT INTO t VALUES (?)", n)).Index

		loseDatabase(t, nd)
		nd.start(t, true)
		waitLeader(t, nodes)
		waitApplied(t, nodes, last)
		if got := queryInt(t, nd.db, "SELECT count(*) FROM t"); got != n+1 {
			t.Fatalf("after restart from snapshot and log: %d rows, want %d", got, n+1)
		}
	})
}

// TestLogStoreMismatchRefused: a node asked for one log store on a
// directory holding the other's state refuses to start, and creates
// nothing of the store it was asked for; started again with the right one
// it has its entries.
func TestLogStoreMismatchRefused(t *testing.T) {
	for _, tc := range []struct{ written, asked, askedFile string }{
		{LogStoreBoltDB, LogStoreWAL, "wal"},
		{LogStoreWAL, LogStoreBoltDB, "raft.db"},
	} {
		t.Run(tc.written+" then "+tc.asked, func(t *testing.T) {
			nodes := startCluster(t, 1, func(c *Config) { c.LogStore = tc.written })
			nd := nodes[0]
			mustExec(t, nd.store, stmt("CREATE TABLE t(id INTEGER)"))
			last := mustExec(t, nd.store, stmt("INSERT INTO t VALUES (1)")).Index
			nd.stop(t, false)

			cfg := Config{ID: nd.id, Dir: filepath.Join(nd.dir, "raft"), RaftAddr: "127.0.0.1:0", Bootstrap: true,
				DB: nd.db, TLS: memberTLS(t, nd.id), Logger: testLogger(), LogStore: tc.asked}
			s, err := Open(cfg)
			if err == nil {
				s.Close()
				t.Fatalf("opened %s state as %s", tc.written, tc.asked)
			}
			var mis *LogStoreMismatchError
			if !errors.As(err, &mis) || mis.Found != tc.written || mis.Want != tc.asked {
				t.Fatalf("open %s on %s state: %v, want a LogStoreMismatchError", tc.asked, tc.written, err)
			}
			if !strings.Contains(err.Error(), tc.written) {
				t.Errorf("error %q does not name the store found", err)
			}
			if _, err := os.Stat(filepath.Join(cfg.Dir, tc.askedFile)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("refused open left %s behind (%v)", tc.askedFile, err)
			}

			nd.mod = func(c *Config) { c.LogStore = tc.written }
			nd.start(t, true)
			waitLeader(t, nodes)
			waitApplied(t, nodes, last)
			if got := queryInt(t, nd.db, "SELECT count(*) FROM t"); got != 1 {
				t.Fatalf("after the refused start: %d rows, want 1", got)
			}
		})
	}
}

// TestWALCannotReadHugeEntries pins the raft-wal behaviour walMaxEntry
// guards against: it accepts an entry over segment.MaxEntrySize but cannot
// read it back. If a new raft-wal reads it, the bound can go.
func TestWALCannotReadHugeEntries(t *testing.T) {
	dir := t.TempDir()
	w, err := openRaftStore(LogStoreWAL, dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	huge := &raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: make([]byte, 65<<20)}
	if err := w.StoreLog(huge); err != nil {
		// Refused at write: safe, and the bound is no longer needed.
		w.Close()
		t.Fatalf("raft-wal now refuses huge entries (%v): walMaxEntry can go", err)
	}
	var l raft.Log
	readErr := w.GetLog(1, &l)
	w.Close()
	w, reopenErr := openRaftStore(LogStoreWAL, dir, hclog.NewNullLogger())
	if reopenErr == nil {
		readErr = errors.Join(readErr, w.GetLog(1, &l))
		w.Close()
	}
	if readErr == nil && reopenErr == nil {
		t.Fatal("raft-wal read a 65 MiB entry back: walMaxEntry can go")
	}
	t.Logf("raft-wal with a 65 MiB entry: read %v; reopen %v", readErr, reopenErr)
}

// TestWALRefusesOversizedCommand: with raft-wal, a command it could not
// read back is refused before it enters the log, and the node goes on.
func TestWALRefusesOversizedCommand(t *testing.T) {
	nodes := startCluster(t, 1, func(c *Config) { c.LogStore = LogStoreWAL })
	nd := nodes[0]
	mustExec(t, nd.store, stmt("CREATE TABLE t(s VARCHAR)"))
	big := stmt("INSERT INTO t VALUES (?)", strings.Repeat("x", walMaxEntry))
	if _, err := nd.store.Execute(context.Background(), big); !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("%d-byte command: %v, want ErrEntryTooLarge", walMaxEntry, err)
	}
	// Larger than an entry of several commands, within the bound.
	// Larger than an entry of several commands, within the bound: read
	// back from the log after the database is lost.
	const large = maxEntryBytes + 1
	last := mustExec(t, nd.store, stmt("INSERT INTO t VALUES (?)", strings.Repeat("y", large))).Index
	loseDatabase(t, nd)
	nd.start(t, true)
	waitLeader(t, nodes)
	waitApplied(t, nodes, last)
	if got := queryInt(t, nd.db, fmt.Sprintf("SELECT count(*) FROM t WHERE length(s) = %d", large)); got != 1 {
		t.Fatalf("%d rows of the large command after a restart, want 1", got)
	}
}

// TestLogStoreReopensAfterTailTruncation: a follower clears a conflicting
// suffix of its log (raft's DeleteRange up to the last index), appends the
// leader's entries, and is restarted: every entry reads back. raft-wal
// v0.4.0 marked the truncated segment sealed without writing its index, and
// the restarted node panicked in raft.NewRaft ("sealed segment has no index
// block", hashicorp/raft-wal#31; make chaos LOG_STORE=wal found it).
func TestLogStoreReopensAfterTailTruncation(t *testing.T) {
	for _, kind := range []string{LogStoreBoltDB, LogStoreWAL} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			s, err := openRaftStore(kind, dir, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			store := func(from, to, term uint64) {
				t.Helper()
				for i := from; i <= to; i++ {
					if err := s.StoreLog(&raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte(fmt.Sprint(i, term))}); err != nil {
						t.Fatal(err)
					}
				}
			}
			store(1, 10, 1)
			if err := s.DeleteRange(8, 10); err != nil {
				t.Fatal(err)
			}
			store(8, 12, 2)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = openRaftStore(kind, dir, hclog.NewNullLogger()); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i := uint64(1); i <= 12; i++ {
				var l raft.Log
				if err := s.GetLog(i, &l); err != nil {
					t.Fatalf("entry %d after the restart: %v", i, err)
				}
				want := fmt.Sprint(i, map[bool]int{true: 1, false: 2}[i < 8])
				if string(l.Data) != want {
					t.Fatalf("entry %d holds %q, want %q", i, l.Data, want)
				}
			}
		})
	}
}
