package node_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/wire"
)

const testToken = "test-token-0123"

// startServer serves a fresh on-disk database on a free loopback port and
// returns its address.
func startServer(t testing.TB, mod func(*node.Config)) (string, *node.Server) {
	t.Helper()
	db, err := engine.Open(t.TempDir()+"/test.db", engine.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	cfg := node.Config{DB: db, Authenticator: node.TokenAuth{Token: testToken},
		Logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() {
		srv.Close()
		db.Close()
	})
	return "quack:" + l.Addr().String(), srv
}

func connect(t testing.TB, addr string, g wire.Generation) *client.Conn {
	t.Helper()
	return connectWith(t, addr, g, testToken)
}

func connectWith(t testing.TB, addr string, g wire.Generation, token string) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, addr, client.Options{Token: token, Generation: g})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func exec(t testing.TB, c *client.Conn, sql string) {
	t.Helper()
	if _, err := c.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// queryRows returns every row of sql as Go values.
func queryRows(t *testing.T, c *client.Conn, sql string) [][]any {
	t.Helper()
	rows, err := c.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

var generations = []wire.Generation{wire.Q1, wire.Q3}

func TestQueryBothGenerations(t *testing.T) {
	addr, _ := startServer(t, nil)
	for _, g := range generations {
		t.Run(fmt.Sprintf("Q%d", g), func(t *testing.T) {
			c := connect(t, addr, g)
			if c.Generation() != g {
				t.Fatalf("negotiated Q%d, want Q%d", c.Generation(), g)
			}
			got := queryRows(t, c, "SELECT 42::INTEGER AS answer, 'duck' AS s")
			if len(got) != 1 || got[0][0] != int32(42) || got[0][1] != "duck" {
				t.Fatalf("got %v", got)
			}
		})
	}
}

func TestNegotiatesQ3ByDefault(t *testing.T) {
	addr, _ := startServer(t, nil)
	c := connect(t, addr, 0)
	if c.Generation() != wire.Q3 {
		t.Fatalf("negotiated Q%d, want Q3", c.Generation())
	}
}

func TestLargeResultParallelFetchKeepsOrder(t *testing.T) {
	addr, _ := startServer(t, nil)
	const n = 10_000_000
	for _, g := range generations {
		t.Run(fmt.Sprintf("Q%d", g), func(t *testing.T) {
			if testing.Short() && g == wire.Q3 {
				t.Skip("one generation is enough in -short")
			}
			c := connect(t, addr, g)
			rows, err := c.Query(context.Background(), fmt.Sprintf("SELECT range AS i FROM range(%d)", n))
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			next := int64(0)
			for {
				chunk, err := rows.NextChunk()
				if err != nil {
					t.Fatal(err)
				}
				if chunk == nil {
					break
				}
				col := chunk.Columns[0]
				for i := 0; i < chunk.Rows; i++ {
					v, _ := col.Value(i)
					if v != next {
						t.Fatalf("row %d: got %v: order lost", next, v)
					}
					next++
				}
			}
			if next != n {
				t.Fatalf("got %d rows, want %d", next, n)
			}
		})
	}
}

func TestErrorsCarryDuckDBMessage(t *testing.T) {
	addr, _ := startServer(t, nil)
	c := connect(t, addr, wire.Q1)
	_, err := c.Query(context.Background(), "SELECT * FROM missing_table")
	var se *client.ServerError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a ServerError", err)
	}
	if want := "Table with name missing_table does not exist"; !strings.Contains(se.Message, want) {
		t.Fatalf("message %q lacks %q", se.Message, want)
	}
	// The session keeps working after an error.
	if got := queryRows(t, c, "SELECT 1"); len(got) != 1 {
		t.Fatalf("got %v", got)
	}
}

func TestAuthFailures(t *testing.T) {
	addr, _ := startServer(t, nil)
	for _, tok := range []string{"", "wrong", testToken + "x"} {
		_, err := client.Connect(context.Background(), addr, client.Options{Token: tok, Generation: wire.Q1})
		var se *client.ServerError
		if !errors.As(err, &se) || se.Message != "Authentication failed" {
			t.Fatalf("token %q: got %v, want Authentication failed", tok, err)
		}
	}
}

func TestSessionStateIsPerConnection(t *testing.T) {
	addr, _ := startServer(t, nil)
	a := connect(t, addr, wire.Q1)
	b := connect(t, addr, wire.Q1)
	exec(t, a, "CREATE TEMP TABLE mine(i INTEGER)")
	exec(t, a, "INSERT INTO mine VALUES (1)")
	if got := queryRows(t, a, "SELECT count(*) FROM mine"); got[0][0] != int64(1) {
		t.Fatalf("got %v", got)
	}
	if _, err := b.Query(context.Background(), "SELECT * FROM mine"); err == nil {
		t.Fatal("a temp table leaked into another session")
	}
	// Transactions are per session too.
	exec(t, a, "CREATE TABLE shared(i INTEGER)")
	exec(t, a, "BEGIN TRANSACTION")
	exec(t, a, "INSERT INTO shared VALUES (1)")
	if got := queryRows(t, b, "SELECT count(*) FROM shared"); got[0][0] != int64(0) {
		t.Fatalf("uncommitted row visible to another session: %v", got)
	}
	exec(t, a, "COMMIT")
	if got := queryRows(t, b, "SELECT count(*) FROM shared"); got[0][0] != int64(1) {
		t.Fatalf("committed row not visible: %v", got)
	}
}

func TestAppend(t *testing.T) {
	addr, _ := startServer(t, nil)
	for _, g := range generations {
		t.Run(fmt.Sprintf("Q%d", g), func(t *testing.T) {
			c := connect(t, addr, g)
			table := fmt.Sprintf("t%d", g)
			exec(t, c, fmt.Sprintf("CREATE TABLE %s(i INTEGER, s VARCHAR, d DOUBLE)", table))
			rows := [][]any{{int32(1), "one", 1.5}, {int32(2), nil, nil}, {int32(3), "a string longer than 12 bytes", -0.25}}
			chunk, err := wire.ChunkFromRows(
				[]wire.LogicalType{{ID: wire.TypeInteger}, {ID: wire.TypeVarchar}, {ID: wire.TypeDouble}}, rows)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Append(context.Background(), "main", table, chunk); err != nil {
				t.Fatal(err)
			}
			if got := queryRows(t, c, "FROM "+table+" ORDER BY i"); fmt.Sprint(got) != fmt.Sprint(rows) {
				t.Fatalf("got %v, want %v", got, rows)
			}
			if err := c.Append(context.Background(), "main", "nope", chunk); err == nil {
				t.Fatal("append to a missing table succeeded")
			}
			// A failed append leaves nothing behind and the session usable.
			if got := queryRows(t, c, "SELECT count(*) FROM "+table); got[0][0] != int64(3) {
				t.Fatalf("got %v rows after a failed append", got)
			}
		})
	}
}

func TestManyConcurrentClients(t *testing.T) {
	addr, srv := startServer(t, nil)
	setup := connect(t, addr, wire.Q1)
	exec(t, setup, "CREATE TABLE counter(id INTEGER, n INTEGER)")
	const clients = 16
	var wg sync.WaitGroup
	errc := make(chan error, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			g := generations[i%2]
			c, err := client.Connect(context.Background(), addr, client.Options{Token: testToken, Generation: g})
			if err != nil {
				errc <- err
				return
			}
			defer c.Close()
			for j := 0; j < 20; j++ {
				if _, err := c.Exec(context.Background(), fmt.Sprintf("INSERT INTO counter VALUES (%d, %d)", i, j)); err != nil {
					errc <- err
					return
				}
				rows, err := c.Query(context.Background(), fmt.Sprintf("SELECT count(*) FROM counter WHERE id = %d", i))
				if err != nil {
					errc <- err
					return
				}
				rows.Next()
				v, _ := rows.Values()
				rows.Close()
				if v[0] != int64(j+1) {
					errc <- fmt.Errorf("client %d: read %v after %d writes", i, v[0], j+1)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if got := queryRows(t, setup, "SELECT count(*) FROM counter"); got[0][0] != int64(clients*20) {
		t.Fatalf("got %v rows", got)
	}
	if n := srv.SessionCount(); n != 1 {
		t.Errorf("%d sessions open, want 1 (the setup connection)", n)
	}
}

// TestAppendInsideTransaction: DuckDB 2.0's CREATE TABLE … AS runs the
// CREATE TABLE in the remote transaction it opened, then streams the rows
// on the same connection, and commits (or rolls back) later. The insert
// joins that transaction instead of opening one of its own.
func TestAppendInsideTransaction(t *testing.T) {
	addr, _ := startServer(t, nil)
	for _, end := range []string{"COMMIT", "ROLLBACK"} {
		t.Run(end, func(t *testing.T) {
			c := connect(t, addr, wire.Q3)
			table := "ctas_" + strings.ToLower(end)
			chunk, err := wire.ChunkFromRows([]wire.LogicalType{{ID: wire.TypeInteger}}, [][]any{{int32(1)}, {int32(2)}})
			if err != nil {
				t.Fatal(err)
			}
			exec(t, c, "BEGIN TRANSACTION")
			exec(t, c, "CREATE TABLE "+table+"(i INTEGER)")
			if err := c.Append(context.Background(), "main", table, chunk); err != nil {
				t.Fatalf("append inside the client's transaction: %v", err)
			}
			exec(t, c, end)
			other := connect(t, addr, wire.Q3)
			rows, err := other.Query(context.Background(), "SELECT count(*) FROM "+table)
			switch {
			case end == "COMMIT" && err != nil:
				t.Fatal(err)
			case end == "COMMIT":
				defer rows.Close()
				rows.Next()
				if v, _ := rows.Values(); v[0] != int64(2) {
					t.Fatalf("committed rows: %v", v)
				}
			case err == nil:
				rows.Close()
				t.Fatal("the rolled back table exists")
			}
		})
	}
}
