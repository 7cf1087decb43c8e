package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/internal/freeport"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/replication"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	a, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// query runs sql through a fresh Quack session on d and returns the first
// column of the first row; an error fails t.
func query(t *testing.T, d *Daemon, sql string) any {
	t.Helper()
	v, err := queryErr(t, d, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// queryErr runs sql through a fresh Quack session on d and returns the
// first column of the first row, or the statement's error.
func queryErr(t *testing.T, d *Daemon, sql string) (any, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, "quack:"+d.QuackAddr(), client.Options{Token: d.Token(), Generation: wire.Q1})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer c.Close()
	rows, err := c.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	v, err := rows.Values()
	if err != nil {
		return nil, err
	}
	return v[0], nil
}

// TestCrashAndClose starts a single node, writes through Quack, and stops
// it both ways: after Crash DuckDB's write-ahead log is left for the next
// start to replay, after Close it is checkpointed away. The token the first
// start generated is kept, and the data survives both.
func TestCrashAndClose(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Raft and gossip")
	}
	dir := t.TempDir()
	cfg := Config{ID: "n1", DataDir: dir, QuackAddr: freeAddr(t), RaftAddr: freeAddr(t), GossipAddr: freeAddr(t)}
	start := func() *Daemon {
		t.Helper()
		d, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	wal := filepath.Join(dir, "duckraft.db.wal")

	d := start()
	token := d.Token()
	query(t, d, "CREATE TABLE t AS SELECT range AS i FROM range(10)")
	if err := d.Crash(); err != nil {
		t.Fatalf("crash: %v", err)
	}
	if d.Err() != nil {
		t.Fatalf("serving failed: %v", d.Err())
	}
	if _, err := os.Stat(wal); err != nil {
		t.Fatalf("crash left no write-ahead log: %v", err)
	}

	d = start()
	if d.Token() != token {
		t.Fatalf("token changed over a restart: %q, then %q", token, d.Token())
	}
	if got := query(t, d, "SELECT count(*) FROM t"); got != int64(10) {
		t.Fatalf("after crash: %v rows, want 10", got)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := os.Stat(wal); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("close left the write-ahead log (%v)", err)
	}
	select {
	case <-d.Done():
	default:
		t.Fatal("Done is open after Close")
	}
}

// TestRaftLogStoreKept: a data directory written with one --raft-log-store
// refuses to start with the other, naming the flag and the store to use,
// and starts again with its own store, data intact.
func TestRaftLogStoreKept(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Raft and gossip")
	}
	dir := t.TempDir()
	cfg := Config{ID: "n1", DataDir: dir, QuackAddr: freeAddr(t), RaftAddr: freeAddr(t), GossipAddr: freeAddr(t),
		RaftLogStore: replication.LogStoreWAL}
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	query(t, d, "CREATE TABLE t AS SELECT range AS i FROM range(10)")
	if err := d.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	for _, asked := range []string{"", replication.LogStoreBoltDB} {
		other := cfg
		other.RaftLogStore = asked
		if d, err := Start(other); err == nil {
			d.Close()
			t.Fatalf("--raft-log-store %q started on a wal data directory", asked)
		} else if !strings.Contains(err.Error(), "--raft-log-store wal") {
			t.Fatalf("--raft-log-store %q: error %q does not name --raft-log-store wal", asked, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "raft", "raft.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused starts created raft.db (%v)", err)
	}

	d, err = Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := query(t, d, "SELECT count(*) FROM t"); got != int64(10) {
		t.Fatalf("after the refused starts: %v rows, want 10", got)
	}
}
