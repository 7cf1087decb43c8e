package replication

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/wal"
)

// keyRecord is the first result of a command with an idempotency key: what
// a row of _duckraft.keys holds.
type keyRecord struct {
	key     string // raw key bytes
	idx     uint64
	ts      int64
	changed int64
	failed  bool
	errType string
	errMsg  string
	result  []byte // encodeReturning of the returned rows, nil if none
}

// replay turns r back into the result a retry of its command gets.
func (r *keyRecord) replay() (cmdResult, error) {
	if r.failed {
		return cmdResult{err: fmt.Errorf("entry %d: %w", r.idx, &engine.Error{Type: r.errType, Message: r.errMsg})}, nil
	}
	res := &wal.Result{Index: r.idx, RowsChanged: r.changed, Replayed: true}
	if r.result != nil {
		if err := wal.DecodeReturning(r.result, res); err != nil {
			return cmdResult{}, err
		}
	}
	return cmdResult{res: res}, nil
}

// validUTF8 returns err, or, when its text or exception type is not valid
// UTF-8, an engine.Error that reads the same with each invalid byte
// sequence replaced by U+FFFD. An error is stored in _duckraft.keys and
// sent to clients as VARCHAR, which must be UTF-8: before, a statement
// whose error quoted an invalid name from a hand-made log entry made every
// applier retry its key record forever. The replacement depends only on
// the text, so every node records and answers the same error, and a
// replay reads like the first answer.
func validUTF8(err error) error {
	var typ string
	if e, ok := errors.AsType[*engine.Error](err); ok {
		typ = e.Type
	}
	msg := err.Error()
	if utf8.ValidString(msg) && utf8.ValidString(typ) {
		return err
	}
	return &engine.Error{Type: strings.ToValidUTF8(typ, "\uFFFD"), Message: strings.ToValidUTF8(msg, "\uFFFD")}
}

// newKeyRecord records the outcome of applying the command with key at idx.
func newKeyRecord(key []byte, idx uint64, ts int64, res *wal.Result, applyErr error) (keyRecord, error) {
	r := keyRecord{key: string(key), idx: idx, ts: ts, changed: res.RowsChanged}
	if applyErr != nil {
		// The whole message is kept, so a replay reads exactly like the
		// first failure.
		r.failed, r.errMsg = true, applyErr.Error()
		var e *engine.Error
		if errors.As(applyErr, &e) {
			r.errType = e.Type
		}
		return r, nil
	}
	if len(res.Columns) > 0 {
		b, err := res.AppendReturning(nil)
		if err != nil {
			return keyRecord{}, err
		}
		r.result = b
	}
	return r, nil
}

// keyCache holds in memory every idempotency key applied within the key
// window, so lookups cost no query. _duckraft.keys stays the durable copy:
// it is loaded at start and after a snapshot restore.
type keyCache struct {
	window uint64
	byKey  map[string]*keyRecord
	order  []*keyRecord // by index, for eviction
}

func newKeyCache(window uint64) *keyCache {
	return &keyCache{window: window, byKey: make(map[string]*keyRecord)}
}

// lookup returns the record of key if it was applied within the window
// before index, exactly as the query `key = ? AND idx >= index - window`
// on the table would.
func (c *keyCache) lookup(key []byte, index uint64) *keyRecord {
	r := c.byKey[string(key)]
	if r == nil || index > c.window && r.idx < index-c.window {
		return nil
	}
	return r
}

// add records r, replacing an older record of the same key.
func (c *keyCache) add(r *keyRecord) {
	c.byKey[r.key] = r
	c.order = append(c.order, r)
}

// evict drops records that no lookup at an index above applied can see.
func (c *keyCache) evict(applied uint64) {
	if applied <= c.window {
		return
	}
	oldest := applied - c.window
	n := 0
	for n < len(c.order) && c.order[n].idx < oldest {
		if r := c.order[n]; c.byKey[r.key] == r {
			delete(c.byKey, r.key)
		}
		n++
	}
	if n > 0 {
		c.order = append(c.order[:0:0], c.order[n:]...)
	}
}

// load replaces the cache with the keys in conn's database that a lookup
// above applied can see.
func (c *keyCache) load(conn *engine.Conn, applied uint64) error {
	c.byKey = make(map[string]*keyRecord)
	c.order = nil
	var oldest uint64
	if applied > c.window {
		oldest = applied - c.window
	}
	res, err := conn.Query(context.Background(), fmt.Sprintf(
		"SELECT key, idx, ts, changed, err_type, err_msg, result FROM %s.keys WHERE idx >= %d AND key <> '' ORDER BY idx", metaSchema, oldest))
	if err != nil {
		return fmt.Errorf("load idempotency keys: %w", err)
	}
	defer res.Close()
	for {
		chunk, err := res.Next()
		if err != nil {
			return fmt.Errorf("load idempotency keys: %w", err)
		}
		if chunk == nil {
			return nil
		}
		for i := range chunk.Rows {
			r, err := scanKeyRecord(chunk, i)
			if err != nil {
				return fmt.Errorf("load idempotency keys: %w", err)
			}
			c.add(r)
		}
	}
}

func scanKeyRecord(chunk *wire.DataChunk, row int) (*keyRecord, error) {
	vals := make([]any, len(chunk.Columns))
	for i, v := range chunk.Columns {
		var err error
		if vals[i], err = v.Value(row); err != nil {
			return nil, err
		}
	}
	key, err := hex.DecodeString(vals[0].(string))
	if err != nil {
		return nil, fmt.Errorf("key %q: %w", vals[0], err)
	}
	r := &keyRecord{key: string(key), idx: vals[1].(uint64), ts: vals[2].(int64), changed: vals[3].(int64)}
	if msg, ok := vals[5].(string); ok {
		r.failed, r.errMsg = true, msg
		r.errType, _ = vals[4].(string)
	}
	r.result, _ = vals[6].([]byte)
	if r.result != nil {
		r.result = append([]byte(nil), r.result...)
	}
	return r, nil
}

