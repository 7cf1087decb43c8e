package node

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"

	"github.com/duckraft/duckraft/node/sqlquote"
	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/node/wire"
)

// A Q3 client inserts by running
//
//	INSERT INTO <table> SELECT * FROM scan_data_from_quack_client('<stream id>', NULL::STRUCT(…), ordered := …)
//
// and streaming the rows in SEND_DATA messages. The server recognises that
// statement instead of registering the table function in DuckDB, and
// appends each batch as soon as every batch before it has come, inside one
// transaction: the client's own when it has one open (DuckDB 2.0's CREATE
// TABLE … AS creates the table in it first), else one the stream opens at
// its first batch and commits when the client closes the stream. That is
// the same path as Q1's APPEND, so a cluster replicates them the same way,
// and a large insert streams on (routing stages it) instead of waiting in
// memory for its last batch.
var sendDataInsert = regexp.MustCompile(`(?is)^\s*INSERT\s+INTO\s+(.+?)\s+SELECT\s+\*\s+FROM\s+scan_data_from_quack_client\s*\(\s*'([^']+)'.*\)\s*;?\s*$`)

// maxStreamBytes bounds the batches one insert stream holds that arrived
// ahead of a batch still missing.
const maxStreamBytes = 1 << 30

// dataStream is one Q3 insert in progress.
type dataStream struct {
	uuid wire.Hugeint
	// schema is the target's schema path (one name unless nested).
	schema []string
	table  string

	mu sync.Mutex
	// batches are those that came ahead of batch next, the first not yet
	// appended; size is their size.
	batches map[uint64][]*wire.DataChunk
	size    int
	next    uint64
	rows    int64
	// own is set once the stream opened its own transaction.
	own bool
	// err is the failure that ended the stream, answered to every later
	// message of it.
	err error
}

// openDataStream registers the stream named in a recognised insert and
// answers the PREPARE at once: the statement's result (its Count) comes
// over FETCH once the stream is closed.
func (s *Server) openDataStream(sess *Session, req *wire.PrepareRequest, m []string) response {
	schema, table, err := s.cfg.DB.ResolveTable(m[1])
	if err != nil {
		return errorResponse("cannot insert into " + err.Error())
	}
	sess.exec.Lock()
	sess.replaceResult(nil)
	sess.exec.Unlock()
	st := &dataStream{uuid: req.QueryUUID, schema: schema, table: table, batches: make(map[uint64][]*wire.DataChunk), next: 1}
	sess.mu.Lock()
	if sess.streams == nil {
		sess.streams = make(map[string]*dataStream)
	}
	sess.streams[m[2]] = st
	sess.mu.Unlock()
	return response{gen: sess.gen, header: wire.Header{Type: wire.MsgPrepareResponse}, body: &wire.PrepareResponse{
		Types: []wire.LogicalType{{ID: wire.TypeBigInt}}, Names: []string{"Count"}, NeedsMoreFetch: true, UUID: req.QueryUUID,
	}}
}

// sendData takes one SEND_DATA message: a data batch, appended once every
// batch before it has been (a batch sent again is ignored, or replaces
// itself while it waits), or the terminal message that ends the insert.
func (s *Server) sendData(ctx context.Context, sess *Session, req *wire.SendDataRequest) response {
	sess.mu.Lock()
	st := sess.streams[req.StreamID]
	sess.mu.Unlock()
	if st == nil {
		return errorResponse(fmt.Sprintf("No active data stream '%s'", req.StreamID))
	}
	// The role is checked again: the token may have lost it since the
	// stream opened.
	if err := sess.Require(tokens.Write, "INSERT INTO "+sqlquote.Path(append(st.schema[:len(st.schema):len(st.schema)], st.table))); err != nil {
		s.endStream(ctx, sess, req.StreamID, st)
		return failure(err)
	}
	ok := response{gen: sess.gen, header: wire.Header{Type: wire.MsgSendDataResponse}, body: &wire.SendDataResponse{}}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err != nil {
		return failure(st.err)
	}
	if !req.TotalBatches.Valid {
		if !req.BatchIndex.Valid || req.BatchIndex.Value == 0 {
			return errorResponse("send_data_request is missing its batch index")
		}
		idx := req.BatchIndex.Value
		if idx < st.next {
			return ok
		}
		for _, c := range st.batches[idx] {
			st.size -= chunkBytes(c)
		}
		for _, c := range req.Chunks {
			st.size += chunkBytes(c)
		}
		if st.size > maxStreamBytes {
			return s.failStream(ctx, sess, req.StreamID, st, fmt.Errorf("insert stream '%s' holds more than %d bytes ahead of its batch %d; send its batches in order",
				req.StreamID, maxStreamBytes, st.next))
		}
		st.batches[idx] = req.Chunks
		if err := s.appendReady(ctx, sess, st); err != nil {
			return s.failStream(ctx, sess, req.StreamID, st, err)
		}
		return ok
	}

	sess.mu.Lock()
	delete(sess.streams, req.StreamID)
	sess.mu.Unlock()
	total := req.TotalBatches.Value
	if st.next-1 != total || len(st.batches) > 0 {
		return s.failStream(ctx, sess, req.StreamID, st, fmt.Errorf("insert stream '%s' closed after %d batches but %d arrived (%d of them in order)",
			req.StreamID, total, st.next-1+uint64(len(st.batches)), st.next-1))
	}
	if st.own {
		st.own = false
		if err := s.execSQL(ctx, sess, "COMMIT"); err != nil {
			return failure(err)
		}
	}
	count, _ := wire.NewVector(wire.LogicalType{ID: wire.TypeBigInt}, []any{st.rows})
	res := startResult(&chunkRows{names: []string{"Count"}, types: []wire.LogicalType{{ID: wire.TypeBigInt}},
		chunks: []*wire.DataChunk{{Rows: 1, Columns: []*wire.Vector{count}}}}, st.uuid, sess.gen)
	sess.exec.Lock()
	sess.replaceResult(res)
	sess.exec.Unlock()
	return ok
}

