package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/wal"
)

// The rows of an open staged part live in the Raft log, in its Stage
// entries, until the transaction's COMMIT inserts them (stageapply.go). The
// log must therefore keep those entries whatever raft compacts, and a
// snapshot must carry their rows to a node whose log will not hold them.

// errStageLog wraps a failure to read a staged part's rows back from this
// node's log. It is the node's own (an I/O error, an entry its log lost),
// never the entry's: the applier retries rather than failing the COMMIT
// here and nowhere else.
var errStageLog = errors.New("replication: read staged rows from the log")

// stagedEntry is one row of staged_entries: the part's rows from first on
// are in the log entry at idx, or, when idx is 0, in the row's body.
type stagedEntry struct {
	first uint64
	idx   uint64
}

// stagedEntries lists the rows of staged_entries of part part of stage id in row order,
// read on conn.
func stagedEntries(ctx context.Context, conn *engine.Conn, id uint64, part uint32) ([]stagedEntry, error) {
	rows, err := conn.Query(ctx, fmt.Sprintf("SELECT first_row, coalesce(idx, 0) FROM %s.staged_entries WHERE id = %d AND part = %d ORDER BY first_row",
		metaSchema, id, part))
	if err != nil {
		return nil, fmt.Errorf("list staged entries: %w", err)
	}
	defer rows.Close()
	var out []stagedEntry
	for {
		c, err := rows.Next()
		if err != nil {
			return nil, fmt.Errorf("list staged entries: %w", err)
		}
		if c == nil {
			return out, nil
		}
		for i := range c.Rows {
			first, err1 := c.Columns[0].Value(i)
			idx, err2 := c.Columns[1].Value(i)
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("list staged entries: %w", err)
			}
			out = append(out, stagedEntry{first: first.(uint64), idx: idx.(uint64)})
		}
	}
}

// stageBody returns the encoded chunks of entry e of part part of stage id:
// from the entry of logs that holds them, or from the body stored on conn.
func stageBody(ctx context.Context, conn *engine.Conn, logs raft.LogStore, id uint64, part uint32, e stagedEntry) ([][]byte, error) {
	if e.idx != 0 {
		return readStageEntry(logs, e.idx, id, part, e.first)
	}
	row, err := conn.QueryRow(ctx, fmt.Sprintf("SELECT body FROM %s.staged_entries WHERE id = %d AND part = %d AND first_row = %d",
		metaSchema, id, part, e.first))
	if err != nil {
		return nil, fmt.Errorf("stage %x part %d at row %d: %w", id, part, e.first, err)
	}
	body, ok := row[0].([]byte)
	if !ok {
		return nil, fmt.Errorf("stage %x part %d at row %d: no rows stored", id, part, e.first)
	}
	return decodeStageBody(body)
}

// readStageEntry returns the chunks of the Stage entry of part part of
// stage id starting at row first, from the log entry at idx.
func readStageEntry(logs raft.LogStore, idx, id uint64, part uint32, first uint64) ([][]byte, error) {
	if logs == nil {
		return nil, fmt.Errorf("%w: entry %d: this applier has no log", errStageLog, idx)
	}
	var l raft.Log
	if err := logs.GetLog(idx, &l); err != nil {
		return nil, fmt.Errorf("%w: entry %d: %w", errStageLog, idx, err)
	}
	b, err := wal.Decode(l.Data)
	if err != nil {
		return nil, fmt.Errorf("%w: entry %d: %w", errStageLog, idx, err)
	}
	for _, c := range b.Commands {
		if s, ok := c.Entry.(wal.Stage); ok && s.ID == id && s.Part == part && s.Offset == first {
			return s.Chunks, nil
		}
	}
	return nil, fmt.Errorf("%w: entry %d holds no rows of stage %x part %d from row %d", errStageLog, idx, id, part, first)
}

// encodeStageBody encodes the chunks of a Stage entry for staged_entries'
// body and the snapshot: their count, then each with its length.
func encodeStageBody(chunks [][]byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(chunks)))
	for _, c := range chunks {
		b = appendLenBytes(b, c)
	}
	return b
}

// decodeStageBody decodes encodeStageBody's encoding.
func decodeStageBody(b []byte) ([][]byte, error) {
	r := byteReader{b: b}
	n := r.uvarint()
	if r.err == nil && n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: staged rows of %d chunks in %d bytes", ErrSnapshotCorrupt, n, len(b))
	}
	chunks := make([][]byte, 0, n)
	for range n {
		chunks = append(chunks, r.bytes())
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: staged rows: %w", ErrSnapshotCorrupt, r.err)
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the staged rows", ErrSnapshotCorrupt, len(r.b))
	}
	return chunks, nil
}

// logHolds is the first log index raft must keep: the smallest that holds
// rows of an open staged part, and the smallest a snapshot being written
// still reads. logCache.DeleteRange deletes nothing from there on.
type logHolds struct {
	mu sync.Mutex
	// open is the smallest index in staged_entries, or 0 for none.
	open uint64
	// pins counts the snapshots reading from each index.
	pins map[uint64]int
}

func newLogHolds() *logHolds { return &logHolds{pins: make(map[uint64]int)} }

// keep returns the first index to keep, or 0 when the log may be compacted
// freely.
func (h *logHolds) keep() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := h.open
	for idx := range h.pins {
		if k == 0 || idx < k {
			k = idx
		}
	}
	return k
}

// set records open, the smallest index in staged_entries as committed.
func (h *logHolds) set(open uint64) {
	h.mu.Lock()
	h.open = open
	h.mu.Unlock()
}

// lower keeps idx from now on, ahead of the commit that lists it in
// staged_entries: set, after the commit, gives the exact index again.
func (h *logHolds) lower(idx uint64) {
	h.mu.Lock()
	if h.open == 0 || idx < h.open {
		h.open = idx
	}
	h.mu.Unlock()
}

// pin keeps what is open now until the returned function is called: a
// snapshot reads those entries after the applier moved on.
func (h *logHolds) pin() func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	idx := h.open
	if idx == 0 {
		return func() {}
	}
	h.pins[idx]++
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.pins[idx]--; h.pins[idx] == 0 {
				delete(h.pins, idx)
			}
		})
	}
}

// refreshHolds sets the holds from staged_entries as the apply connection
// sees it, after a commit or restore that changed it.
func (f *fsm) refreshHolds(ctx context.Context) error {
	row, err := f.conn.QueryRow(ctx, "SELECT coalesce(min(idx), 0) FROM "+metaSchema+".staged_entries")
	if err != nil {
		return fmt.Errorf("read the staged entries' first log index: %w", err)
	}
	f.holds.set(row[0].(uint64))
	f.stagesTouched = false
	return nil
}
