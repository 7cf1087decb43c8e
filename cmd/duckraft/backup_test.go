package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/testcluster"
)

// TestBackupRestoreUnderLoad takes a backup with the CLI through a follower
// of a 3-node cluster while clients write through every node, opens it with
// a plain DuckDB, seeds a new 3-node cluster from it with duckraftd
// --restore, and checks that every restored node's state hash equals the
// source's at the backup's index (which the backup answer carries, computed
// in the transaction the backup was read in), and that the restored cluster
// takes writes.
func TestBackupRestoreUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two clusters of real nodes")
	}
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitForLeader(t, 20*time.Second)
	setup := leader.Client(t)
	ctx := context.Background()
	for _, q := range []string{
		"CREATE SEQUENCE ids",
		"CREATE TABLE t(id BIGINT DEFAULT nextval('ids'), node VARCHAR, v DOUBLE)",
		"INSERT INTO t(node, v) SELECT 'seed', i FROM range(200000) r(i)",
		"CREATE VIEW per_node AS SELECT node, count(*) AS n FROM t GROUP BY node",
	} {
		if _, err := setup.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	var stop atomic.Bool
	var writes atomic.Int64
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		conn := n.Client(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				q := fmt.Sprintf("INSERT INTO t(node, v) VALUES ('%s', %d)", n.ID, i)
				if _, err := conn.Exec(ctx, q); err != nil {
					t.Errorf("%s: %v", q, err)
					return
				}
				writes.Add(1)
			}
		}()
	}
	waitUntil(t, "writes under way", func() bool { return writes.Load() >= 20 })

	out := filepath.Join(t.TempDir(), "cluster.duckdb")
	via := c.Others(leader)[0]
	var stdout, stderr bytes.Buffer
	code := run([]string{"backup", "--server", "quack:" + via.QuackAddr, "--token", testcluster.Token, "--out", out},
		strings.NewReader(""), &stdout, &stderr)
	atBackup := writes.Load()
	waitUntil(t, "writes after the backup", func() bool { return writes.Load() >= atBackup+20 })
	stop.Store(true)
	wg.Wait()
	if code != 0 {
		t.Fatalf("duckraft backup: exit %d, %s%s", code, stdout.String(), stderr.String())
	}
	var index uint64
	var size, rows int64
	var hash string
	if _, err := fmt.Sscanf(stdout.String(), "backup at applied index %d written to "+out+" (%d bytes, %d rows, state hash %s",
		&index, &size, &rows, &hash); err != nil {
		t.Fatalf("backup output %q: %v", stdout.String(), err)
	}
	hash = strings.TrimSuffix(hash, ")")
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("backup left %s.tmp: %v", out, err)
	}
	var recorded nodeapi.StateHash
	if b, err := os.ReadFile(out + ".hash"); err != nil || json.Unmarshal(b, &recorded) != nil ||
		recorded != (nodeapi.StateHash{Index: index, Hash: hash, Rows: rows}) {
		t.Fatalf("%s.hash holds %+v (%v); want the printed index %d, rows %d, hash %s", out, recorded, err, index, rows, hash)
	}
	t.Logf("backup at index %d: %d bytes, %d rows", index, size, rows)

	// A plain DuckDB opens it and sees the rows, the view and the index.
	db, err := sql.Open("duckdb", out+"?access_mode=READ_ONLY")
	if err != nil {
		t.Fatal(err)
	}
	var count, viewSum int64
	var applied uint64
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&count); err != nil {
		t.Fatalf("plain DuckDB reads t: %v", err)
	}
	if err := db.QueryRow("SELECT sum(n)::BIGINT FROM per_node").Scan(&viewSum); err != nil || viewSum != count {
		t.Fatalf("plain DuckDB reads the view: %d, %v; want %d", viewSum, err, count)
	}
	if err := db.QueryRow("SELECT max(idx) FROM (SELECT idx FROM _duckraft.applied UNION ALL SELECT idx FROM _duckraft.keys)").Scan(&applied); err != nil || applied != index {
		t.Fatalf("applied index in the backup: %d, %v; want %d", applied, err, index)
	}
	db.Close()
	if count != rows || count <= 200000 {
		t.Fatalf("backup holds %d rows, its hash counted %d; want the seed rows and some written under load", count, rows)
	}
	srcHash := c.WaitConverged(t, 60*time.Second)
	if srcHash == hash {
		t.Fatal("the source did not move past the backup: the test proves nothing about a pinned index")
	}

	// A copy changed since (one row more) is refused by a real duckraftd:
	// its state hash is not the recorded one.
	changed := filepath.Join(t.TempDir(), "changed.duckdb")
	for _, f := range []string{"", ".hash"} {
		copyFile(t, out+f, changed+f)
	}
	if db, err := sql.Open("duckdb", changed); err != nil {
		t.Fatal(err)
	} else if _, err := db.Exec("INSERT INTO t(node, v) VALUES ('forged', 0)"); err != nil {
		t.Fatal(err)
	} else {
		db.Close()
	}
	// Were it restored, the node would serve until killed at the deadline.
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	dd := exec.CommandContext(dctx, testcluster.Binary(t), "--id", "f1", "--data", filepath.Join(t.TempDir(), "f1"), "--restore", changed,
		"--quack", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--http", "off", "--token", testcluster.Token)
	if msg, err := dd.CombinedOutput(); err == nil || !strings.Contains(string(msg), "the backup's state hash is not the one recorded") {
		t.Fatalf("duckraftd --restore of a changed backup: %v\n%s", err, msg)
	}

	// A new cluster seeded from the backup.
	r := testcluster.Start(t, 3, testcluster.Options{Restore: out})
	if got := r.WaitConverged(t, 60*time.Second); got != hash {
		t.Fatalf("restored cluster's state hash %s, the source's at index %d was %s", got, index, hash)
	}
	for _, n := range r.Nodes {
		idx, _, err := n.StateHash()
		if err != nil || idx < index {
			t.Fatalf("%s: applied %d, %v; want at least the backup's %d", n.ID, idx, err, index)
		}
	}
	rc := r.Nodes[2].Client(t)
	if _, err := rc.Exec(ctx, "INSERT INTO t(node, v) VALUES ('restored', 0)"); err != nil {
		t.Fatalf("write to the restored cluster: %v", err)
	}
	// The seeded node restarts as any node does (without --restore).
	r.Nodes[0].Restart(t)
	r.WaitForLeader(t, 30*time.Second)
	r.WaitConverged(t, 60*time.Second)
	for _, n := range r.Nodes {
		rows, err := n.Client(t).Query(ctx, "SELECT count(*) FROM t")
		if err != nil {
			t.Fatal(err)
		}
		rows.Next()
		v, err := rows.Values()
		rows.Close()
		if err != nil || v[0] != count+1 {
			t.Fatalf("%s after a write: %v rows, %v; want %d", n.ID, v, err, count+1)
		}
	}
}

// waitUntil polls cond for up to a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// copyFile copies the file from to the file to.
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
