package testcluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/testcluster"
)

const (
	readToken  = "read-token-0123456789abcdef"
	writeToken = "write-token-0123456789abcdef"
	adminToken = "admin-token-0123456789abcdef"
)

// connectAs opens a session on the node or router at addr with token.
func connectAs(t *testing.T, addr, token string, g wire.Generation) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, "quack:"+addr, client.Options{Token: token, Generation: g})
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// wantForbidden checks that err is a Permission Error with its code.
func wantForbidden(t *testing.T, err error, what string) {
	t.Helper()
	var se *client.ServerError
	if !errors.As(err, &se) || se.Code != string(outcome.Forbidden) {
		t.Errorf("%s: %v, want a Permission Error (code %s)", what, err, string(outcome.Forbidden))
	}
}

// TestRolesAcrossNodes: with duckraftd --tokens, a read token is refused
// every way of writing through the leader, a follower, a replica and a
// router, over Q1 and Q3, outside and inside a transaction, and no node's
// state moves (the same applied index and state hash before and after);
// its reads, status and hash work. A write token writes through a
// follower but cannot transfer leadership; an admin token can. A SIGHUP
// after the file changed refuses the removed token's open session.
func TestRolesAcrossNodes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	writeFile := func(text string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeFile("# test roles\nread " + readToken + "\nwrite " + writeToken + "\nadmin " + adminToken + "\n")
	c := testcluster.Start(t, 3, testcluster.Options{Replicas: 1, Args: []string{"--tokens", file}})
	router := c.StartRouter(t, "--tokens", file)
	leader := c.WaitForLeader(t, 30*time.Second)
	follower := c.Others(leader)[0]
	var replica *testcluster.Node
	for _, n := range c.Nodes {
		if n.Replica {
			replica = n
		}
	}
	admin := connectAs(t, follower.QuackAddr, adminToken, wire.Q1)
	exec(t, admin, "CREATE TABLE t(id INTEGER)")
	exec(t, admin, "CREATE SEQUENCE s")
	exec(t, admin, "INSERT INTO t VALUES (1), (2)")
	c.WaitConverged(t, 30*time.Second)
	before := map[string]string{}
	for _, n := range c.Nodes {
		idx, hash, err := n.StateHash()
		if err != nil {
			t.Fatal(err)
		}
		before[n.ID] = fmt.Sprint(idx, hash)
	}

	out := filepath.Join(dir, "out.csv")
	attacks := []string{
		"INSERT INTO t VALUES (666)",
		"UPDATE t SET id = 666",
		"DELETE FROM t",
		"CREATE TABLE u(i INTEGER)",
		"DROP TABLE t",
		"SELECT 1; INSERT INTO t VALUES (666)",
		"INSERT INTO t VALUES (666); INSERT INTO t VALUES (667)",
		"SELECT nextval('s')",
		"SELECT * FROM query('INSERT INTO t VALUES (666) RETURNING id')",
		"CALL checkpoint()",
		"CHECKPOINT",
		"PREPARE p AS INSERT INTO t VALUES (666)",
		"ATTACH ':memory:' AS other",
		"COPY t FROM '" + filepath.Join(dir, "in.csv") + "'",
		"COPY t TO '" + out + "'",
		"SET GLOBAL threads = 1",
	}
	chunk, err := wire.ChunkFromRows([]wire.LogicalType{{ID: wire.TypeInteger}}, [][]any{{int32(666)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, via := range []struct {
		name, addr string
	}{
		{"leader", leader.QuackAddr}, {"follower", follower.QuackAddr}, {"replica", replica.QuackAddr}, {"router", router.QuackAddr},
	} {
		for _, g := range []wire.Generation{wire.Q1, wire.Q3} {
			t.Run(fmt.Sprintf("%s/Q%d", via.name, g), func(t *testing.T) {
				reader := connectAs(t, via.addr, readToken, g)
				for _, txn := range []bool{false, true} {
					if txn {
						exec(t, reader, "BEGIN TRANSACTION")
					}
					for _, sql := range attacks {
						_, err := reader.Exec(ctx, sql)
						wantForbidden(t, err, fmt.Sprintf("in a transaction %v: %s", txn, sql))
					}
					// Q1 appends with APPEND, Q3 with an insert stream
					// (PREPARE of scan_data_from_quack_client, SEND_DATA).
					wantForbidden(t, reader.Append(ctx, "main", "t", chunk), fmt.Sprintf("append in a transaction %v", txn))
					if txn {
						exec(t, reader, "COMMIT")
					}
				}
				if got := queryInts(t, reader, "SELECT count(*) FROM t"); got[0] != 2 {
					t.Errorf("the read token counts %d rows, want 2", got[0])
				}
				exec(t, reader, "SET TimeZone = 'UTC'")
			})
		}
	}
	// A refused write reaches no node: every node is where it was.
	for _, n := range c.Nodes {
		idx, hash, err := n.StateHash()
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(idx, hash); got != before[n.ID] {
			t.Errorf("%s moved from %s to %s", n.ID, before[n.ID], got)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a read token's COPY TO wrote a file (%v)", err)
	}

	// Status and hash: every token.
	apiCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, tok := range []string{readToken, writeToken, adminToken} {
		if _, err := (&nodeapi.Client{Token: tok}).Status(apiCtx, follower.QuackAddr); err != nil {
			t.Errorf("status: %v", err)
		}
		if _, err := (&nodeapi.Client{Token: tok}).Hash(apiCtx, follower.QuackAddr); err != nil {
			t.Errorf("hash: %v", err)
		}
	}

	// A write token writes through a follower, and cannot move leadership.
	writer := connectAs(t, follower.QuackAddr, writeToken, wire.Q3)
	exec(t, writer, "INSERT INTO t VALUES (3)")
	if err := writer.Append(ctx, "main", "t", chunk); err != nil {
		t.Fatalf("the write token's append: %v", err)
	}
	for _, tok := range []string{readToken, writeToken} {
		if _, err := (&nodeapi.Client{Token: tok}).TransferLeadership(apiCtx, leader.QuackAddr, follower.ID); nodeapi.CodeOf(err) != nodeapi.CodeForbidden {
			t.Errorf("transfer with a lower role: %v, want %s", err, nodeapi.CodeForbidden)
		}
	}
	if l := c.WaitForLeader(t, 10*time.Second); l != leader {
		t.Fatalf("leadership moved to %s on a refused transfer", l.ID)
	}
	if _, err := (&nodeapi.Client{Token: adminToken}).TransferLeadership(apiCtx, leader.QuackAddr, follower.ID); err != nil {
		t.Fatalf("the admin token's transfer: %v", err)
	}
	if l := c.WaitForLeader(t, 30*time.Second); l != follower {
		t.Fatalf("leader after the admin's transfer is %s, want %s", l.ID, follower.ID)
	}

	// SIGHUP: the read token is removed, the write token demoted.
	reader := connectAs(t, replica.QuackAddr, readToken, wire.Q1)
	routed := connectAs(t, router.QuackAddr, writeToken, wire.Q1)
	exec(t, reader, "SELECT 1")
	writeFile("read " + writeToken + "\nadmin " + adminToken + "\n")
	for _, n := range c.Nodes {
		n.ReloadTokens()
	}
	router.ReloadTokens()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := reader.Exec(ctx, "SELECT 1")
		var se *client.ServerError
		if errors.As(err, &se) && se.Code == string(outcome.Unauthorized) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the removed token's session still runs after SIGHUP: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		_, err := routed.Exec(ctx, "INSERT INTO t VALUES (4)")
		var se *client.ServerError
		if errors.As(err, &se) && se.Code == string(outcome.Forbidden) {
			break
		}
		if err == nil && time.Now().Before(deadline) {
			// The router had not reloaded yet; the row went in, which
			// the count below allows for.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		t.Fatalf("the demoted token's insert through the router after SIGHUP: %v", err)
	}
	c.WaitConverged(t, 30*time.Second)
	if got := queryInts(t, admin, "SELECT count(*) FROM t WHERE id = 666"); got[0] != 1 {
		t.Errorf("%d rows of 666, want 1 (the write token's append)", got[0])
	}
}
