package routing

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/duckraft/duckraft/wal"
)

// Staging a large transaction (replication/DESIGN.md, "Staging"): once an
// open transaction's appends hold more than StageBytes, its runs of appends
// are sent ahead of COMMIT as Stage entries of about StageBytes each, which
// every node appends to a staging table while the client goes on sending.
// COMMIT then carries, in place of each staged run's rows, a Staged entry
// that moves them into their table: the insert still commits atomically,
// no log entry holds more than about StageBytes of rows, and this node
// holds at most a few entries' worth of one transaction.

// DefaultStageBytes is Config.StageBytes when it is zero.
const DefaultStageBytes = 4 << 20

// stageTimeout bounds the proposal of one Stage entry.
const stageTimeout = time.Minute

// appendRun is a run of consecutive appends of a transaction to one table.
type appendRun struct {
	schema []string
	table  string
	// part is the run's stage part, once staged is set.
	part   uint32
	staged bool
	// sent counts the rows handed to the stager; chunks and bytes are the
	// appends not yet handed over.
	sent   uint64
	chunks []runChunk
	bytes  int
}

// runChunk is one encoded append of a run and its row count.
type runChunk struct {
	enc  []byte
	rows uint64
}

// txnItem is one write of a pending transaction: an entry, or a run of
// appends.
type txnItem struct {
	entry wal.Entry
	run   *appendRun
}

// pendingTxn is an open transaction's writes, in client order.
type pendingTxn struct {
	items []txnItem
	// buffered is the size of the appends held here and not staged.
	buffered int
	// stager sends the transaction's Stage entries once it stages; nil
	// before.
	stager *stager
	parts  uint32
}

// add appends a statement to the transaction.
func (t *pendingTxn) add(e wal.Entry) { t.items = append(t.items, txnItem{entry: e}) }

// addAppend appends an append of rows rows to the transaction; it joins
// the last run when that targets the same table.
func (t *pendingTxn) addAppend(a wal.Append, rows uint64) {
	schema := a.Path()
	t.buffered += len(a.Chunk)
	if n := len(t.items); n > 0 {
		if r := t.items[n-1].run; r != nil && r.table == a.Table && equalPath(r.schema, schema) {
			r.push(a.Chunk, rows)
			return
		}
	}
	r := &appendRun{schema: schema, table: a.Table}
	r.push(a.Chunk, rows)
	t.items = append(t.items, txnItem{run: r})
}

func (r *appendRun) push(chunk []byte, rows uint64) {
	r.chunks = append(r.chunks, runChunk{enc: chunk, rows: rows})
	r.bytes += len(chunk)
}

func equalPath(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// stager proposes one transaction's Stage entries in order, one at a time,
// while the client sends the next rows. Its queue holds one entry, so a
// transaction holds at most about three entries' worth of rows here: the
// one being filled, the one queued, the one in the log.
type stager struct {
	id    uint64
	queue chan wal.Stage
	done  chan struct{}
	end   sync.Once

	mu  sync.Mutex
	err error
}

func (e *Executor) startStager(st *sessionState) *stager {
	var b [8]byte
	rand.Read(b[:])
	s := &stager{id: binary.LittleEndian.Uint64(b[:]), queue: make(chan wal.Stage, 1), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for entry := range s.queue {
			if s.failed() != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), stageTimeout)
			_, err := e.write(ctx, st, newCommand([]wal.Entry{entry}))
			cancel()
			if err != nil {
				s.mu.Lock()
				s.err = fmt.Errorf("duckraft: staging the transaction's rows: %w", err)
				s.mu.Unlock()
			}
		}
	}()
	return s
}

func (s *stager) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// wait ends the stager and returns its first error once every queued entry
// is in the log.
func (s *stager) wait() error {
	s.end.Do(func() { close(s.queue) })
	<-s.done
	return s.failed()
}

// stageable reports whether every live data node applies staging entries:
// a build before them cannot decode them and would skip them.
func (e *Executor) stageable() bool {
	if e.cfg.StageBytes < 0 {
		return false
	}
	if e.cfg.Directory == nil {
		return true
	}
	peers := e.cfg.Directory.Peers()
	for _, p := range peers {
		if !p.Staging {
			return false
		}
	}
	return len(peers) > 0
}

