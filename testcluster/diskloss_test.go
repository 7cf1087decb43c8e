package testcluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

// TestDuckDBFileLoss runs a 3-node cluster whose nodes leave DuckDB's
// commits unsynced (--duckdb-fsync NONE) and takes from one follower, killed
// with SIGKILL, what an OS crash can take from unsynced files: the tail of
// DuckDB's WAL, the newest writes of the whole database (an older copy put
// back), or a block of the database file. The Raft log is synced on a
// quorum, so the node must come back to the cluster's state: equal state
// hashes on every node.
func TestDuckDBFileLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts real nodes")
	}
	for _, tc := range []struct {
		name string
		// keep runs while the node is stopped cleanly after the first
		// writes; lose runs on its files after it is killed.
		keep func(t *testing.T, dir string)
		lose func(t *testing.T, dir string)
	}{
		{"wal tail", nil, func(t *testing.T, dir string) { truncateHalf(t, filepath.Join(dir, "duckraft.db.wal")) }},
		{"older database", func(t *testing.T, dir string) {
			copyFile(t, filepath.Join(dir, "duckraft.db"), filepath.Join(dir, "older.db"))
		}, func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "duckraft.db.wal"))
			if err := os.Rename(filepath.Join(dir, "older.db"), filepath.Join(dir, "duckraft.db")); err != nil {
				t.Fatal(err)
			}
		}},
		{"corrupt block", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testcluster.Start(t, 3, testcluster.Options{Args: []string{"--duckdb-fsync", "NONE"}})
			leader := c.WaitForLeader(t, 10*time.Second)
			victim := c.Others(leader)[0]
			lc := leader.Client(t)
			exec(t, lc, "CREATE TABLE t(i INTEGER PRIMARY KEY, s VARCHAR)")
			exec(t, lc, "INSERT INTO t SELECT range, md5(range::VARCHAR) || md5((range * 7)::VARCHAR) FROM range(200000)")
			c.WaitConverged(t, 30*time.Second)
			if tc.keep != nil {
				victim.Stop()
				tc.keep(t, victim.Dir)
				victim.Restart(t)
				c.WaitConverged(t, 30*time.Second)
			}
			for i := range 20 {
				exec(t, lc, fmt.Sprintf("INSERT INTO t VALUES (%d, 'after')", 200000+i))
			}
			exec(t, lc, "UPDATE t SET s = 'updated' WHERE i % 1000 = 0")
			c.WaitConverged(t, 30*time.Second)
			lose := tc.lose
			if lose == nil {
				// A block that holds rows of t, once they are checkpointed.
				vc := victim.Client(t)
				exec(t, vc, "CHECKPOINT")
				block := queryInts(t, vc, "SELECT min(block_id) FROM pragma_storage_info('t') WHERE block_id >= 0 AND segment_type = 'VARCHAR'")[0]
				lose = func(t *testing.T, dir string) { corruptBlock(t, filepath.Join(dir, "duckraft.db"), block) }
			}
			victim.Kill()
			lose(t, victim.Dir)
			victim.Restart(t)
			exec(t, lc, "INSERT INTO t VALUES (-1, 'once back')")
			c.WaitConverged(t, 60*time.Second)
			vc := victim.Client(t)
			exec(t, vc, "SET duckraft_consistency = 'any'")
			if got := queryInts(t, vc, "SELECT count(*) FROM t"); got[0] != 200021 {
				t.Fatalf("%s holds %d rows after the loss, want 200021", victim.ID, got[0])
			}
			if tc.name == "corrupt block" {
				if aside, _ := filepath.Glob(filepath.Join(victim.Dir, "duckraft.db.corrupt-*")); len(aside) == 0 {
					t.Errorf("%s did not set its corrupt database aside", victim.ID)
				}
			}
		})
	}
}

func truncateHalf(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no WAL to truncate: %v", err)
	}
	if err := os.Truncate(path, st.Size()/2); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// DuckDB's file layout: three 4 KiB headers, then blocks of 256 KiB.
const (
	duckdbHeaderBytes = 3 * 4096
	duckdbBlockBytes  = 256 << 10
)

// corruptBlock overwrites 4 KiB at the start of block of the database file (past its checksum) with a
// pattern its checksum does not match.
func corruptBlock(t *testing.T, path string, block int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := make([]byte, 4096)
	for i := range junk {
		junk[i] = byte(i*7 + 3)
	}
	if _, err := f.WriteAt(junk, duckdbHeaderBytes+block*duckdbBlockBytes+8); err != nil {
		t.Fatal(err)
	}
}
