package engine

import (
	"context"
	"fmt"

	"github.com/duckraft/duckraft/node/sqlquote"
)

// Client connections yield to the node's own work. DuckDB has one memory
// limit per database, shared by every connection: a client's heavy read
// can take the memory that applying a replicated write needs, and the
// write must not fail on one node for that (see replication/DESIGN.md).
// The replicated state's owner interrupts the client connections when it
// runs short (DB.InterruptClients) and tries again; each interrupted
// statement fails with an error that says why.

// ConnectClient opens a connection for a client's statements: one that
// InterruptClients can interrupt.
func (db *DB) ConnectClient() (*Conn, error) {
	c, err := db.Connect()
	if err != nil {
		return nil, err
	}
	db.mu.Lock()
	limit := db.clientMemory
	db.mu.Unlock()
	if limit != "" {
		if _, err := c.Exec(context.Background(), "SET operator_memory_limit = "+sqlquote.Literal(limit)); err != nil {
			c.Close()
			return nil, fmt.Errorf("client connection: operator_memory_limit: %w", err)
		}
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.clients == nil {
		db.clients = make(map[*Conn]struct{})
	}
	db.clients[c] = struct{}{}
	c.client = true
	return c, nil
}

// InterruptClients interrupts the statement running on every client
// connection (ConnectClient), and reports how many it interrupted. Each
// fails with an INTERRUPT *Error whose message names cause and which
// unwraps to it. Until ReleaseClients, client connections start no new
// statement: each fails at once with the same error, so the memory the
// interrupted ones freed stays free for the caller's retry.
func (db *DB) InterruptClients(cause error) int {
	db.mu.Lock()
	db.held = cause
	conns := make([]*Conn, 0, len(db.clients))
	for c := range db.clients {
		conns = append(conns, c)
	}
	db.mu.Unlock()
	n := 0
	for _, c := range conns {
		if c.interruptFor(cause) {
			n++
		}
	}
	return n
}

// ReleaseClients lets client connections start statements again after
// InterruptClients.
func (db *DB) ReleaseClients() {
	db.mu.Lock()
	db.held = nil
	db.mu.Unlock()
}

// heldFor returns the cause client statements are held for, or nil.
func (db *DB) heldFor() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.held
}

// heldError is the error of a client statement refused while held.
func heldError(cause error) error {
	return &Error{Type: interruptType, Message: interruptType + " Error: " + cause.Error(), cause: cause}
}

// forget drops c from the client connections.
func (db *DB) forget(c *Conn) {
	db.mu.Lock()
	delete(db.clients, c)
	db.mu.Unlock()
}

// interruptFor interrupts the statement running on c, if any, for cause.
func (c *Conn) interruptFor(cause error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.cur
	if q == nil || c.closed {
		return false
	}
	if q.cause == nil {
		q.cause = cause
	}
	c.interruptLocked(q)
	return true
}

// explain gives an interrupt of q that InterruptClients caused its cause:
// the client reads why its statement stopped, not a bare "Interrupted!".
func (c *Conn) explain(q *query, err error) error {
	if err == nil || q == nil {
		return err
	}
	c.mu.Lock()
	cause := q.cause
	c.mu.Unlock()
	if cause == nil || ExceptionType(err) != interruptType {
		return err
	}
	return heldError(cause)
}

const interruptType = "INTERRUPT"
