package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duckraft/duckraft/node/wire"
)

// Rows is a streaming query result. Read it chunk by chunk with NextChunk,
// or row by row with Next and Values. Batches are fetched by several workers
// at once and handed out in the server's order.
type Rows struct {
	conn  *Conn
	uuid  wire.Hugeint
	names []string
	types []wire.LogicalType

	// queue holds chunks ready to hand out, in order: decoded, or
	// encoded (enc) with Options.Encoded, in the body encBuf, of which the
	// reader holds a reference.
	queue  []*wire.DataChunk
	enc    [][]byte
	encBuf *wire.Buffer

	// Parallel fetch state.
	ctx     context.Context
	cancel  context.CancelFunc
	mu      sync.Mutex
	cond    *sync.Cond
	ready   map[uint64]fetched
	next    uint64 // next batch index to hand out
	end     bool   // some worker saw the end of the result
	total   uint64 // Q3: batches in the result, known once end is seen
	q3next  uint64 // Q3: the last batch index a worker asked for
	err     error
	workers int
	started bool
	done    bool

	// canceled is set by Cancel, from any goroutine: the reader's next
	// call fails with ErrCanceled, whatever it holds fetched.
	canceled atomic.Bool

	// Row iteration.
	chunk *wire.DataChunk
	row   int
}

// ErrCanceled is the error of Rows whose Cancel was called.
var ErrCanceled = errors.New("quack: query cancelled")

// cancelTimeout bounds the CANCEL_REQUEST Query sends when its context
// ends, which no context of the caller's bounds any more.
const cancelTimeout = 5 * time.Second

// cancelQuery asks the server to interrupt the statement of uuid (zero:
// whatever the session runs, for a Q1 PREPARE, which names no uuid). It is
// best effort: a server that never knew CANCEL (DuckDB 1.5.4) or has
// already finished answers with an error, which changes nothing.
func (c *Conn) cancelQuery(uuid wire.Hugeint) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	c.roundTrip(ctx, c.gen, wire.Header{Type: wire.MsgCancelRequest}, &wire.CancelRequest{UUID: uuid})
}

// Cancel interrupts the result's query on the server, with a
// CANCEL_REQUEST for its uuid on a request of its own, and closes r: the
// reader's next call fails with ErrCanceled, even with rows fetched ahead.
// It is safe to call from another goroutine than the reader's. Nothing is
// sent when the whole result has already arrived. ctx bounds the request.
func (r *Rows) Cancel(ctx context.Context) error {
	r.mu.Lock()
	if r.err == nil {
		r.err = ErrCanceled
	}
	whole := r.end && r.workers == 0
	r.mu.Unlock()
	r.canceled.Store(true)
	r.Close()
	if whole {
		return nil
	}
	_, _, err := r.conn.roundTrip(ctx, r.conn.gen, wire.Header{Type: wire.MsgCancelRequest}, &wire.CancelRequest{UUID: r.uuid})
	if err != nil {
		return fmt.Errorf("quack cancel: %w", err)
	}
	return nil
}

// Query runs sql and returns its result. The first rows arrive with the
// answer; the rest are fetched in parallel as they are read.
//
// ctx bounds the call. When it ends before the answer, Query sends a
// CANCEL_REQUEST on a request of its own, so the server interrupts the
// statement, and returns ctx's error. It does not cover the Rows, which
// stream on after Query returns: Rows.Cancel stops those.
func (c *Conn) Query(ctx context.Context, sql string) (*Rows, error) {
	if err := c.begin(); err != nil {
		return nil, err
	}
	req := &wire.PrepareRequest{SQL: sql}
	if c.gen != wire.Q1 {
		req.QueryUUID = wire.RandomUUID()
	}
	_, msg, buf, err := c.roundTripResult(ctx, c.gen, wire.Header{Type: wire.MsgPrepareRequest}, req, nil)
	if err != nil {
		if ctx.Err() != nil {
			// The server may still be computing: tell it to stop, before
			// the session's next statement can start.
			c.cancelQuery(req.QueryUUID)
			return nil, fmt.Errorf("quack query: %w", ctx.Err())
		}
		return nil, err
	}
	resp, ok := msg.(*wire.PrepareResponse)
	if !ok {
		buf.Release()
		return nil, fmt.Errorf("quack query: unexpected answer %T", msg)
	}
	rctx, cancel := context.WithCancel(context.Background())
	r := &Rows{
		conn:   c,
		uuid:   resp.UUID,
		names:  resp.Names,
		types:  resp.Types,
		queue:  resp.Chunks,
		enc:    resp.Encoded,
		encBuf: buf,
		ctx:    rctx,
		cancel: cancel,
		ready:  make(map[uint64]fetched),
		next:   1,
		end:    !resp.NeedsMoreFetch,
	}
	r.cond = sync.NewCond(&r.mu)
	if !resp.NeedsMoreFetch {
		r.done = true
	}
	c.mu.Lock()
	c.current = r
	c.mu.Unlock()
	return r, nil
}

