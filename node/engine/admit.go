package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	bindings "github.com/duckdb/duckdb-go-bindings"

	"github.com/duckraft/duckraft/node/sqlquote"
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

// SetClientMemoryLimit gives every client connection opened from now on
// (ConnectClient) DuckDB's operator_memory_limit of limit (a DuckDB size,
// "256MB"; "" for none): the memory a statement's sorts, hash aggregates,
// hash joins and DISTINCTs may hold before they spill to the temporary
// directory. DuckDB's memory_limit is one for the database, shared with
// the node's own connections; this is a soft budget per client statement
// within it. Operators that do not spill (list(), string_agg(), …) are
// not held to it. A limit DuckDB does not take is an error.
func (db *DB) SetClientMemoryLimit(limit string) error {
	if limit != "" {
		c, err := db.Connect()
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := c.Exec(context.Background(), "SET operator_memory_limit = "+sqlquote.Literal(limit)); err != nil {
			return fmt.Errorf("operator_memory_limit %q: %w", limit, err)
		}
	}
	db.mu.Lock()
	db.clientMemory = limit
	db.mu.Unlock()
	return nil
}

// MemoryLimit returns DuckDB's memory_limit in bytes.
func (db *DB) MemoryLimit() (int64, error) {
	s, err := db.queryString("SELECT current_setting('memory_limit')")
	if err != nil {
		return 0, err
	}
	return parseSize(s)
}

// sizeUnits are the units DuckDB prints sizes in
// (StringUtil::BytesToHumanReadableString) and takes.
var sizeUnits = map[string]float64{
	"bytes": 1, "b": 1,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
}

// parseSize reads a size as DuckDB prints it: "476.8 MiB", "0 bytes".
func parseSize(s string) (int64, error) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), " ")
	f, err := strconv.ParseFloat(num, 64)
	mult, known := sizeUnits[strings.ToLower(unit)]
	if !ok || err != nil || !known || f < 0 {
		return 0, fmt.Errorf("not a size: %q", s)
	}
	return int64(f * mult), nil
}
