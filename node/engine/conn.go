package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	bindings "github.com/duckdb/duckdb-go-bindings"
)

// reassertInterval is how often an interrupt is repeated while the
// interrupted query runs. DuckDB clears its interrupt flag when a statement
// starts, so a single duckdb_interrupt can be lost if it lands just before.
const reassertInterval = 50 * time.Millisecond

// Conn is one DuckDB connection with its own transaction state. It must be
// used by one goroutine at a time; only Interrupt may be called
// concurrently. Starting a statement (Query, Exec, Append) closes the
// connection's open Result, as DuckDB allows one active result per
// connection.
type Conn struct {
	db   *DB
	conn bindings.Connection
	res  *Result
	inTx bool

	// mu guards the fields below and every use of conn made from another
	// goroutine (interrupts).
	mu     sync.Mutex
	cur    *query
	closed bool
	// client marks a connection of DB.ConnectClient.
	client bool
	// turn gives back the turn (admit.go) the running statement holds;
	// nil when it holds none.
	turn func()
}

// query is one statement execution that can be interrupted: a Query until
// its Result is closed, or an Exec or Append call.
type query struct {
	done        chan struct{}
	stop        func() bool
	interrupted bool  // guarded by Conn.mu
	cause       error // guarded by Conn.mu: why InterruptClients stopped it
}

// Close closes the open Result, if any, and the connection. DuckDB rolls back
// an open transaction.
func (c *Conn) Close() error {
	if c.res != nil {
		c.res.Close()
	}
	if c.client {
		c.db.forget(c)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		bindings.Disconnect(&c.conn)
	}
	return nil
}

// Interrupt interrupts the statement running on c, or the streaming Result
// being read; it does nothing when c is idle. It is safe to call from any
// goroutine. The interrupted call or the next Result.Next fails with an
// INTERRUPT error.
func (c *Conn) Interrupt() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.interruptLocked(c.cur)
}

func (c *Conn) interruptLocked(q *query) {
	if q == nil || c.cur != q || c.closed {
		return
	}
	bindings.Interrupt(c.conn)
	if !q.interrupted {
		q.interrupted = true
		go c.reassert(q)
	}
}

// reassert repeats the interrupt of q until q ends.
func (c *Conn) reassert(q *query) {
	t := time.NewTicker(reassertInterval)
	defer t.Stop()
	for {
		select {
		case <-q.done:
			return
		case <-t.C:
			c.mu.Lock()
			if c.cur == q && !c.closed {
				bindings.Interrupt(c.conn)
			}
			c.mu.Unlock()
		}
	}
}

// begin closes the open Result and registers a new interruptible query
// whose ctx cancellation interrupts it.
func (c *Conn) begin(ctx context.Context) (*query, error) {
	if c.res != nil {
		c.res.Close()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.client {
		if cause := c.db.heldFor(); cause != nil {
			return nil, heldError(cause)
		}
	}
	q := &query{done: make(chan struct{})}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("connection is closed")
	}
	c.cur = q
	c.mu.Unlock()
	q.stop = context.AfterFunc(ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.interruptLocked(q)
	})
	return q, nil
}

// end unregisters q; interrupts aimed at it no longer reach DuckDB.
func (c *Conn) end(q *query) {
	q.stop()
	c.mu.Lock()
	if c.cur == q {
		c.cur = nil
	}
	close(q.done)
	c.mu.Unlock()
	c.Pause()
}

// interrupted reports whether q was interrupted, so that an interrupt DuckDB
// missed still stops the work between statements and chunks.
func (c *Conn) interrupted(q *query) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return q.interrupted
}

// errInterrupted mirrors the error DuckDB reports for an interrupted query.
func errInterrupted() error {
	return &Error{Type: errorTypeNames[bindings.ErrorTypeInterrupt], Message: "INTERRUPT Error: Interrupted!"}
}

