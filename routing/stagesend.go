package routing

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/duckraft/duckraft/node/sqltext"
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
// appends. A statement's entry comes with the statement as the client's
// text was lexed, for the leader (writer.write).
type txnItem struct {
	entry wal.Entry
	lexed sqltext.Statement
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

// add appends an entry to the transaction.
func (t *pendingTxn) add(e wal.Entry) { t.items = append(t.items, txnItem{entry: e}) }

// addStatement appends a client's statement to the transaction.
func (t *pendingTxn) addStatement(stmt sqltext.Statement) {
	t.items = append(t.items, txnItem{entry: wal.Statement{SQL: stmt.Text}, lexed: stmt})
}

// addAppend appends an append of rows rows to the transaction; it joins
// the last run when that targets the same table.
func (t *pendingTxn) addAppend(a wal.Append, rows uint64) {
	schema := a.Path()
	t.buffered += len(a.Chunk)
	if n := len(t.items); n > 0 {
		if r := t.items[n-1].run; r != nil && r.table == a.Table && slices.Equal(r.schema, schema) {
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

// stager proposes one transaction's Stage entries in order while the
// client sends the next rows. Its queue holds one entry, so a transaction
// holds a bounded number of entries' worth of rows here: the one being
// filled, the one queued, and those in flight (one, or stagePipeline on the
// leader).
type stager struct {
	id    uint64
	queue chan wal.Stage
	// stop ends the stager once what is queued is sent; done closes
	// when it has.
	stop chan struct{}
	done chan struct{}
	end  sync.Once

	mu  sync.Mutex
	err error
}

// errStagerStopped fails an append or COMMIT of a transaction whose
// session ended meanwhile.
var errStagerStopped = errors.New("duckraft: the transaction ended with its session")

// stagePipeline is how many Stage entries of one transaction may be in
// flight at once when this node leads: raft writes and replicates one
// while the FSM applies the one before.
const stagePipeline = 3

// submitter is the part of replication.Store that queues a command and
// returns, so that commands submitted in turn enter the log in that order.
type submitter interface {
	Submit(ctx context.Context, cmd wal.Command) (func(context.Context) (*wal.Result, error), error)
}

// submitted is a Stage entry queued on this node, leader, and its wait.
type submitted struct {
	cmd  wal.Command
	wait func(context.Context) (*wal.Result, error)
}

// startStager starts the stager of st's transaction, which sends through w.
func startStager(w *writer, st *sessionState) *stager {
	var b [8]byte
	rand.Read(b[:])
	s := &stager{id: binary.LittleEndian.Uint64(b[:]), queue: make(chan wal.Stage, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.run(w, st)
	return s
}

// run sends the queued entries in order until the stager is stopped and
// its queue is empty: on the leader up to stagePipeline at once, through
// another node one at a time, since concurrent requests could reach the
// leader out of order.
func (s *stager) run(w *writer, st *sessionState) {
	defer close(s.done)
	var inflight []submitted
	settleAll := func() {
		for _, p := range inflight {
			s.settle(w, st, p)
		}
		inflight = nil
	}
	defer settleAll()
	for {
		entry, ok := s.next()
		if !ok {
			return
		}
		if s.failed() != nil {
			continue
		}
		cmd := newCommand([]wal.Entry{entry})
		if sub, ok := w.store.(submitter); ok && w.store.IsLeader() {
			cmd.Timestamp = w.now().UnixMicro()
			ctx, cancel := context.WithTimeout(context.Background(), stageTimeout)
			wait, err := sub.Submit(ctx, cmd)
			cancel()
			if err == nil {
				inflight = append(inflight, submitted{cmd: cmd, wait: wait})
				if len(inflight) >= stagePipeline {
					s.settle(w, st, inflight[0])
					inflight = inflight[1:]
				}
				continue
			}
		}
		settleAll()
		s.send(w, st, cmd)
	}
}

// next returns the next queued entry; false once the stager is stopped
// and nothing is queued.
func (s *stager) next() (wal.Stage, bool) {
	select {
	case entry := <-s.queue:
		return entry, true
	case <-s.stop:
	}
	select {
	case entry := <-s.queue:
		return entry, true
	default:
		return wal.Stage{}, false
	}
}

// put queues an entry, waiting while the queue is full: the back-pressure
// on the client. False once the stager was stopped (its session ended).
func (s *stager) put(entry wal.Stage) bool {
	select {
	case s.queue <- entry:
		return true
	case <-s.stop:
		return false
	}
}

// settle waits for a submitted entry. If its outcome is unknown (the leader
// changed), it is sent again with the same key, which applies it once;
// entries behind it are settled after it, in order, so that every Stage
// still continues the one before.
func (s *stager) settle(w *writer, st *sessionState, p submitted) {
	ctx, cancel := context.WithTimeout(context.Background(), stageTimeout)
	defer cancel()
	res, err := p.wait(ctx)
	switch {
	case err == nil:
		st.wrote(res.Index)
	case retryableWrite(err) && s.failed() == nil:
		s.send(w, st, p.cmd)
	default:
		s.fail(err)
	}
}

// send writes one entry through the leader and waits for it.
func (s *stager) send(w *writer, st *sessionState, cmd wal.Command) {
	if s.failed() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stageTimeout)
	defer cancel()
	if _, err := w.write(ctx, st, cmd, nil); err != nil {
		s.fail(err)
	}
}

func (s *stager) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = fmt.Errorf("duckraft: staging the transaction's rows: %w", err)
	}
	s.mu.Unlock()
}

func (s *stager) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// wait ends the stager and returns its first error once every queued entry
// is in the log.
func (s *stager) wait() error {
	s.end.Do(func() { close(s.stop) })
	<-s.done
	return s.failed()
}

// stageable reports whether every live data node applies staging entries:
// a build before them cannot decode them and would skip them.
func (ts *txns) stageable() bool {
	if ts.stageSize < 0 {
		return false
	}
	if ts.dir == nil {
		return true
	}
	peers := ts.dir.Peers()
	for _, p := range peers {
		if !p.Staging {
			return false
		}
	}
	return len(peers) > 0
}

// stageBytes is the size past which a transaction stages, and the size of
// its Stage entries.
func (ts *txns) stageBytes() int {
	if ts.stageSize == 0 {
		return DefaultStageBytes
	}
	return ts.stageSize
}

// appendToTxn adds an append to the session's open transaction, staging
// the transaction's rows once they exceed StageBytes. False if no
// transaction is open.
func (ts *txns) appendToTxn(st *sessionState, a wal.Append, rows uint64) (bool, error) {
	st.mu.Lock()
	t := st.txn
	if t == nil {
		st.mu.Unlock()
		return false, nil
	}
	t.addAppend(a, rows)
	limit := ts.stageBytes()
	if t.buffered < limit || (t.stager == nil && !ts.stageable()) {
		st.mu.Unlock()
		return true, nil
	}
	if t.stager == nil {
		t.stager = startStager(ts.writes, st)
	}
	entries := t.takeStages(limit, false)
	s := t.stager
	st.mu.Unlock()
	// Queuing blocks while the stager is busy: that is the back-pressure
	// that bounds what a transaction holds here.
	for _, entry := range entries {
		if !s.put(entry) {
			return true, errStagerStopped
		}
	}
	return true, s.failed()
}

// takeStages turns the buffered appends of every run into Stage entries of
// about limit bytes each: all of them when final, else those of the runs
// that no append can join any more (all but the last item) and the full
// entries of the last, so that what stays buffered is less than limit
// however the appends alternate between tables.
func (t *pendingTxn) takeStages(limit int, final bool) []wal.Stage {
	var out []wal.Stage
	for i, it := range t.items {
		r := it.run
		if r == nil || len(r.chunks) == 0 {
			continue
		}
		if !r.staged {
			r.part, r.staged = t.parts, true
			t.parts++
		}
		closed := final || i < len(t.items)-1
		for len(r.chunks) > 0 && (closed || r.bytes >= limit) {
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
// stay appends. lexed holds its statements as they were lexed, in order
// (writer.write).
func (ts *txns) commitEntries(t *pendingTxn) (entries []wal.Entry, lexed []sqltext.Statement, err error) {
	if t.stager != nil {
		for _, entry := range t.takeStages(ts.stageBytes(), true) {
			if !t.stager.put(entry) {
				return nil, nil, errStagerStopped
			}
		}
		if err := t.stager.wait(); err != nil {
			return nil, nil, err
		}
	}
	for _, it := range t.items {
		r := it.run
		switch {
		case r == nil:
			entries = append(entries, it.entry)
			if _, ok := it.entry.(wal.Statement); ok {
				lexed = append(lexed, it.lexed)
			}
		case r.staged:
			schema, parents := splitSchemaPath(r.schema)
			entries = append(entries, wal.Staged{ID: t.stager.id, Part: r.part, Rows: r.sent, Schema: schema, Parents: parents, Table: r.table})
		default:
			schema, parents := splitSchemaPath(r.schema)
			for _, c := range r.chunks {
				entries = append(entries, wal.Append{Schema: schema, Parents: parents, Table: r.table, Chunk: c.enc})
			}
		}
	}
	return entries, lexed, nil
}

// unstage drops what a transaction that will not commit staged: after a
// ROLLBACK, a failed COMMIT, or the end of its session. A COMMIT that did
// apply already dropped its stages, so this is safe whatever the outcome.
func (ts *txns) unstage(st *sessionState, t *pendingTxn) {
	if t == nil || t.stager == nil {
		return
	}
	t.stager.wait()
	ctx, cancel := context.WithTimeout(context.Background(), stageTimeout)
	defer cancel()
	if _, err := ts.writes.write(ctx, st, newCommand([]wal.Entry{wal.Unstage{ID: t.stager.id, IdleBefore: math.MaxInt64}}), nil); err != nil {
		ts.log.Warn("dropping a transaction's staged rows failed; the leader drops them once they have been idle for the stage timeout",
			"stage", fmt.Sprintf("%x", t.stager.id), "err", err)
	}
}
