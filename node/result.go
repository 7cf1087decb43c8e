package node

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/duckraft/duckraft/node/wire"
)

// batchChunks is how many DataChunks make one PREPARE or FETCH batch. It is
// DuckDB's quack_fetch_batch_chunks: Q1 clients take "exactly this many
// chunks inline" as the sign that more must be fetched.
const batchChunks = 12

// readAhead is how many encoded batches a result's producer may hold beyond
// the one being sent. It lets DuckDB execute, the codec encode and the socket
// send at the same time while keeping memory per result bounded.
const readAhead = 2

// ErrResultClosed is returned for a FETCH whose result is no longer current.
var ErrResultClosed = errors.New("Result has been closed")

// ErrInterrupted is returned for a FETCH of a cancelled result.
var ErrInterrupted = errors.New("Query was interrupted")

// Rows is a streaming result: column names and types, then DataChunks until
// Next returns nil. A chunk is valid only until the next call to Next.
type Rows interface {
	Names() []string
	Types() []wire.LogicalType
	Next() (*wire.DataChunk, error)
	Close()
}

// EncodedRows is a Rows that can hand out its chunks already encoded: a
// router's rows from another node, whose bytes the server forwards as they
// came instead of decoding and encoding them again. The server reads such
// rows only through NextEncoded.
type EncodedRows interface {
	Rows
	// NextEncoded returns the next chunk as one DataChunk object in the
	// layout of generation g, and its row count; nil at the end. The
	// bytes stay valid after later calls. When buf is not nil the bytes
	// are in it, and the caller holds a reference to release once it no
	// longer reads them (or to drop, leaving buf to the collector).
	NextEncoded(g wire.Generation) (enc []byte, n int, buf *wire.Buffer, err error)
}

// batch is a run of encoded DataChunk objects cut from a result, with a
// reference to each pooled buffer holding some of them.
type batch struct {
	chunks [][]byte
	bufs   []*wire.Buffer
	rows   int
	// last is set when the result ended inside this batch (fewer than
	// batchChunks chunks), so no FETCH is needed after it.
	last bool
	err  error
}

// retain takes another reference to each of b's buffers, for a response
// that sends b while b stays pending.
func (b batch) retain() {
	for _, buf := range b.bufs {
		buf.Retain()
	}
}

// release drops b's references to its buffers.
func (b batch) release() {
	for _, buf := range b.bufs {
		buf.Release()
	}
}

// result is the one active query result of a session. A producer goroutine
// cuts the stream into encoded batches ahead of the FETCH requests; FETCHes
// take them in order under mu, which keeps batch numbering dense even when a
// client fetches with several threads at once.
type result struct {
	uuid  wire.Hugeint
	names []string
	types []wire.LogicalType

	batches chan batch
	stop    chan struct{}
	done    chan struct{}

	mu sync.Mutex
	// fetched numbers the batches served by FETCH: server-assigned in Q1,
	// the client's batch index in Q3.
	fetched uint64
	// pending holds batches taken ahead of a FETCH that asked for a later
	// client batch index (Q3 read-ahead arriving out of order), and served
	// batches kept for transport retries until acknowledged.
	pending map[uint64]batch
	ended   bool
	err     error

	// stmt is the statement the result belongs to, whose context ends
	// when the result is closed; nil for none.
	stmt *statement

	stopOnce sync.Once
	// drained is set once the rows are read to their end or error: no
	// query runs any more, only the close that follows.
	drained atomic.Bool
}

// startResult begins producing batches from rows in the background. pause
// gives back the turn its statement holds in DuckDB (engine.Conn.Pause)
// whenever the producer waits for a FETCH.
func startResult(rows Rows, uuid wire.Hugeint, g wire.Generation, pause func()) *result {
	r := &result{
		uuid:    uuid,
		names:   rows.Names(),
		types:   rows.Types(),
		batches: make(chan batch, readAhead),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		pending: make(map[uint64]batch),
	}
	go r.produce(rows, g, pause)
	return r
}

func (r *result) produce(rows Rows, g wire.Generation, pause func()) {
	defer close(r.done)
	defer close(r.batches)
	defer rows.Close()
	// Chunks of one result encode to similar sizes; starting each buffer at
	// the last size avoids regrowing it column by column.
	size := 64 << 10
	er, _ := rows.(EncodedRows)
	for {
		b := batch{}
		for len(b.chunks) < batchChunks {
			if er != nil {
				enc, n, buf, err := er.NextEncoded(g)
				if err != nil {
					b.err = err
					break
				}
				if enc == nil {
					b.last = true
					break
				}
				if buf != nil {
					b.bufs = append(b.bufs, buf)
				}
				b.chunks = append(b.chunks, enc)
				b.rows += n
				continue
			}
			c, err := rows.Next()
			if err != nil {
				b.err = err
				break
			}
			if c == nil {
				b.last = true
				break
			}
			buf := wire.NewBuffer(size + size/8)
			enc, err := wire.AppendDataChunk(buf.B[:0], c, g)
			if err != nil {
				buf.Release()
				b.err = err
				break
			}
			if len(enc) > cap(buf.B) {
				// The chunk outgrew the buffer and was moved.
				buf.Release()
			} else {
				b.bufs = append(b.bufs, buf)
			}
			size = len(enc)
			b.chunks = append(b.chunks, enc)
			b.rows += c.Rows
		}
		if b.last || b.err != nil {
			r.drained.Store(true)
		}
		select {
		case r.batches <- b:
		default:
			// The read-ahead is full: until a FETCH takes a batch the
			// statement takes no turn from others (a slow reader's idle
			// time is not DuckDB's work), and Next waits for one again.
			pause()
			select {
			case r.batches <- b:
			case <-r.stop:
				b.release()
				return
			}
		}
		if b.last || b.err != nil {
			return
		}
	}
}

// take returns the next batch in stream order; ok is false once the stream
// is exhausted. Callers hold r.mu.
func (r *result) take() (b batch, ok bool) {
	if r.ended {
		return batch{}, false
	}
	b, ok = <-r.batches
	if !ok {
		r.ended = true
		return batch{}, false
	}
	if b.last || b.err != nil {
		r.ended = true
	}
	if b.err != nil {
		r.err = b.err
	}
	return b, true
}

// close stops the producer and waits for it, so the session's connection is
// free for the next statement.
//
// Batches the producer cut but no FETCH took are released; pending ones are
// left to the collector, since close may run under r.mu (a PREPARE whose
// rows failed).
func (r *result) close() {
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.done
	for b := range r.batches {
		b.release()
	}
	// The rows are closed: ending the context interrupts nothing now.
	if r.stmt != nil {
		r.stmt.end()
	}
}

// interrupt cancels the context of the result's statement, which stops the
// query behind its rows wherever it runs.
func (r *result) interrupt() {
	if r.stmt != nil {
		r.stmt.interrupt()
	}
}

// running reports whether the producer may still be inside a query that an
// interrupt should stop: not once the rows were read to their end, when only
// their close (a read transaction's rollback, say) remains, which an
// interrupt would break.
func (r *result) running() bool { return !r.finished() && !r.drained.Load() }

// finished reports whether the producer has exited on its own or been stopped.
func (r *result) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}
