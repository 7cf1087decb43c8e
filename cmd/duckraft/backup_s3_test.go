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
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/duckraft/duckraft/cmd/internal/s3backup/s3test"
	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/testcluster"
)

// TestBackupRestoreS3 is what a user of an S3-compatible store does: back
// up a running 3-node cluster of real duckraftd processes with duckraft
// backup --out s3://…, seed a new cluster from the object with duckraftd
// --restore s3://…, and compare state hashes. A backup changed in the
// bucket is refused by a real duckraftd, wrong credentials get a clear
// error and leave no object, and no output of any process holds a
// credential.
func TestBackupRestoreS3(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two clusters of real nodes and an S3 server")
	}
	srv := s3test.Start(t)
	srv.Env(t) // the duckraftd processes inherit it
	srv.CreateBucket(t, "backups")

	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitForLeader(t, 20*time.Second)
	ctx := context.Background()
	// Hex text compresses to about 60%: a backup of about 23 MB, past the
	// uploader's 16 MiB, so the stream goes up as a multipart upload.
	for _, q := range []string{
		"CREATE TABLE t(id BIGINT, s VARCHAR)",
		"INSERT INTO t SELECT i, md5(i::VARCHAR) || md5((-i)::VARCHAR) FROM range(600000) r(i)",
	} {
		if _, err := leader.Client(t).Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	srcHash := c.WaitConverged(t, 60*time.Second)

	const url = "s3://backups/cluster/c1.duckdb"
	backupVia := func(t *testing.T, n *testcluster.Node, url string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run([]string{"backup", "--server", "quack:" + n.QuackAddr, "--token", testcluster.Token, "--out", url},
			strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, stdout, stderr := backupVia(t, c.Others(leader)[0], url)
	if code != 0 {
		t.Fatalf("duckraft backup --out %s: exit %d, %s%s", url, code, stdout, stderr)
	}
	var index uint64
	var size, rows int64
	var hash string
	if _, err := fmt.Sscanf(stdout, "backup at applied index %d written to "+url+" (%d bytes, %d rows, state hash %s",
		&index, &size, &rows, &hash); err != nil {
		t.Fatalf("backup output %q: %v", stdout, err)
	}
	hash = strings.TrimSuffix(hash, ")")
	t.Logf("backup at index %d streamed to %s: %d bytes", index, url, size)
	if hash != srcHash || rows != 600000 || size < 16<<20 {
		t.Fatalf("backup of %d bytes, %d rows, hash %s; the cluster's hash is %s", size, rows, hash, srcHash)
	}
	if keys := srv.Keys(t, "backups"); strings.Join(keys, " ") != "cluster/c1.duckdb cluster/c1.duckdb.hash" {
		t.Fatalf("bucket holds %v", keys)
	}
	var recorded nodeapi.StateHash
	if err := json.Unmarshal(srv.Get(t, "backups", "cluster/c1.duckdb.hash"), &recorded); err != nil ||
		recorded != (nodeapi.StateHash{Index: index, Hash: hash, Rows: rows}) {
		t.Fatalf("the .hash object holds %+v (%v); want the printed index %d, rows %d, hash %s", recorded, err, index, rows, hash)
	}
	if got := int64(len(srv.Get(t, "backups", "cluster/c1.duckdb"))); got != size {
		t.Fatalf("the object holds %d bytes, the CLI said %d", got, size)
	}

	// Wrong credentials: a clear error, and nothing written.
	t.Run("wrong credentials", func(t *testing.T) {
		t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong"+srv.Secret)
		code, stdout, stderr := backupVia(t, leader, "s3://backups/wrong/c1.duckdb")
		if code != 1 || !strings.Contains(stderr, "refused the credentials") || strings.Contains(stderr, "cut short") {
			t.Fatalf("backup with a wrong secret: exit %d, %s%s", code, stdout, stderr)
		}
		t.Logf("refused: %s", stderr)
		for _, k := range srv.Keys(t, "backups") {
			if strings.HasPrefix(k, "wrong/") {
				t.Fatalf("a refused backup wrote %s", k)
			}
		}
		out := restore(t, "s3://backups/cluster/c1.duckdb")
		if !strings.Contains(out, "refused the credentials") {
			t.Fatalf("duckraftd --restore with a wrong secret:\n%s", out)
		}
		for _, s := range []string{stdout, stderr, out} {
			if strings.Contains(s, srv.Secret) || strings.Contains(s, srv.AccessKey) {
				t.Fatalf("output holds a credential:\n%s", s)
			}
		}
	})

	// A backup changed in the bucket (a row added, its .hash kept) is
	// refused by a real duckraftd.
	tampered := filepath.Join(t.TempDir(), "tampered.duckdb")
	if err := os.WriteFile(tampered, srv.Get(t, "backups", "cluster/c1.duckdb"), 0o600); err != nil {
		t.Fatal(err)
	}
	if db, err := sql.Open("duckdb", tampered); err != nil {
		t.Fatal(err)
	} else if _, err := db.Exec("INSERT INTO t VALUES (-1, 'forged')"); err != nil {
		t.Fatal(err)
	} else {
		db.Close()
	}
	srv.Put(t, "backups", "cluster/tampered.duckdb", readFile(t, tampered))
	srv.Put(t, "backups", "cluster/tampered.duckdb.hash", srv.Get(t, "backups", "cluster/c1.duckdb.hash"))
	if out := restore(t, "s3://backups/cluster/tampered.duckdb"); !strings.Contains(out, "the backup's state hash is not the one recorded") {
		t.Fatalf("duckraftd --restore of a tampered object:\n%s", out)
	}

	// A new cluster seeded from the object has the source's state.
	r := testcluster.Start(t, 3, testcluster.Options{Restore: url})
	if got := r.WaitConverged(t, 60*time.Second); got != hash {
		t.Fatalf("restored cluster's state hash %s, the backup's %s", got, hash)
	}
	if _, err := r.Nodes[1].Client(t).Exec(ctx, "INSERT INTO t VALUES (600000, 'after')"); err != nil {
		t.Fatalf("write to the restored cluster: %v", err)
	}
	r.WaitConverged(t, 60*time.Second)
	for _, n := range append(c.Nodes, r.Nodes...) {
		if log := n.Log(); strings.Contains(log, srv.Secret) || strings.Contains(log, srv.AccessKey) {
			t.Fatalf("%s's log holds a credential", n.ID)
		}
	}
	if !strings.Contains(r.Nodes[0].Log(), "hash_checked=true") {
		t.Fatalf("the restoring node did not check the hash:\n%s", r.Nodes[0].Log())
	}
}

// restore runs duckraftd --restore url on a new data directory and returns
// its output; it fails the test if the node started.
func restore(t *testing.T, url string) string {
	t.Helper()
	// Were it restored, the node would serve until killed at the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testcluster.Binary(t), "--id", "f1", "--data", filepath.Join(t.TempDir(), "f1"), "--restore", url,
		"--quack", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--http", "off", "--token", testcluster.Token)
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("duckraftd --restore %s did not refuse: %v\n%s", url, err, out)
	}
	return string(out)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
