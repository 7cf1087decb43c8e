package replication

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/clusterkey"
	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/wal"
)

// testLogger logs to stderr when DUCKRAFT_TEST_LOG is set, else nowhere.
func testLogger() *slog.Logger {
	if os.Getenv("DUCKRAFT_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func openDB(t testing.TB, dir string) *engine.DB {
	t.Helper()
	db, err := engine.Open(filepath.Join(dir, "duck.db"), engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// openFSM opens an FSM on db with a large key window and an in-memory log
// for staged rows (applyOne stores its entries there). The caller closes it
// before db.
func openFSM(t testing.TB, db *engine.DB) *fsm {
	t.Helper()
	f, err := newFSM(db, 1<<20, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	f.stageLog = raft.NewInmemStore()
	return f
}

// testClusterKey is the cluster key of the tests' clusters.
var testClusterKey = []byte("replication test cluster key 32b")

// memberTLS is the Raft TLS of a member id of a test cluster.
func memberTLS(t testing.TB, id string) *tls.Config {
	t.Helper()
	c, err := clusterkey.RaftTLS(testClusterKey, id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testNode is one node of an in-process cluster: a DuckDB file and a Store
// in a temp dir, listening on a loopback port chosen by the kernel.
type testNode struct {
	id, dir, addr string
	db            *engine.DB
	store         *Store
	mod           func(*Config)
}

func (n *testNode) start(t testing.TB, bootstrap bool) {
	t.Helper()
	if n.db == nil {
		n.db = openDB(t, n.dir)
	}
	addr := n.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	cfg := Config{ID: n.id, Dir: filepath.Join(n.dir, "raft"), RaftAddr: addr, Bootstrap: bootstrap, DB: n.db,
		TLS: memberTLS(t, n.id), Logger: testLogger().With("test_node", n.id), SnapshotInterval: time.Hour}
	if n.mod != nil {
		n.mod(&cfg)
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.store, n.addr = s, s.Addr()
}

// stop closes the store and, if closeDB, the database.
func (n *testNode) stop(t testing.TB, closeDB bool) {
	t.Helper()
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			t.Errorf("close %s: %v", n.id, err)
		}
		n.store = nil
	}
	if closeDB && n.db != nil {
		if err := n.db.Close(); err != nil {
			t.Errorf("close db %s: %v", n.id, err)
		}
		n.db = nil
	}
}

// startCluster starts n nodes, the first bootstrapping, the others joined as
// voters, and waits until all of them know the leader.
func startCluster(t testing.TB, n int, mod func(*Config)) []*testNode {
	t.Helper()
	nodes := make([]*testNode, n)
	for i := range nodes {
		nodes[i] = &testNode{id: fmt.Sprintf("n%d", i), dir: t.TempDir(), mod: mod}
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			nd.stop(t, true)
		}
	})
	nodes[0].start(t, true)
	waitLeader(t, nodes[:1])
	for _, nd := range nodes[1:] {
		nd.start(t, false)
		if err := nodes[0].store.Join(nd.id, nd.addr, true); err != nil {
			t.Fatal(err)
		}
	}
	waitLeader(t, nodes)
	return nodes
}

// waitLeader waits until every running node agrees on one leader among them
// and returns it.
func waitLeader(t testing.TB, nodes []*testNode) *testNode {
	t.Helper()
	var leader *testNode
	waitFor(t, 10*time.Second, "a leader", func() bool {
		leader = nil
		id := ""
		for _, n := range nodes {
			if n.store == nil {
				continue
			}
			lid := n.store.LeaderID()
			if lid == "" || id != "" && lid != id {
				return false
			}
			id = lid
			if n.store.IsLeader() {
				leader = n
			}
		}
		return leader != nil && leader.id == id
	})
	return leader
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func stmt(sql string, params ...any) wal.Command {
	ps := make([]wal.Param, len(params))
	for i, p := range params {
		var err error
		if ps[i], err = wal.ParamOf(p); err != nil {
			panic(err)
		}
	}
	return wal.Command{Entry: wal.Statement{SQL: sql, Params: ps}}
}

func mustExec(t testing.TB, s *Store, cmd wal.Command) *wal.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := s.Execute(ctx, cmd)
	if err != nil {
		t.Fatalf("execute %+v: %v", cmd.Entry, err)
	}
	return res
}

// execOnLeader runs cmd through whichever node of nodes leads, as a client
// of a cluster would: on a loaded machine an election can come at any time.
// A command that loses its leader is proposed again to the next one under
// the same idempotency key (one is set if cmd has none), so it applies once.
func execOnLeader(t testing.TB, nodes []*testNode, cmd wal.Command) *wal.Result {
	t.Helper()
	if cmd.Key == nil {
		cmd.Key = fmt.Appendf(nil, "execOnLeader/%d", execKeys.Add(1))
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := waitLeader(t, nodes).store.Execute(ctx, cmd)
		cancel()
		switch {
		case err == nil:
			return res
		case !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrUnknownOutcome) || time.Now().After(deadline):
			t.Fatalf("execute %+v: %v", cmd.Entry, err)
		}
	}
}

// execKeys numbers the idempotency keys of execOnLeader.
var execKeys atomic.Uint64

// queryInt returns the single integer sql yields on db.
func queryInt(t testing.TB, db *engine.DB, sql string) int64 {
	t.Helper()
	conn, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	row, err := conn.QueryRow(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	switch v := row[0].(type) {
	case int64:
		return v
	case int32:
		return int64(v)
	case uint64:
		return int64(v)
	}
	t.Fatalf("%s: %T is not an integer", sql, row[0])
	return 0
}

// waitApplied waits until every running node applied idx.
func waitApplied(t testing.TB, nodes []*testNode, idx uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, n := range nodes {
		if n.store == nil {
			continue
		}
		if err := n.store.WaitForApplied(ctx, idx); err != nil {
			t.Fatalf("%s: %v", n.id, err)
		}
	}
}

// logEntry builds a raft command entry holding cmds.
func logEntry(t testing.TB, idx uint64, cmds ...wal.Command) *raft.Log {
	t.Helper()
	data, err := wal.Batch{Commands: cmds}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
}
