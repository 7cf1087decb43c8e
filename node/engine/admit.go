package engine

import (
	"context"

	bindings "github.com/duckdb/duckdb-go-bindings"
)

// Client statements take turns. Every statement a client connection
// (ConnectClient) runs in DuckDB competes with the node's own work (the
// applier's entries) for DuckDB's worker threads and its one memory limit;
// an Admitter (the Quack server's admission gate) bounds how many run at
// once. A turn covers DuckDB's work for the statement: its execution, and
// each fetch of its streamed result; a reader that waits for its consumer
// gives it back (Conn.Pause) and waits for a new one at its next fetch.
// Connections of DB.Connect (the applier, snapshots, hashes, backups, the
// leader's proofs) never wait for a turn.

// An Admitter bounds the client statements running in DuckDB at once.
type Admitter interface {
	// Admit waits for a turn for a statement that runs under ctx, and
	// returns the function that gives it back (once), or why there is
	// none: ctx ended, or the wait was too long.
	Admit(ctx context.Context) (release func(), err error)
}

// SetAdmitter makes every statement of a client connection take a turn
// from a before DuckDB runs it; nil lets them run at once. Transaction
// statements (BEGIN, COMMIT, ROLLBACK) and settings (SET, RESET, USE) take
// none: they cost DuckDB nothing to speak of, and a ROLLBACK refused for
// want of a turn would leave a transaction open.
func (db *DB) SetAdmitter(a Admitter) {
	db.mu.Lock()
	db.admitter = a
	db.mu.Unlock()
}

func (db *DB) getAdmitter() Admitter {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.admitter
}

// unadmitted are the statement types that run without a turn.
var unadmitted = map[bindings.StatementType]bool{
	bindings.StatementTypeTransaction: true,
	bindings.StatementTypeSet:         true,
}

// admit takes a turn for a statement of type st of c, unless c already
// holds one, is not a client's, or st needs none.
func (c *Conn) admit(ctx context.Context, st bindings.StatementType) error {
	if !c.client || unadmitted[st] {
		return nil
	}
	return c.takeTurn(ctx)
}

// takeTurn waits for a turn unless c holds one.
func (c *Conn) takeTurn(ctx context.Context) error {
	c.mu.Lock()
	held := c.turn != nil
	c.mu.Unlock()
	if held {
		return nil
	}
	a := c.db.getAdmitter()
	if a == nil {
		return nil
	}
	release, err := a.Admit(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.turn = release
	c.mu.Unlock()
	return nil
}

// Pause gives back the turn c's streaming Result holds while its reader
// waits for the consumer, so that a client reading a large result slowly
// takes no turn from others while idle. The Result's next Next waits for a
// turn again (and fails as Admit does if it gets none). DuckDB stops the
// query's work once its streaming buffer (1 MB) is full, so nothing runs
// meanwhile. Like Interrupt it is safe to call from any goroutine; it does
// nothing when c holds no turn.
func (c *Conn) Pause() {
	c.mu.Lock()
	release := c.turn
	c.turn = nil
	c.mu.Unlock()
	if release != nil {
		release()
	}
}
