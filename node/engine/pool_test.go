package engine

import (
	"context"
	"testing"
)

func get(t *testing.T, p *Pool) *Conn {
	t.Helper()
	c, err := p.Get()
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	return c
}

func isClosed(c *Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// TestPoolReuses: a connection put back is the next one handed out, with
// the settings Connect gave it; a pool keeps no more idle connections
// than its bound and closes the others.
func TestPoolReuses(t *testing.T) {
	p := NewPool(openTest(t), 2)
	defer p.Close()
	a := get(t, p)
	p.Put(a)
	if b := get(t, p); b != a {
		t.Fatal("the connection put back was not reused")
	}
	if got := queryOne(t, a, "SELECT current_setting('streaming_buffer_size')"); got == "" {
		t.Fatal("no streaming_buffer_size")
	} else if want := queryOne(t, connect(t, p.DB()), "SELECT current_setting('streaming_buffer_size')"); got != want {
		t.Errorf("reused connection's streaming_buffer_size %q, a new one's %q", got, want)
	}
	b, c := get(t, p), get(t, p)
	if b == a || c == a || b == c {
		t.Fatal("connections in use handed out twice")
	}
	p.Put(a)
	p.Put(b)
	p.Put(c)
	if !isClosed(c) || isClosed(a) || isClosed(b) {
		t.Errorf("with a bound of 2: closed %v %v %v, want only the third", isClosed(a), isClosed(b), isClosed(c))
	}
	if n := len(p.conns.idle); n != 2 {
		t.Errorf("%d idle, want 2", n)
	}
}

// TestPoolDropsTransactions: a connection put back inside a transaction,
// aborted or not, is closed, so the next task does not run inside it; one
// whose transaction was rolled back is kept and runs in autocommit again.
func TestPoolDropsTransactions(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	p := NewPool(db, 2)
	defer p.Close()
	exec(t, connect(t, db), "CREATE TABLE t (i INTEGER)")

	open := get(t, p)
	if err := open.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	exec(t, open, "INSERT INTO t VALUES (1)")
	p.Put(open)
	if !isClosed(open) {
		t.Fatal("a connection in a transaction went back into the pool")
	}

	aborted := get(t, p)
	exec(t, aborted, "BEGIN TRANSACTION")
	if _, err := aborted.Exec(ctx, "INSERT INTO nope VALUES (1)"); err == nil {
		t.Fatal("insert into a missing table succeeded")
	}
	p.Put(aborted)
	if !isClosed(aborted) {
		t.Fatal("a connection in an aborted transaction went back into the pool")
	}

	rolled := get(t, p)
	if rolled == open || rolled == aborted {
		t.Fatal("a closed connection was handed out")
	}
	if err := rolled.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rolled.Exec(ctx, "INSERT INTO nope VALUES (1)"); err == nil {
		t.Fatal("insert into a missing table succeeded")
	}
	if err := rolled.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	p.Put(rolled)
	again := get(t, p)
	if again != rolled {
		t.Fatal("a connection rolled back was not reused")
	}
	// Autocommit: another connection sees the row at once.
	exec(t, again, "INSERT INTO t VALUES (2)")
	if got := queryOne(t, connect(t, db), "SELECT string_agg(i::VARCHAR, ',') FROM t"); got != "2" {
		t.Errorf("rows seen from another connection: %q, want 2 (the open transaction's row rolled back, the reused connection's committed)", got)
	}
	p.Put(again)
}

// TestPoolClose: Close closes the idle connections, a connection put back
// afterwards is closed, and Get fails.
func TestPoolClose(t *testing.T) {
	p := NewPool(openTest(t), 2)
	idle, busy := get(t, p), get(t, p)
	p.Put(idle)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if !isClosed(idle) {
		t.Error("an idle connection outlived Close")
	}
	p.Put(busy)
	if !isClosed(busy) {
		t.Error("a connection put back after Close was kept")
	}
	if _, err := p.Get(); err == nil {
		t.Error("Get after Close succeeded")
	}
}

func queryOne(t *testing.T, c *Conn, sql string) string {
	t.Helper()
	out, err := c.QueryStrings(context.Background(), sql)
	if err != nil || len(out) != 1 {
		t.Fatalf("%s: %v, %v", sql, out, err)
	}
	return out[0]
}