// appendReady appends, in order, the batches that no missing batch
// precedes; st.mu is held.
func (s *Server) appendReady(ctx context.Context, sess *Session, st *dataStream) error {
	for {
		chunks, ok := st.batches[st.next]
		if !ok {
			return nil
		}
		if !st.own && !s.cfg.Executor.InTransaction(sess) {
			if err := s.execSQL(ctx, sess, "BEGIN TRANSACTION"); err != nil {
				return err
			}
			st.own = true
		}
		sess.exec.Lock()
		sess.replaceResult(nil)
		for _, c := range chunks {
			if err := s.cfg.Executor.Append(ctx, sess, st.schema, st.table, c); err != nil {
				sess.exec.Unlock()
				return err
			}
			st.rows += int64(c.Rows)
			st.size -= chunkBytes(c)
		}
		sess.exec.Unlock()
		delete(st.batches, st.next)
		st.next++
	}
}

// failStream ends a stream with err, rolling back the transaction it
// opened: the insert is all or nothing, as a single statement is.
func (s *Server) failStream(ctx context.Context, sess *Session, id string, st *dataStream, err error) response {
	st.err = err
	st.batches, st.size = nil, 0
	if st.own {
		st.own = false
		if rerr := s.execSQL(ctx, sess, "ROLLBACK"); rerr != nil {
			err = fmt.Errorf("%w (and its rollback: %v)", err, rerr)
		}
	}
	sess.mu.Lock()
	if sess.streams[id] == st {
		delete(sess.streams, id)
	}
	sess.mu.Unlock()
	return failure(err)
}

// endStream drops a stream that may not go on.
func (s *Server) endStream(ctx context.Context, sess *Session, id string, st *dataStream) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s.failStream(ctx, sess, id, st, errors.New("insert stream ended"))
}

// abandonOwnStreams rolls back the insert streams that opened their own
// transaction and were not closed: a new statement must not run inside it.
func (s *Server) abandonOwnStreams(ctx context.Context, sess *Session) {
	sess.mu.Lock()
	var open []string
	for id, st := range sess.streams {
		st.mu.Lock()
		if st.own {
			open = append(open, id)
		}
		st.mu.Unlock()
	}
	streams := make([]*dataStream, len(open))
	for i, id := range open {
		streams[i] = sess.streams[id]
	}
	sess.mu.Unlock()
	for i, st := range streams {
		st.mu.Lock()
		s.failStream(ctx, sess, open[i], st, errors.New("insert stream abandoned: the client sent another statement before closing it"))
		st.mu.Unlock()
	}
}

// execSQL runs a statement of the stream's transaction through the
// executor.
func (s *Server) execSQL(ctx context.Context, sess *Session, sql string) error {
	sess.exec.Lock()
	defer sess.exec.Unlock()
	r, err := s.cfg.Executor.Query(ctx, sess, sql)
	if err != nil {
		return err
	}
	r.Close()
	return nil
}

func chunkBytes(c *wire.DataChunk) int {
	n := 0
	var walk func(v *wire.Vector)
	walk = func(v *wire.Vector) {
		n += len(v.Data) + len(v.Bytes) + 4*len(v.Offsets) + 16*len(v.Entries) + len(v.Validity)
		for _, ch := range v.Children {
			walk(ch)
		}
	}
	for _, v := range c.Columns {
		walk(v)
	}
	return n
}

// chunkRows is a result held in memory.
type chunkRows struct {
	names  []string
	types  []wire.LogicalType
	chunks []*wire.DataChunk
}

func (r *chunkRows) Names() []string           { return r.names }
func (r *chunkRows) Types() []wire.LogicalType { return r.types }
func (r *chunkRows) Close()                    {}

func (r *chunkRows) Next() (*wire.DataChunk, error) {
	if len(r.chunks) == 0 {
		return nil, nil
	}
	c := r.chunks[0]
	r.chunks = r.chunks[1:]
	return c, nil
}