// Names returns the column names.
func (r *Rows) Names() []string { return r.names }

// Types returns the column types.
func (r *Rows) Types() []wire.LogicalType { return r.types }

// fetched is one batch of a result: decoded chunks, or encoded ones with
// Options.Encoded, and a reference to the body holding them.
type fetched struct {
	chunks []*wire.DataChunk
	enc    [][]byte
	buf    *wire.Buffer
}

func (f fetched) empty() bool { return len(f.chunks) == 0 && len(f.enc) == 0 }

// fill waits for the next batch once the queue is empty; ok is false at
// the end of the result.
func (r *Rows) fill() (ok bool, err error) {
	for len(r.queue) == 0 && len(r.enc) == 0 {
		if r.done {
			return false, r.Err()
		}
		b, err := r.nextBatch()
		if err != nil {
			return false, err
		}
		// Every chunk of the batch before was handed out, each with its
		// own reference.
		r.encBuf.Release()
		r.encBuf = nil
		if b.empty() {
			b.buf.Release()
			r.done = true
			return false, nil
		}
		r.queue, r.enc, r.encBuf = b.chunks, b.enc, b.buf
	}
	return true, nil
}

// NextChunk returns the next chunk of rows, or nil at the end of the result.
func (r *Rows) NextChunk() (*wire.DataChunk, error) {
	if r.canceled.Load() {
		return nil, ErrCanceled
	}
	if ok, err := r.fill(); !ok {
		return nil, err
	}
	if len(r.queue) == 0 {
		enc := r.popEncoded()
		// The decoded chunk may alias the body: a reference never
		// released keeps it out of the pool.
		r.encBuf.Retain()
		c, err := wire.DecodeDataChunk(wire.NewReader(enc), wire.Limits{})
		if err != nil {
			return nil, fmt.Errorf("quack: decode chunk: %w", err)
		}
		return c, nil
	}
	c := r.queue[0]
	r.queue[0] = nil
	r.queue = r.queue[1:]
	return c, nil
}

// NextEncoded returns the next chunk of rows as a DataChunk object in the
// connection's generation, and its row count; nil at the end of the result.
// With Options.Encoded these are the bytes as the server sent them (checked
// by wire.DecodeBodyEncoded), in the pooled body buf, of which the caller
// gets a reference to release once done with the bytes; otherwise the
// decoded chunk is encoded again and buf is nil.
func (r *Rows) NextEncoded() (enc []byte, n int, buf *wire.Buffer, err error) {
	if r.canceled.Load() {
		return nil, 0, nil, ErrCanceled
	}
	if ok, err := r.fill(); !ok {
		return nil, 0, nil, err
	}
	if len(r.queue) > 0 {
		c := r.queue[0]
		r.queue[0] = nil
		r.queue = r.queue[1:]
		enc, err := wire.AppendDataChunk(nil, c, r.conn.gen)
		return enc, c.Rows, nil, err
	}
	enc = r.popEncoded()
	n, err = wire.EncodedChunkRows(enc)
	if err != nil {
		return nil, 0, nil, err
	}
	r.encBuf.Retain()
	return enc, n, r.encBuf, nil
}

func (r *Rows) popEncoded() []byte {
	enc := r.enc[0]
	r.enc[0] = nil
	r.enc = r.enc[1:]
	return enc
}

// Generation returns the generation the result's chunks are encoded in.
func (r *Rows) Generation() wire.Generation { return r.conn.gen }

// Next advances to the next row; Values then returns it. It returns false at
// the end of the result or on an error (see Err).
func (r *Rows) Next() bool {
	if r.canceled.Load() {
		r.chunk = nil
		return false
	}
	for r.chunk == nil || r.row+1 >= r.chunk.Rows {
		c, err := r.NextChunk()
		if err != nil || c == nil {
			r.chunk = nil
			return false
		}
		r.chunk, r.row = c, -1
	}
	r.row++
	return true
}

// Values returns the current row as Go values (see wire.Vector.Value).
func (r *Rows) Values() ([]any, error) {
	out := make([]any, len(r.chunk.Columns))
	for i, col := range r.chunk.Columns {
		v, err := col.Value(r.row)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", r.names[i], err)
		}
		out[i] = v
	}
	return out, nil
}

