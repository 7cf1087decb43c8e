package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/duckraft/duckraft/node/sqlquote"
	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/node/wire"
)

// A Q3 client inserts by running
//
//	INSERT INTO <table> SELECT * FROM scan_data_from_quack_client('<stream id>', NULL::STRUCT(col0 <type>, …), ordered := true|false)
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
//
// Only the exact text DuckDB's client writes is recognised
// (parseInsertStream): the server runs none of it, so anything else in it
// would be dropped without a word. Any other text that names the function
// is refused (errStreamStatement), never run in part: DuckDB, which does
// not have the function, would run the statements before it, and try to
// install the extension that has it.
const streamFunction = "scan_data_from_quack_client"

// errStreamStatement refuses a text that names the stream function but is
// not the insert statement DuckDB's client sends, or comes in a session
// without streams (Q1).
var errStreamStatement = errors.New("Not implemented Error: " + streamFunction + " is served only in the statement " +
	"DuckDB's client sends to insert a data stream, exactly: INSERT INTO <table> SELECT * FROM " + streamFunction +
	"('<stream id>', NULL::STRUCT(col0 <type>, …), ordered := true|false), in a Quack 3 session; nothing of this text was run")

// namesStreamFunction reports whether sql holds the stream function's
// name anywhere, in any case: in a call, a string or a comment alike.
func namesStreamFunction(sql string) bool {
	for i := 0; i+len(streamFunction) <= len(sql); i++ {
		if c := sql[i]; (c == 's' || c == 'S') && strings.EqualFold(sql[i:i+len(streamFunction)], streamFunction) {
			return true
		}
	}
	return false
}

// parseInsertStream returns the target and the stream id of sql if it is
// exactly the statement DuckDB 2.0's client sends for an insert stream
// (duckdb-quack's quack_insert.cpp):
//
//	INSERT INTO <name> SELECT * FROM scan_data_from_quack_client('<stream id>', NULL::STRUCT(col0 <type>, col1 <type>, …), ordered := true|false)
//
// in those words, cases and spaces, and nothing after it. <name> is a
// dotted path of identifiers, each plain or double-quoted, as DuckDB
// renders a qualified name; the stream id is a UUID or hex string; each
// <type> is DuckDB's rendering of a type (nested types, quoted names and
// literals), which the server does not use: the chunks carry their types.
func parseInsertStream(sql string) (target, stream string, ok bool) {
	p := &textParser{s: sql}
	if !p.word("INSERT INTO ") {
		return "", "", false
	}
	start := p.i
	if !p.qualifiedName() {
		return "", "", false
	}
	target = sql[start:p.i]
	if !p.word(" SELECT * FROM " + streamFunction + "('") {
		return "", "", false
	}
	start = p.i
	for p.i < len(sql) && p.i-start < 64 && isStreamIDByte(sql[p.i]) {
		p.i++
	}
	stream = sql[start:p.i]
	if stream == "" || !p.word("', NULL::STRUCT(") {
		return "", "", false
	}
	for col := 0; ; col++ {
		if !p.word("col"+strconv.Itoa(col)+" ") || !p.typeText() {
			return "", "", false
		}
		if p.word(", ") {
			continue
		}
		if p.word(")") {
			break
		}
		return "", "", false
	}
	if !p.word(", ordered := ") || !p.word("true)") && !p.word("false)") || p.i != len(sql) {
		return "", "", false
	}
	return target, stream, true
}

func isStreamIDByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-'
}

// textParser walks a statement's text for parseInsertStream.
type textParser struct {
	s string
	i int
}

// word consumes w if the text goes on with it, exactly.
func (p *textParser) word(w string) bool {
	if !strings.HasPrefix(p.s[p.i:], w) {
		return false
	}
	p.i += len(w)
	return true
}

// quoted consumes a string quoted with q, in which q is doubled.
func (p *textParser) quoted(q byte) bool {
	if p.i >= len(p.s) || p.s[p.i] != q {
		return false
	}
	for j := p.i + 1; j < len(p.s); j++ {
		if p.s[j] != q {
			continue
		}
		if j+1 < len(p.s) && p.s[j+1] == q {
			j++
			continue
		}
		p.i = j + 1
		return true
	}
	return false
}

// qualifiedName consumes one or more identifiers joined by dots, each a
// plain identifier or a double-quoted one.
func (p *textParser) qualifiedName() bool {
	for {
		switch {
		case p.quoted('"'):
		case p.i < len(p.s) && (isIdentStart(p.s[p.i])):
			for p.i++; p.i < len(p.s) && (isIdentStart(p.s[p.i]) || p.s[p.i] >= '0' && p.s[p.i] <= '9'); p.i++ {
			}
		default:
			return false
		}
		if !p.word(".") {
			return true
		}
	}
}

func isIdentStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }

// typeText consumes one type as DuckDB renders it, up to the ", " or ")"
// that ends it: words, numbers and blanks, parentheses and brackets that
// balance, commas inside them, quoted names and string literals. Nothing
// else (no semicolon, no comment) may appear outside quotes.
func (p *textParser) typeText() bool {
	start, depth := p.i, 0
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == '\'' || c == '"':
			if !p.quoted(c) {
				return false
			}
			continue
		case c == '(' || c == '[':
			depth++
		case c == ')' || c == ']':
			if depth == 0 {
				return c == ')' && p.i > start
			}
			depth--
		case c == ',':
			if depth == 0 {
				return p.i > start
			}
		case c == ' ' || c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		default:
			return false
		}
		p.i++
	}
	return false
}

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
func (s *Server) openDataStream(sess *Session, req *wire.PrepareRequest, target, stream string) response {
	schema, table, err := s.cfg.DB.ResolveTable(target)
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
	sess.streams[stream] = st
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
		return streamGone(sess, req.StreamID)
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
		chunks: []*wire.DataChunk{{Rows: 1, Columns: []*wire.Vector{count}}}}, st.uuid, sess.gen, sess.conn.Pause)
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
	r, err := s.cfg.Executor.Query(streamStatement(ctx), sess, sql)
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