// stageBytes is the size past which a transaction stages, and the size of
// its Stage entries.
func (e *Executor) stageBytes() int {
	if e.cfg.StageBytes == 0 {
		return DefaultStageBytes
	}
	return e.cfg.StageBytes
}

// appendToTxn adds an append to the session's open transaction, staging
// the transaction's rows once they exceed StageBytes. False if no
// transaction is open.
func (e *Executor) appendToTxn(st *sessionState, a wal.Append, rows uint64) (bool, error) {
	st.mu.Lock()
	t := st.txn
	if t == nil {
		st.mu.Unlock()
		return false, nil
	}
	t.addAppend(a, rows)
	limit := e.stageBytes()
	if t.buffered < limit || (t.stager == nil && !e.stageable()) {
		st.mu.Unlock()
		return true, nil
	}
	if t.stager == nil {
		t.stager = e.startStager(st)
	}
	entries := t.takeStages(limit, false)
	s := t.stager
	st.mu.Unlock()
	// Queuing blocks while the stager is busy: that is the back-pressure
	// that bounds what a transaction holds here.
	for _, entry := range entries {
		s.queue <- entry
	}
	return true, s.failed()
}

// takeStages turns the buffered appends of every run into Stage entries of
// about limit bytes each; all of them when final, else only full entries.
func (t *pendingTxn) takeStages(limit int, final bool) []wal.Stage {
	var out []wal.Stage
	for _, it := range t.items {
		r := it.run
		if r == nil || len(r.chunks) == 0 {
			continue
		}
		if !r.staged {
			r.part, r.staged = t.parts, true
			t.parts++
		}
		for len(r.chunks) > 0 && (final || r.bytes >= limit) {
			entry := wal.Stage{ID: t.stager.id, Part: r.part, Offset: r.sent}
			size := 0
			for len(r.chunks) > 0 && (len(entry.Chunks) == 0 || size+len(r.chunks[0].enc) <= limit) {
				c := r.chunks[0]
				entry.Chunks = append(entry.Chunks, c.enc)
				size += len(c.enc)
				r.sent += c.rows
				r.chunks = r.chunks[1:]
			}
			r.bytes -= size
			t.buffered -= size
			out = append(out, entry)
		}
	}
	return out
}

// commitEntries returns the transaction's entries for its COMMIT: staged
// runs become Staged entries once their last rows are in the log, others
// stay appends.
func (e *Executor) commitEntries(t *pendingTxn) ([]wal.Entry, error) {
	if t.stager != nil {
		for _, entry := range t.takeStages(e.stageBytes(), true) {
			t.stager.queue <- entry
		}
		if err := t.stager.wait(); err != nil {
			return nil, err
		}
	}
	var out []wal.Entry
	for _, it := range t.items {
		r := it.run
		switch {
		case r == nil:
			out = append(out, it.entry)
		case r.staged:
			s := wal.Staged{ID: t.stager.id, Part: r.part, Rows: r.sent, Schema: r.schema[len(r.schema)-1], Table: r.table}
			if len(r.schema) > 1 {
				s.Parents = r.schema[: len(r.schema)-1 : len(r.schema)-1]
			}
			out = append(out, s)
		default:
			for _, c := range r.chunks {
				a := wal.Append{Schema: r.schema[len(r.schema)-1], Table: r.table, Chunk: c.enc}
				if len(r.schema) > 1 {
					a.Parents = r.schema[: len(r.schema)-1 : len(r.schema)-1]
				}
				out = append(out, a)
			}
		}
	}
	return out, nil
}

// unstage drops what a transaction that will not commit staged: after a
// ROLLBACK, a failed COMMIT, or the end of its session. A COMMIT that did
// apply already dropped its stages, so this is safe whatever the outcome.
func (e *Executor) unstage(st *sessionState, t *pendingTxn) {
	if t == nil || t.stager == nil {
		return
	}
	t.stager.wait()
	ctx, cancel := context.WithTimeout(context.Background(), stageTimeout)
	defer cancel()
	if _, err := e.write(ctx, st, newCommand([]wal.Entry{wal.Unstage{ID: t.stager.id, IdleBefore: math.MaxInt64}})); err != nil {
		e.log.Warn("dropping a transaction's staged rows failed; the leader drops them once they have been idle for the stage timeout",
			"stage", fmt.Sprintf("%x", t.stager.id), "err", err)
	}
}