// Err returns the error that ended the result early, if any.
func (r *Rows) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close stops fetching. Rows not read are dropped; the server discards the
// result when the session runs its next statement.
//
// The batches fetched ahead go back to the pool. The one being handed out
// is left to the collector: Close may run on another goroutine than the
// reader's (Conn.Close).
func (r *Rows) Close() {
	r.cancel()
	r.mu.Lock()
	r.done = true
	for i, b := range r.ready {
		b.buf.Release()
		delete(r.ready, i)
	}
	r.cond.Broadcast()
	r.mu.Unlock()
	r.conn.mu.Lock()
	if r.conn.current == r {
		r.conn.current = nil
	}
	r.conn.mu.Unlock()
}

// nextBatch returns the chunks of the next batch in order, starting the
// fetch workers on first use; nil means the result is exhausted.
func (r *Rows) nextBatch() (fetched, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		r.started = true
		r.workers = r.conn.opts.FetchWorkers
		for i := 0; i < r.workers; i++ {
			go r.fetchLoop()
		}
	}
	for {
		if b, ok := r.ready[r.next]; ok {
			delete(r.ready, r.next)
			r.next++
			r.cond.Broadcast()
			return b, nil
		}
		if r.err != nil {
			return fetched{}, r.err
		}
		if r.end && (r.workers == 0 || r.total > 0 && r.next > r.total) {
			return fetched{}, nil
		}
		if r.done {
			return fetched{}, nil
		}
		r.cond.Wait()
	}
}

// window bounds how far ahead of the reader the workers may fetch, so a slow
// reader does not buffer the whole result.
func (r *Rows) window() uint64 { return uint64(2 * r.conn.opts.FetchWorkers) }

// fetchLoop is one fetch worker. In Q1 the server numbers the batches in the
// order it cuts them; in Q3 the worker names the batch it wants.
func (r *Rows) fetchLoop() {
	defer func() {
		r.mu.Lock()
		r.workers--
		r.cond.Broadcast()
		r.mu.Unlock()
	}()
	var claimed uint64 // Q3: the next batch index this set of workers asks for
	for {
		r.mu.Lock()
		for !r.done && r.err == nil && !r.end && uint64(len(r.ready)) >= r.window() {
			r.cond.Wait()
		}
		if r.done || r.err != nil || r.end {
			r.mu.Unlock()
			return
		}
		req := &wire.FetchRequest{UUID: r.uuid}
		if r.conn.gen == wire.Q3 {
			r.claimQ3(&claimed)
			req.BatchIndex = claimed
			req.AckIndex = r.next - 1
		}
		r.mu.Unlock()

		_, msg, buf, err := r.conn.roundTripResult(r.ctx, r.conn.gen, wire.Header{Type: wire.MsgFetchRequest}, req, r.types)
		r.mu.Lock()
		if r.done {
			// Closed while fetching: nobody reads this batch.
			buf.Release()
			r.mu.Unlock()
			return
		}
		if err != nil {
			if r.err == nil {
				r.err = err
			}
			r.cond.Broadcast()
			r.mu.Unlock()
			return
		}
		resp, ok := msg.(*wire.FetchResponse)
		kept := false
		switch {
		case !ok:
			r.err = fmt.Errorf("quack fetch: unexpected answer %T", msg)
		case len(resp.Chunks) == 0 && len(resp.Encoded) == 0:
			r.end = true
			if resp.TotalBatches.Valid {
				r.total = resp.TotalBatches.Value
			}
		case !resp.BatchIndex.Valid:
			r.err = fmt.Errorf("quack fetch: batch without an index")
		case r.conn.gen == wire.Q3 && resp.BatchIndex.Value != req.BatchIndex:
			r.err = fmt.Errorf("quack fetch: asked for batch %d, got batch %d", req.BatchIndex, resp.BatchIndex.Value)
		case !r.expected(resp.BatchIndex.Value):
			r.err = fmt.Errorf("quack fetch: batch %d out of order (next %d)", resp.BatchIndex.Value, r.next)
		default:
			r.ready[resp.BatchIndex.Value] = fetched{resp.Chunks, resp.Encoded, buf}
			kept = true
		}
		if !kept {
			buf.Release()
		}
		r.cond.Broadcast()
		r.mu.Unlock()
	}
}

// expected reports whether a batch of index idx can be one not yet handed
// out. A Q1 server numbers the batches densely in the order it serves
// them, so every index below idx went to some FETCH: an index already
// taken, or further ahead than the fetches in flight and the batches
// waiting allow, would leave the reader waiting forever for a batch that
// never comes. Callers hold r.mu.
func (r *Rows) expected(idx uint64) bool {
	if _, dup := r.ready[idx]; dup || idx < r.next {
		return false
	}
	return idx < r.next+r.window()+uint64(r.conn.opts.FetchWorkers)
}

// claimQ3 picks the next unclaimed Q3 batch index for a worker. Callers hold
// r.mu.
func (r *Rows) claimQ3(claimed *uint64) {
	r.q3next++
	*claimed = r.q3next
}