// withCtx adds ctx's error to err when ctx ended, so callers can test
// errors.Is(err, context.Canceled) and still reach the *Error.
func withCtx(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && err != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// Query runs sql and streams the result of its last statement. When sql holds
// several statements, all but the last are executed to completion first.
// ctx covers the Result's whole life, not just this call: cancelling it
// interrupts the statements and fails the next Result.Next, so pass a
// context that outlives the reads (the session's, not one request's). An
// error from DuckDB is an *Error.
func (c *Conn) Query(ctx context.Context, sql string) (*Result, error) {
	q, err := c.begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	res, err := c.query(ctx, q, sql)
	if err != nil {
		err = c.explain(q, err)
		c.end(q)
		return nil, withCtx(ctx, err)
	}
	c.res = res
	return res, nil
}

func (c *Conn) query(ctx context.Context, q *query, sql string) (*Result, error) {
	ext, n, err := c.extract(sql)
	if err != nil {
		return nil, err
	}
	defer bindings.DestroyExtracted(&ext)
	for i := range n {
		if c.interrupted(q) {
			return nil, errInterrupted()
		}
		var stmt bindings.PreparedStatement
		if bindings.PrepareExtractedStatement(c.conn, ext, bindings.IdxT(i), &stmt) == bindings.StateError {
			err := newError(bindings.PrepareError(stmt), bindings.ErrorTypeInvalid)
			bindings.DestroyPrepare(&stmt)
			return nil, err
		}
		last := i == n-1
		stype := bindings.PreparedStatementType(stmt)
		isTx := stype == bindings.StatementTypeTransaction
		if err := c.admit(ctx, stype); err != nil {
			bindings.DestroyPrepare(&stmt)
			return nil, err
		}
		var res bindings.Result
		var state bindings.State
		if last && !isTx {
			state = bindings.ExecutePreparedStreaming(stmt, &res)
		} else {
			// Transaction statements are materialized so that the
			// transaction probe can run before their result is read.
			state = bindings.ExecutePrepared(stmt, &res)
		}
		if state == bindings.StateError {
			err := newError(bindings.ResultError(&res), bindings.ResultErrorType(&res))
			bindings.DestroyResult(&res)
			bindings.DestroyPrepare(&stmt)
			if isTx {
				c.probeTransaction()
			}
			return nil, err
		}
		if isTx {
			c.probeTransaction()
		}
		if last {
			return newResult(ctx, c, q, stmt, res)
		}
		bindings.DestroyResult(&res)
		bindings.DestroyPrepare(&stmt)
	}
	return nil, errors.New("unreachable: no statement executed")
}

// extract splits sql into statements. The caller destroys ext.
func (c *Conn) extract(sql string) (bindings.ExtractedStatements, int, error) {
	var ext bindings.ExtractedStatements
	n := int(bindings.ExtractStatements(c.conn, sql, &ext))
	if n > 0 {
		return ext, n, nil
	}
	msg := bindings.ExtractStatementsError(ext)
	bindings.DestroyExtracted(&ext)
	if msg == "" {
		return ext, 0, &Error{Type: "Invalid Input", Message: "Invalid Input Error: No statement to prepare!"}
	}
	return ext, 0, newError(msg, bindings.ErrorTypeParser)
}

// Exec runs the statements in sql to completion, discarding any rows they
// return, and reports the total number of rows they inserted, updated or
// deleted. args are bound to the positional parameters ($1 or ?) of a
// single statement: nil, bool, signed and unsigned integers, float32,
// float64, string, []byte (nil is NULL) and time.Time (bound as TIMESTAMP,
// or TIMESTAMP WITH TIME ZONE where DuckDB expects one, to microseconds).
func (c *Conn) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	q, err := c.begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	defer c.end(q)
	n, err := c.exec(q, sql, args)
	return n, withCtx(ctx, c.explain(q, err))
}

func (c *Conn) exec(q *query, sql string, args []any) (int64, error) {
	ext, n, err := c.extract(sql)
	if err != nil {
		return 0, err
	}
	defer bindings.DestroyExtracted(&ext)
	if len(args) > 0 && n != 1 {
		return 0, fmt.Errorf("exec: parameters need exactly one statement, got %d", n)
	}
	var changed int64
	for i := range n {
		if c.interrupted(q) {
			return changed, errInterrupted()
		}
		rows, err := c.execOne(ext, i, args)
		if err != nil {
			return changed, err
		}
		changed += rows
	}
	return changed, nil
}

func (c *Conn) execOne(ext bindings.ExtractedStatements, i int, args []any) (int64, error) {
	var stmt bindings.PreparedStatement
	defer bindings.DestroyPrepare(&stmt)
	if bindings.PrepareExtractedStatement(c.conn, ext, bindings.IdxT(i), &stmt) == bindings.StateError {
		return 0, newError(bindings.PrepareError(stmt), bindings.ErrorTypeInvalid)
	}
	return c.execPrepared(stmt, args)
}

// execPrepared binds args to stmt, runs it to completion and reports the
// rows it changed.
func (c *Conn) execPrepared(stmt bindings.PreparedStatement, args []any) (int64, error) {
	if want := int(bindings.NParams(stmt)); want != len(args) {
		return 0, fmt.Errorf("exec: statement has %d parameters, got %d arguments", want, len(args))
	}
	for j, arg := range args {
		if err := bind(stmt, j+1, arg); err != nil {
			return 0, fmt.Errorf("exec: parameter %d: %w", j+1, err)
		}
	}
	isTx := bindings.PreparedStatementType(stmt) == bindings.StatementTypeTransaction
	var res bindings.Result
	defer bindings.DestroyResult(&res)
	state := bindings.ExecutePrepared(stmt, &res)
	if isTx {
		defer c.probeTransaction()
	}
	if state == bindings.StateError {
		return 0, newError(bindings.ResultError(&res), bindings.ResultErrorType(&res))
	}
	return int64(bindings.RowsChanged(&res)), nil
}

