package node

import (
	"context"
	"fmt"
	"regexp"
	"sort"
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
// statement instead of registering the table function in DuckDB, collects
// the batches, and applies them in order as one transaction of appends when
// the client closes the stream: the same path as Q1's APPEND, so a cluster
// replicates them the same way.
var sendDataInsert = regexp.MustCompile(`(?is)^\s*INSERT\s+INTO\s+(.+?)\s+SELECT\s+\*\s+FROM\s+scan_data_from_quack_client\s*\(\s*'([^']+)'.*\)\s*;?\s*$`)

// maxStreamBytes bounds what one insert stream may buffer before it is
// applied.
const maxStreamBytes = 1 << 30

// dataStream is one Q3 insert in progress.
type dataStream struct {
	uuid wire.Hugeint
	// schema is the target's schema path (one name unless nested).
	schema []string
	table  string

	mu      sync.Mutex
	batches map[uint64][]*wire.DataChunk
	size    int
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
	st := &dataStream{uuid: req.QueryUUID, schema: schema, table: table, batches: make(map[uint64][]*wire.DataChunk)}
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

// sendData takes one SEND_DATA message: a data batch, kept by its index
// (a retried batch replaces itself), or the terminal message that applies
// the whole stream.
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
		sess.mu.Lock()
		delete(sess.streams, req.StreamID)
		sess.mu.Unlock()
		return failure(err)
	}
	ok := response{gen: sess.gen, header: wire.Header{Type: wire.MsgSendDataResponse}, body: &wire.SendDataResponse{}}
	if !req.TotalBatches.Valid {
		if !req.BatchIndex.Valid || req.BatchIndex.Value == 0 {
			return errorResponse("send_data_request is missing its batch index")
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		for _, c := range st.batches[req.BatchIndex.Value] {
			st.size -= chunkBytes(c)
		}
		for _, c := range req.Chunks {
			st.size += chunkBytes(c)
		}
		if st.size > maxStreamBytes {
			return errorResponse(fmt.Sprintf("insert stream '%s' exceeds %d bytes; split the insert", req.StreamID, maxStreamBytes))
		}
		st.batches[req.BatchIndex.Value] = req.Chunks
		return ok
	}

	sess.mu.Lock()
	delete(sess.streams, req.StreamID)
	sess.mu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	total := req.TotalBatches.Value
	if uint64(len(st.batches)) != total {
		return errorResponse(fmt.Sprintf("insert stream '%s' closed after %d batches but %d arrived", req.StreamID, total, len(st.batches)))
	}
	indexes := make([]uint64, 0, len(st.batches))
	for k := range st.batches {
		indexes = append(indexes, k)
	}
	sort.Slice(indexes, func(i, j int) bool { return indexes[i] < indexes[j] })
	if len(indexes) > 0 && indexes[len(indexes)-1] != total {
		return errorResponse(fmt.Sprintf("insert stream '%s' is missing batches", req.StreamID))
	}
	rows, err := s.applyStream(ctx, sess, st, indexes)
	if err != nil {
		return failure(err)
	}
	count, _ := wire.NewVector(wire.LogicalType{ID: wire.TypeBigInt}, []any{rows})
	res := startResult(&chunkRows{names: []string{"Count"}, types: []wire.LogicalType{{ID: wire.TypeBigInt}},
		chunks: []*wire.DataChunk{{Rows: 1, Columns: []*wire.Vector{count}}}}, st.uuid, sess.gen)
	sess.exec.Lock()
	sess.replaceResult(res)
	sess.exec.Unlock()
	return ok
}

// applyStream appends the batches in order inside one transaction, so the
// insert is all or nothing as a single statement would be: the client's own
// when it has one open (DuckDB 2.0's CREATE TABLE … AS creates the table in
// it first), which it then commits or rolls back.
func (s *Server) applyStream(ctx context.Context, sess *Session, st *dataStream, indexes []uint64) (int64, error) {
	sess.exec.Lock()
	defer sess.exec.Unlock()
	sess.replaceResult(nil)
	exec := func(sql string) error {
		r, err := s.cfg.Executor.Query(ctx, sess, sql)
		if err != nil {
			return err
		}
		r.Close()
		return nil
	}
	own := !s.cfg.Executor.InTransaction(sess)
	if own {
		if err := exec("BEGIN TRANSACTION"); err != nil {
			return 0, err
		}
	}
	var rows int64
	for _, k := range indexes {
		for _, c := range st.batches[k] {
			if err := s.cfg.Executor.Append(ctx, sess, st.schema, st.table, c); err != nil {
				if own {
					exec("ROLLBACK")
				}
				return 0, err
			}
			rows += int64(c.Rows)
		}
	}
	if own {
		if err := exec("COMMIT"); err != nil {
			return 0, err
		}
	}
	return rows, nil
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
