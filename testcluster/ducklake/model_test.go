package ducklake

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/testcluster"
)

// TestTransactionModelAgainstDuckDB sends the same DuckLake-shaped texts to
// a follower of a 3-node cluster and to a DuckDB database in this process,
// and holds duckraft to DuckDB's answers where docs/ducklake.md says it
// gives them, and to its documented answers where it says it does not.
func TestTransactionModelAgainstDuckDB(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := testcluster.Start(t, 3, testcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	follower := c.Others(c.WaitForLeader(t, 20*time.Second))[0]
	cluster, err := DialQuack(ctx, follower.QuackAddr, testcluster.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	db, err := engine.Open(filepath.Join(t.TempDir(), "catalog.duckdb"), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	local, err := NewLocal(db)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	data, err := OpenData(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()
	backends := map[string]Backend{"duckraft": cluster, "duckdb": local}
	for name, b := range backends {
		if _, err := NewLake(b, Transactional, data, DefaultRetry, nil).Attach(ctx, true); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// Snapshots 1 and 2; a delete file that was in force from 1 to 2
		// and one in force since 2.
		mustQuery(t, ctx, name, b, catalogOnly(`
INSERT INTO {METADATA_CATALOG}.ducklake_snapshot VALUES (1, NOW(), 0, 1, 3), (2, NOW(), 0, 1, 3);
INSERT INTO {METADATA_CATALOG}.ducklake_delete_file VALUES
  (1, 1, 1, 2, 0, 'old-delete.parquet', true, 'parquet', 1, 10, 0, NULL, NULL),
  (2, 1, 2, NULL, 0, 'new-delete.parquet', true, 'parquet', 2, 10, 0, NULL, NULL);`))
	}

	// ducklake_expire_snapshots in one transaction: the DELETE of the
	// snapshots, then the read of the delete files no remaining snapshot
	// needs (DeleteSnapshots). DuckDB's read sees the transaction's own
	// DELETE and finds the old delete file; duckraft applies the DELETE at
	// COMMIT, so its read finds nothing, and the file is cleaned up by the
	// next expire instead (docs/ducklake.md, Transactions).
	orphans := map[string]int{}
	for name, b := range backends {
		mustQuery(t, ctx, name, b, "BEGIN TRANSACTION")
		mustQuery(t, ctx, name, b, catalogOnly(deleteWhereInSQL("ducklake_snapshot", "snapshot_id", []int64{0, 1})))
		orphans[name] = len(mustQuery(t, ctx, name, b, catalogOnly(strings.Replace(expireDeleteFilesSQL, "%s", "", 1))))
		mustQuery(t, ctx, name, b, "COMMIT")
	}
	if orphans["duckdb"] != 1 || orphans["duckraft"] != 0 {
		t.Errorf("a read after a DELETE in the same transaction found %v orphaned delete files, want 1 on DuckDB and 0 on duckraft", orphans)
	}
	// After the COMMIT both see the DELETE: the next expire finds the file.
	for name, b := range backends {
		if n := len(mustQuery(t, ctx, name, b, catalogOnly(strings.Replace(expireDeleteFilesSQL, "%s", "", 1)))); n != 1 {
			t.Errorf("%s: after the commit the next expire finds %d orphaned delete files, want 1", name, n)
		}
	}

	// NOW() in the inserts of one transaction: one value for the whole
	// transaction on both; on duckraft it is the time the leader ordered
	// the COMMIT, not the time of BEGIN.
	for name, b := range backends {
		begin := time.Now()
		mustQuery(t, ctx, name, b, "BEGIN TRANSACTION")
		mustQuery(t, ctx, name, b, catalogOnly(`INSERT INTO {METADATA_CATALOG}.ducklake_files_scheduled_for_deletion VALUES (10, 'a', true, NOW())`))
		time.Sleep(50 * time.Millisecond)
		mustQuery(t, ctx, name, b, catalogOnly(`INSERT INTO {METADATA_CATALOG}.ducklake_files_scheduled_for_deletion VALUES (11, 'b', true, NOW())`))
		mustQuery(t, ctx, name, b, "COMMIT")
		rows := mustQuery(t, ctx, name, b, catalogOnly(`SELECT count(DISTINCT schedule_start), min(schedule_start) FROM {METADATA_CATALOG}.ducklake_files_scheduled_for_deletion WHERE data_file_id IN (10, 11)`))
		if mustInt(rows[0][0]) != 1 {
			t.Errorf("%s: NOW() took %d values in one transaction, want 1", name, mustInt(rows[0][0]))
		}
		if ts, ok := rows[0][1].(time.Time); !ok || ts.Before(begin.Add(-time.Second)) {
			t.Errorf("%s: NOW() was %v, before the transaction began at %v", name, rows[0][1], begin)
		}
	}

	// A text mixing reads and writes: DuckDB runs it; duckraft refuses it
	// outside a transaction, and inside one its read does not see the
	// text's own write. DuckLake sends none (its batches are all writes).
	mixed := catalogOnly(`INSERT INTO {METADATA_CATALOG}.ducklake_metadata VALUES ('mixed', 'x', NULL, NULL); SELECT count(*) FROM {METADATA_CATALOG}.ducklake_metadata WHERE key = 'mixed'`)
	if _, err := local.Query(ctx, mixed); err != nil {
		t.Errorf("duckdb: %v", err)
	}
	if _, err := cluster.Query(ctx, mixed); err == nil || !strings.Contains(err.Error(), "mixes reads and writes") {
		t.Errorf("duckraft: a text mixing reads and writes outside a transaction: %v, want it refused", err)
	}
	mustQuery(t, ctx, "duckraft", cluster, "BEGIN TRANSACTION")
	if rows := mustQuery(t, ctx, "duckraft", cluster, mixed); mustInt(rows[0][0]) != 0 {
		t.Errorf("duckraft: the read of a mixed text in a transaction counted %v rows of its own write, want 0", rows)
	}
	mustQuery(t, ctx, "duckraft", cluster, "COMMIT")
	c.WaitConverged(t, time.Minute)
}

func mustQuery(t *testing.T, ctx context.Context, name string, b Backend, sql string) [][]any {
	t.Helper()
	rows, err := b.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %s: %v", name, strings.TrimSpace(sql), err)
	}
	return rows
}