// keyColumns are the types of _duckraft.keys, for appending records.
var keyColumns = []wire.LogicalType{
	{ID: wire.TypeVarchar}, {ID: wire.TypeUBigInt}, {ID: wire.TypeBigInt}, {ID: wire.TypeBigInt},
	{ID: wire.TypeVarchar}, {ID: wire.TypeVarchar}, {ID: wire.TypeBlob},
}

// A batch writes its key records and its applied index to _duckraft.keys
// in its own transaction. The applied index is the largest idx in the
// table (AppliedQuery), so a batch whose last entry left a key record
// needs nothing more; otherwise a marker row with an empty key holds it.
//
// A batch of a few records (every batch at one client) goes through an
// INSERT prepared once per layout of its rows and kept on the apply
// connection: for one record DuckDB's appender took 0.8–1.0 ms of the
// batch against 0.24–0.33 ms for the prepared INSERT (BenchmarkApplySteps,
// docs/benchmarks.md), while for tens of records the two cost alike and
// the appender needs no statement per row count.
// Unset columns are NULL in the statement's text, never bound, so every
// parameter is bound with its column's type and DuckDB does not bind the
// statement again at each run.

// maxPreparedKeyRows is the most rows a batch writes through a prepared
// INSERT; a larger batch uses the appender.
const maxPreparedKeyRows = 8

// maxKeyStatements bounds the prepared layouts kept; past it they are all
// dropped and prepared again as batches need them.
const maxKeyStatements = 64

// keyWriter writes batches' key records on the apply connection.
type keyWriter struct {
	conn  *engine.Conn
	stmts map[string]*engine.Stmt // by layout: one letter per row
}

func newKeyWriter(conn *engine.Conn) *keyWriter {
	return &keyWriter{conn: conn, stmts: make(map[string]*engine.Stmt)}
}

// reset closes the prepared layouts.
func (w *keyWriter) reset() {
	for _, st := range w.stmts {
		st.Close()
	}
	clear(w.stmts)
}

// The layouts of a row: what the INSERT's VALUES binds for it.
const (
	rowKey    = 'k' // a key record without error or result
	rowResult = 'r' // a key record with the rows its RETURNING gave
	rowFailed = 'f' // a key record of a command that failed
	rowMarker = 'm' // the batch's last index, no key
)

var keyRowText = map[byte]string{
	rowKey:    "(?, ?, ?, ?, NULL, NULL, NULL)",
	rowResult: "(?, ?, ?, ?, NULL, NULL, ?)",
	rowFailed: "(?, ?, ?, ?, ?, ?, NULL)",
	rowMarker: "('', ?, 0, 0, NULL, NULL, NULL)",
}

// store writes records, in index order, and last, the batch's last index,
// in the connection's transaction.
func (w *keyWriter) store(records []*keyRecord, last uint64) error {
	marker := len(records) == 0 || records[len(records)-1].idx != last
	rows := len(records)
	if marker {
		rows++
	}
	if rows > maxPreparedKeyRows {
		if err := appendKeys(w.conn, records, last, marker); err != nil {
			return fmt.Errorf("store idempotency keys: %w", err)
		}
		return nil
	}
	layout := make([]byte, 0, rows)
	args := make([]any, 0, 4*rows)
	for _, r := range records {
		args = append(args, hex.EncodeToString([]byte(r.key)), r.idx, r.ts, r.changed)
		switch {
		case r.failed:
			layout = append(layout, rowFailed)
			args = append(args, r.errType, r.errMsg)
		case r.result != nil:
			layout = append(layout, rowResult)
			args = append(args, r.result)
		default:
			layout = append(layout, rowKey)
		}
	}
	if marker {
		layout = append(layout, rowMarker)
		args = append(args, last)
	}
	st, err := w.prepared(string(layout))
	if err == nil {
		_, err = st.Exec(context.Background(), args...)
	}
	if err != nil {
		return fmt.Errorf("store idempotency keys: %w", err)
	}
	return nil
}

// prepared returns the INSERT of layout, preparing it if it is not kept.
func (w *keyWriter) prepared(layout string) (*engine.Stmt, error) {
	if st, ok := w.stmts[layout]; ok {
		return st, nil
	}
	if len(w.stmts) >= maxKeyStatements {
		w.reset()
	}
	values := make([]string, len(layout))
	for i := range len(layout) {
		values[i] = keyRowText[layout[i]]
	}
	st, err := w.conn.Prepare("INSERT INTO " + metaSchema + ".keys VALUES " + strings.Join(values, ", "))
	if err != nil {
		return nil, err
	}
	w.stmts[layout] = st
	return st, nil
}

// appendKeys appends records, and a marker row for last when marker, to
// _duckraft.keys through one appender call.
func appendKeys(conn *engine.Conn, records []*keyRecord, last uint64, marker bool) error {
	rows := make([][]any, len(records), len(records)+1)
	for i, r := range records {
		var errType, errMsg, result any
		if r.failed {
			errType, errMsg = r.errType, r.errMsg
		}
		if r.result != nil {
			result = r.result
		}
		rows[i] = []any{hex.EncodeToString([]byte(r.key)), r.idx, r.ts, r.changed, errType, errMsg, result}
	}
	if marker {
		rows = append(rows, []any{"", last, int64(0), int64(0), nil, nil, nil})
	}
	chunk, err := wire.ChunkFromRows(keyColumns, rows)
	if err != nil {
		return err
	}
	return conn.Append(metaSchema, "keys", chunk)
}
