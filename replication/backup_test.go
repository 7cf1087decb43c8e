package replication

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/duckraft/duckraft/node/engine"
)

// TestBackupUnderWritesRestores takes a backup while writes go on, checks
// that a plain DuckDB opens the file and reads the rows, and that a node
// bootstrapped from it holds the source's state hash at the backup's index
// and goes on applying writes after it.
func TestBackupUnderWritesRestores(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	s := nodes[0].store
	mustExec(t, s, stmt("CREATE SEQUENCE seq"))
	mustExec(t, s, stmt("CREATE TABLE t(id BIGINT DEFAULT nextval('seq'), v VARCHAR)"))
	mustExec(t, s, stmt("CREATE VIEW tv AS SELECT count(*) AS n FROM t"))
	mustExec(t, s, stmt("INSERT INTO t(v) SELECT 'row ' || i FROM range(5000) r(i)"))

	var stop atomic.Bool
	var wg sync.WaitGroup
	var writes atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if _, err := s.Execute(context.Background(), stmt("INSERT INTO t(v) VALUES ('during')")); err != nil {
				t.Errorf("write during backup: %v", err)
				return
			}
			writes.Add(1)
		}
	}()
	waitFor(t, 30*time.Second, "writes under way", func() bool { return writes.Load() >= 5 })
	path := filepath.Join(t.TempDir(), "backup.duckdb")
	h, err := s.WriteBackup(context.Background(), path)
	// A few more writes after the pin, so the source moves past it.
	n := writes.Load()
	waitFor(t, 30*time.Second, "writes after the backup", func() bool { return writes.Load() >= n+5 })
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	// The backup is the whole database: for its owner only (scheduled
	// backups were 0644, as DuckDB creates files).
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Fatalf("the backup left %d files beside it", len(entries)-1)
	}
	if h.Index == 0 || h.Index >= s.AppliedIndex() {
		t.Fatalf("backup index %d, source applied %d: want a pinned index behind the source", h.Index, s.AppliedIndex())
	}
	if _, err := os.Stat(path + ".wal"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("backup left a WAL beside it: %v", err)
	}

	// A plain DuckDB reads it.
	plain, err := sql.Open("duckdb", path+"?access_mode=READ_ONLY")
	if err != nil {
		t.Fatal(err)
	}
	var count, viewCount int64
	if err := plain.QueryRow("SELECT count(*) FROM t").Scan(&count); err != nil {
		t.Fatalf("plain DuckDB reads the backup: %v", err)
	}
	if err := plain.QueryRow("SELECT n FROM tv").Scan(&viewCount); err != nil || viewCount != count {
		t.Fatalf("view: %d, %v; want %d", viewCount, err, count)
	}
	var idx uint64
	if err := plain.QueryRow(AppliedQuery).Scan(&idx); err != nil || idx != h.Index {
		t.Fatalf("applied index in the backup: %d, %v; want %d", idx, err, h.Index)
	}
	plain.Close()
	if count != h.Rows || count < 5005 {
		t.Fatalf("backup holds %d rows, hash counted %d", count, h.Rows)
	}

	// Another backup's hash, or a hash of this one's rows changed, is not
	// this backup's.
	for _, want := range []StateHash{{Index: h.Index + 1, Hash: h.Hash, Rows: h.Rows},
		{Index: h.Index, Hash: h.Hash, Rows: h.Rows - 1}, {Index: h.Index, Hash: strings.Repeat("0", 64), Rows: h.Rows}} {
		target := filepath.Join(t.TempDir(), "duck.db")
		if _, err := InstallBackup(path, target, &want); !errors.Is(err, ErrBackupHashMismatch) {
			t.Fatalf("install against %+v: %v, want ErrBackupHashMismatch", want, err)
		}
		if entries, _ := os.ReadDir(filepath.Dir(target)); len(entries) != 0 {
			t.Fatalf("a refused restore left %v behind", entries)
		}
	}

	// A new single-node cluster seeded from it, checked against its hash.
	dir := t.TempDir()
	got, err := InstallBackup(path, filepath.Join(dir, "duck.db"), &h)
	if err != nil || got != h {
		t.Fatalf("install: %+v, %v; want %+v", got, err, h)
	}
	r := &testNode{id: "r0", dir: dir}
	t.Cleanup(func() { r.stop(t, true) })
	r.start(t, true)
	waitLeader(t, []*testNode{r})
	rh, err := r.store.StateHash(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rh.Index != h.Index || rh.Hash != h.Hash || rh.Rows != h.Rows {
		t.Fatalf("restored state %+v, source at the backup %+v", rh, h)
	}
	res := mustExec(t, r.store, stmt("INSERT INTO t(v) VALUES ('after restore')"))
	if res.Index <= h.Index {
		t.Fatalf("first write after restore at index %d, not after the backup's %d", res.Index, h.Index)
	}
	if got := queryInt(t, r.db, "SELECT count(*) FROM t"); got != count+1 {
		t.Fatalf("restored node has %d rows after a write, want %d", got, count+1)
	}

	// A joiner receives the restored state through a Raft snapshot.
	j := &testNode{id: "r1", dir: t.TempDir()}
	t.Cleanup(func() { j.stop(t, true) })
	j.start(t, false)
	if err := r.store.Join(j.id, j.addr, true); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, []*testNode{r, j}, res.Index)
	jh, err := j.store.StateHash(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	lh, err := r.store.StateHash(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if jh.Hash != lh.Hash {
		t.Fatalf("joiner %+v, leader %+v", jh, lh)
	}
}

func TestInstallBackupRefuses(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.duckdb")
	if err := os.WriteFile(junk, []byte("this is not a DuckDB database, only text that claims to be one"), 0o600); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain.duckdb")
	db, err := engine.Open(plain, engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(context.Background(), "CREATE TABLE t AS SELECT 1 AS i"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	db.Close()
	for _, tc := range []struct{ name, file string }{
		{"not DuckDB", junk},
		{"DuckDB without duckraft's index", plain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "duck.db")
			_, err := InstallBackup(tc.file, target, nil)
			if !errors.Is(err, ErrNotBackup) {
				t.Fatalf("err = %v, want ErrNotBackup", err)
			}
			entries, _ := os.ReadDir(filepath.Dir(target))
			if len(entries) != 0 {
				t.Fatalf("a refused restore left %v behind", entries)
			}
		})
	}
	t.Run("existing database", func(t *testing.T) {
		if _, err := InstallBackup(plain, plain, nil); err == nil {
			t.Fatal("restore over an existing database succeeded")
		}
	})
}

// BenchmarkBackup measures WriteBackup on a database of
// DUCKRAFT_BACKUP_ROWS rows (default 3 M, the layout of
// BenchmarkSnapshotPin): how long the apply goroutine is held while the
// view is pinned and the schema hashed, how long the file takes, its size,
// and the most Go heap in use meanwhile, which must not grow with the
// database.
func BenchmarkBackup(b *testing.B) {
	rows := "3000000"
	if v := os.Getenv("DUCKRAFT_BACKUP_ROWS"); v != "" {
		rows = v
	}
	nodes := startCluster(b, 1, nil)
	s := nodes[0].store
	mustExec(b, s, stmt("CREATE TABLE big AS SELECT range AS id, md5(range::VARCHAR) || md5((range + 1)::VARCHAR) AS s, range * 1.5 AS d FROM range("+rows+")"))
	if st, err := os.Stat(filepath.Join(nodes[0].dir, "duck.db")); err == nil {
		b.Logf("database file %d MB", st.Size()>>20)
	}
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		var m runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
		}
	}()
	defer close(done)
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		snap, _, err := s.fsm.pinBackup()
		if err != nil {
			b.Fatal(err)
		}
		pinned := time.Since(start)
		snap.Release()
		path := filepath.Join(b.TempDir(), fmt.Sprintf("b%d.duckdb", i))
		start = time.Now()
		h, err := s.WriteBackup(context.Background(), path)
		if err != nil {
			b.Fatal(err)
		}
		st, _ := os.Stat(path)
		b.Logf("pin held the applier %v; backup of %d rows at %d: %v, %d MB; peak Go heap %d MB",
			pinned, h.Rows, h.Index, time.Since(start), st.Size()>>20, peak.Load()>>20)
	}
}