// bind binds v to the 1-based parameter i of stmt.
func bind(stmt bindings.PreparedStatement, i int, v any) error {
	idx := bindings.IdxT(i)
	var state bindings.State
	switch x := v.(type) {
	case nil:
		state = bindings.BindNull(stmt, idx)
	case bool:
		state = bindings.BindBoolean(stmt, idx, x)
	case int:
		state = bindings.BindInt64(stmt, idx, int64(x))
	case int8:
		state = bindings.BindInt8(stmt, idx, x)
	case int16:
		state = bindings.BindInt16(stmt, idx, x)
	case int32:
		state = bindings.BindInt32(stmt, idx, x)
	case int64:
		state = bindings.BindInt64(stmt, idx, x)
	case uint:
		state = bindings.BindUInt64(stmt, idx, uint64(x))
	case uint8:
		state = bindings.BindUInt8(stmt, idx, x)
	case uint16:
		state = bindings.BindUInt16(stmt, idx, x)
	case uint32:
		state = bindings.BindUInt32(stmt, idx, x)
	case uint64:
		state = bindings.BindUInt64(stmt, idx, x)
	case float32:
		state = bindings.BindFloat(stmt, idx, x)
	case float64:
		state = bindings.BindDouble(stmt, idx, x)
	case string:
		state = bindings.BindVarchar(stmt, idx, x)
	case []byte:
		if x == nil {
			state = bindings.BindNull(stmt, idx)
		} else {
			state = bindings.BindBlob(stmt, idx, x)
		}
	case Decimal:
		if x.Width > 18 || x.Scale > x.Width {
			return fmt.Errorf("DECIMAL(%d,%d) does not fit 64 bits", x.Width, x.Scale)
		}
		upper := int64(0)
		if x.Value < 0 {
			upper = -1
		}
		state = bindings.BindDecimal(stmt, idx, bindings.NewDecimal(x.Width, x.Scale, bindings.NewHugeInt(uint64(x.Value), upper)))
	case time.Time:
		ts := bindings.NewTimestamp(x.UnixMicro())
		if bindings.ParamType(stmt, idx) == bindings.TypeTimestampTZ {
			state = bindings.BindTimestampTZ(stmt, idx, ts)
		} else {
			state = bindings.BindTimestamp(stmt, idx, ts)
		}
	default:
		return fmt.Errorf("unsupported argument type %T", v)
	}
	if state == bindings.StateError {
		return fmt.Errorf("DuckDB cannot bind %T", v)
	}
	return nil
}

// InTransaction reports whether an explicit transaction (BEGIN) is open on
// c, including one that failed and awaits ROLLBACK.
func (c *Conn) InTransaction() bool { return c.inTx }

// Begin starts an explicit transaction. Unlike Exec("BEGIN"), it knows the
// statement it ran, so on success it sets the transaction state without
// probing DuckDB.
func (c *Conn) Begin(ctx context.Context) error { return c.control(ctx, "BEGIN TRANSACTION", true) }

// Commit commits the open transaction, without probing on success.
func (c *Conn) Commit(ctx context.Context) error { return c.control(ctx, "COMMIT", false) }

// Rollback rolls back the open transaction, without probing on success.
func (c *Conn) Rollback(ctx context.Context) error { return c.control(ctx, "ROLLBACK", false) }

// control runs a transaction statement whose effect on the transaction
// state is known when it succeeds; a failure leaves the state to the probe.
func (c *Conn) control(ctx context.Context, sql string, inTx bool) error {
	q, err := c.begin(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	defer c.end(q)
	if err := c.run(sql); err != nil {
		c.probeTransaction()
		return withCtx(ctx, err)
	}
	c.inTx = inTx
	return nil
}

// probeTransaction refreshes inTx after a transaction statement. The C API
// cannot report auto-commit mode, so it compares txid_current() across two
// statements: in auto-commit mode each statement gets a new transaction.
// An aborted transaction rejects the probe, which also means "in one".
func (c *Conn) probeTransaction() {
	a, err := c.txid()
	if err == nil {
		var b int64
		b, err = c.txid()
		if err == nil {
			c.inTx = a == b
			return
		}
	}
	var e *Error
	if errors.As(err, &e) && e.Type == errorTypeNames[bindings.ErrorTypeTransaction] {
		c.inTx = true
		return
	}
	c.db.log.Warn("transaction state probe failed", "err", err)
}

func (c *Conn) txid() (int64, error) {
	var res bindings.Result
	defer bindings.DestroyResult(&res)
	if bindings.Query(c.conn, "SELECT txid_current()", &res) == bindings.StateError {
		return 0, newError(bindings.ResultError(&res), bindings.ResultErrorType(&res))
	}
	chunk := bindings.FetchChunk(res)
	if chunk.Ptr == nil {
		return 0, errors.New("txid_current() returned no rows")
	}
	defer bindings.DestroyDataChunk(&chunk)
	return *(*int64)(bindings.VectorGetData(bindings.DataChunkGetVector(chunk, 0))), nil
}
