package node_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/wire"
)

// startGated serves a fresh database whose client statements run at most
// limit at once, each waiting at most wait for its turn, and returns the
// address, the server and the database, on which a connection of its own
// plays the applier. Its one client may hold every turn: the share of
// each client is TestNoClientTakesEveryTurn's.
func startGated(t *testing.T, limit int, wait time.Duration) (string, *node.Server, *engine.DB) {
	t.Helper()
	var db *engine.DB
	addr, srv := startServer(t, func(c *node.Config) {
		db = c.DB
		c.MaxRunningStatements, c.MaxRunningStatementsPerClient, c.AdmissionWait = limit, limit, wait
	})
	return addr, srv, db
}

// waitAdmission waits until the gate's stats satisfy ok, and fails the
// test with them if that takes longer than a loaded machine could need.
func waitAdmission(t *testing.T, srv *node.Server, what string, ok func(node.AdmissionStats) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st := srv.AdmissionStats()
		if ok(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %+v", what, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runForever starts longScan on n sessions of their own and returns the
// function that cancels them and waits for their ends.
func runForever(t *testing.T, addr string, n int) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		c := connect(t, addr, wire.Q3)
		wg.Go(func() {
			if _, err := c.Query(ctx, longScan); err == nil {
				t.Errorf("%s finished: it should have run until cancelled", longScan)
			}
		})
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// TestAdmissionBoundsRunningStatements is the attack of issue 31 on one
// node: sessions that keep heavy statements running. At most
// MaxRunningStatements run at once; the next waits its turn and is
// refused after AdmissionWait with a clear, retryable error (code busy),
// or runs once a turn is given back; the node's own connection (the
// applier's) never waits. Without the gate the third statement ran at
// once beside the two.
func TestAdmissionBoundsRunningStatements(t *testing.T) {
	const limit = 2
	t.Run("refused after the wait", func(t *testing.T) {
		const wait = 300 * time.Millisecond
		addr, srv, db := startGated(t, limit, wait)
		stop := runForever(t, addr, limit)
		defer stop()
		waitAdmission(t, srv, "the heavy statements to hold every turn", func(st node.AdmissionStats) bool { return st.Running == limit })

		// The applier's work goes past the queue while every turn is held.
		own, err := db.Connect()
		if err != nil {
			t.Fatal(err)
		}
		defer own.Close()
		for i := range 20 {
			if _, err := own.Exec(context.Background(), fmt.Sprintf("CREATE OR REPLACE TABLE applied AS SELECT %d AS i FROM range(1000)", i)); err != nil {
				t.Fatalf("the node's own statement %d: %v", i, err)
			}
		}

		c := connect(t, addr, wire.Q3)
		began := time.Now()
		_, err = c.Query(context.Background(), "SELECT 42")
		waited := time.Since(began)
		se, ok := errors.AsType[*client.ServerError](err)
		if !ok || se.Code != string(outcome.Busy) || !errors.Is(err, outcome.ErrBusy) ||
			!strings.Contains(err.Error(), "the server is busy") || !strings.Contains(err.Error(), "run it again later") {
			t.Fatalf("a statement past the limit: %v, want a busy refusal", err)
		}
		if waited < wait {
			t.Errorf("refused after %v, before its wait of %v", waited, wait)
		}
		st := srv.AdmissionStats()
		if st.PeakRunning > limit || st.Refused != 1 || st.Limit != limit {
			t.Errorf("stats %+v: want at most %d running and 1 refused", st, limit)
		}
		// The session stays usable once a turn is free.
		stop()
		if got := queryRows(t, c, "SELECT 42"); len(got) != 1 || got[0][0] != int32(42) {
			t.Fatalf("after the heavy statements ended: %v", got)
		}
	})
	t.Run("admitted in turn", func(t *testing.T) {
		addr, srv, _ := startGated(t, limit, 10*time.Minute)
		stopFirst := runForever(t, addr, 1)
		stopSecond := runForever(t, addr, 1)
		defer stopSecond()
		waitAdmission(t, srv, "the heavy statements to hold every turn", func(st node.AdmissionStats) bool { return st.Running == limit })
		c := connect(t, addr, wire.Q1)
		answer := make(chan error, 1)
		go func() {
			rows, err := c.Query(context.Background(), "SELECT 42")
			if err == nil {
				rows.Close()
			}
			answer <- err
		}()
		waitAdmission(t, srv, "the third statement to queue", func(st node.AdmissionStats) bool { return st.Queued == 1 })
		select {
		case err := <-answer:
			t.Fatalf("the third statement answered (%v) while two held every turn", err)
		default:
		}
		stopFirst()
		if err := <-answer; err != nil {
			t.Fatalf("the queued statement, once a turn was free: %v", err)
		}
		if st := srv.AdmissionStats(); st.PeakRunning > limit || st.Refused != 0 {
			t.Errorf("stats %+v: want at most %d running, none refused", st, limit)
		}
	})
}

// TestIdleResultHoldsNoTurn streams a large result to a reader that stops
// reading: while the server waits for its FETCHes the statement holds no
// turn, so another session's statement runs, and the slow reader then
// reads every row, taking a turn again for each batch. Before, a result
// read slowly held its turn until it was closed.
func TestIdleResultHoldsNoTurn(t *testing.T) {
	for _, g := range generations {
		t.Run(fmt.Sprintf("Q%d", g), func(t *testing.T) {
			addr, srv, _ := startGated(t, 1, 300*time.Millisecond)
			const n = 5_000_000
			slow := connect(t, addr, g)
			rows, err := slow.Query(context.Background(), fmt.Sprintf("SELECT i FROM range(%d) r(i)", n))
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			waitAdmission(t, srv, "the unread result to give its turn back", func(st node.AdmissionStats) bool { return st.Running == 0 })
			if got := queryRows(t, connect(t, addr, g), "SELECT 42"); len(got) != 1 || got[0][0] != int32(42) {
				t.Fatalf("beside an unread result: %v", got)
			}
			count := 0
			for rows.Next() {
				count++
			}
			if err := rows.Err(); err != nil || count != n {
				t.Fatalf("the slow reader read %d rows of %d: %v", count, n, err)
			}
			if st := srv.AdmissionStats(); st.PeakRunning > 1 || st.Refused != 0 {
				t.Errorf("stats %+v: want one running at most, none refused", st)
			}
		})
	}
}

// TestClientStatementsHaveAMemoryBudget: every client session runs under
// DuckDB's operator_memory_limit (its sorts, hash tables and joins spill
// to disk past it), by default half of memory_limit shared by the
// statements that run at once; the node's own connections have none.
// Before, client statements had only the database's memory_limit, shared
// with the applier.
func TestClientStatementsHaveAMemoryBudget(t *testing.T) {
	cases := []struct {
		name, limit string
		want        func(memoryLimit int64) string
	}{
		{"given", "64MB", func(int64) string { return "61.0 MiB" }},
		{"default: half the memory limit over the running statements", "", func(m int64) string {
			return fmt.Sprintf("%.1f MiB", float64(m/4)/(1<<20))
		}},
		{"none", "none", func(int64) string { return "" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db, err := engine.Open(t.TempDir()+"/test.db", engine.Options{Threads: 2, MemoryLimit: "400MB"})
			if err != nil {
				t.Fatal(err)
			}
			srv, err := node.New(node.Config{DB: db, Authenticator: node.TokenAuth{Token: testToken},
				MaxRunningStatements: 2, StatementMemoryLimit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve(l)
			defer func() {
				srv.Close()
				db.Close()
			}()
			total, err := db.MemoryLimit()
			if err != nil {
				t.Fatal(err)
			}
			const setting = "SELECT coalesce(current_setting('operator_memory_limit'), '')"
			got := queryRows(t, connect(t, "quack:"+l.Addr().String(), wire.Q3), setting)
			if want := tc.want(total); len(got) != 1 || got[0][0] != want {
				t.Errorf("a client session's operator_memory_limit: %v, want %q", got, want)
			}
			own, err := db.Connect()
			if err != nil {
				t.Fatal(err)
			}
			defer own.Close()
			if row, err := own.QueryRow(context.Background(), setting); err != nil || row[0] != "" {
				t.Errorf("the node's own connection's operator_memory_limit: %v %v, want none", row, err)
			}
		})
	}
	if _, err := node.New(node.Config{DB: func() *engine.DB {
		db, err := engine.Open("", engine.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}(), Authenticator: node.TokenAuth{Token: testToken}, StatementMemoryLimit: "lots"}); err == nil || !strings.Contains(err.Error(), "statement memory limit") {
		t.Errorf("a limit DuckDB does not take: %v, want an error naming it", err)
	}
}
