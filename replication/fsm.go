package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/wal"
)

// metaSchema holds the FSM's own tables: the applied index and the
// idempotency keys. Snapshots carry it; clients should not write to it.
const metaSchema = "_duckraft"

var metaDDL = []string{
	`CREATE SCHEMA IF NOT EXISTS ` + metaSchema,
	`CREATE TABLE IF NOT EXISTS ` + metaSchema + `.applied(id INTEGER PRIMARY KEY, idx UBIGINT NOT NULL)`,
	`INSERT INTO ` + metaSchema + `.applied VALUES (1, 0) ON CONFLICT DO NOTHING`,
	`CREATE TABLE IF NOT EXISTS ` + metaSchema + `.keys(key VARCHAR NOT NULL, idx UBIGINT NOT NULL, ts BIGINT NOT NULL,
		changed BIGINT NOT NULL, err_type VARCHAR, err_msg VARCHAR, result BLOB)`,
	// Lookups are served from memory (keyCache); an index would only slow
	// down every insert.
	`DROP INDEX IF EXISTS ` + metaSchema + `.keys_key`,
	stagesDDL,
	stagedEntriesDDL,
}

// Backoff between the attempts of a batch that failed for a node-local
// reason (out of memory, I/O): it is retried until it applies, since
// skipping it would diverge, and the node reports the stall meanwhile.
const (
	retryFirst = 100 * time.Millisecond
	retryMax   = 5 * time.Second
)

// ErrReadYielded is the cause of a client's statement that the node
// interrupted because applying the replicated log needed its memory.
var ErrReadYielded = errors.New("this node interrupted the statement: applying replicated writes needed the memory it used; " +
	"run it again, smaller or on another node")

// fsm applies committed wal batches to DuckDB, exactly once: each ApplyBatch
// is one DuckDB transaction that also stores the last applied index, and
// entries at or below the stored index are skipped.
type fsm struct {
	db        *engine.DB
	conn      *engine.Conn // used only on raft's FSM goroutine
	log       *slog.Logger
	keyWindow uint64
	keys      *keyCache // used only on raft's FSM goroutine
	serial    *serialThreads
	// shapes are the apply connection's prepared INSERT shapes
	// (shapes.go); literalOnly is set while a command that failed on the
	// prepared path is applied again as literal text.
	shapes      *shapeCache
	literalOnly bool
	// keyWriter writes each batch's key records and applied index
	// (keys.go).
	keyWriter *keyWriter
	// pins fix the settings of every connection that reads or writes
	// replicated state (pin.go).
	pins settingPins
	// observeSnapshot is Config.ObserveSnapshot; nil tells nobody.
	observeSnapshot func(time.Duration, int64, error)
	// onHalt is Config.OnHalt; nil tells nobody.
	onHalt func(error)
	// stageLog is the Raft log that staged parts' rows are read back from
	// (stagelog.go), set by the store before raft starts; holds is what of
	// it raft must keep for them. stagesTouched says an apply changed
	// staged_entries since holds was last set from it.
	stageLog      raft.LogStore
	holds         *logHolds
	stagesTouched bool

	applied atomic.Uint64
	// progress counts the applier's steps: each applied index, and each
	// staged entry whose rows a COMMIT inserted (awaitOutcome).
	progress atomic.Uint64
	// covered, once the store sets it, reports that the newest snapshot
	// already covers every entry raft applied (see Snapshot).
	covered func() bool
	// compress, once the store sets it, reports whether snapshots may
	// compress their frames (Config.ReadsCompressedSnapshots); nil always
	// compresses.
	compress func() bool

	// applyMu is held while an entry is applied or a snapshot restored,
	// so that a backup can pin its view between two entries from outside
	// raft's FSM goroutine (pinBackup).
	applyMu sync.Mutex

	// closing ends the retries of a stalled batch when the store closes.
	closing chan struct{}

	mu      sync.Mutex
	changed chan struct{} // closed when applied moves or the FSM halts
	halted  error
	stall   Stall // guarded by mu; zero while the applier keeps up
}

// Stall describes a batch the applier keeps failing to apply for a
// node-local reason, and retries.
type Stall struct {
	// First is the first log index of the batch, Since when its first
	// attempt failed, Attempts how many have failed, Err the last error.
	First    uint64
	Since    time.Time
	Attempts int
	Err      error
}

func newFSM(db *engine.DB, keyWindow uint64, log *slog.Logger) (*fsm, error) {
	conn, err := db.Connect()
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	serial, err := newSerialThreads(db, log)
	if err != nil {
		conn.Close()
		return nil, err
	}
	f := &fsm{db: db, conn: conn, log: log, keyWindow: keyWindow, keys: newKeyCache(keyWindow), serial: serial,
		shapes: newShapeCache(conn, maxShapes), keyWriter: newKeyWriter(conn), holds: newLogHolds(), changed: make(chan struct{}), closing: make(chan struct{})}
	if f.pins, err = readPins(conn); err != nil {
		f.close()
		return nil, err
	}
	if err := f.pins.apply(serial.conn); err != nil {
		f.close()
		return nil, err
	}
	if err := f.init(); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

// init creates the metadata tables if needed and loads the applied index.
func (f *fsm) init() error {
	ctx := context.Background()
	if err := f.inTxn(func() error {
		for _, ddl := range metaDDL {
			if _, err := f.conn.Exec(ctx, ddl); err != nil {
				return fmt.Errorf("create metadata: %w", err)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	idx, err := readApplied(f.conn)
	if err != nil {
		return err
	}
	if err := f.keys.load(f.conn, idx); err != nil {
		return err
	}
	if err := f.refreshHolds(ctx); err != nil {
		return err
	}
	f.applied.Store(idx)
	return nil
}

// inTxn runs fn in a DuckDB transaction on the apply connection.
func (f *fsm) inTxn(fn func() error) error {
	ctx := context.Background()
	if err := f.conn.Begin(ctx); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(); err != nil {
		f.rollback()
		return err
	}
	if err := f.conn.Commit(ctx); err != nil {
		f.rollback()
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (f *fsm) rollback() {
	// A rollback may undo DDL that shapes were prepared against.
	f.shapes.reset()
	if !f.conn.InTransaction() {
		return
	}
	if err := f.conn.Rollback(context.Background()); err != nil {
		f.log.Error("rollback failed", "err", err)
	}
}

// readApplied reads the applied index in conn's current transaction. Each
// batch leaves its last index as the largest in the keys table, in a key
// record or a marker row (keyWriter.store); the applied table holds the
// index of a restored snapshot.
func readApplied(conn *engine.Conn) (uint64, error) {
	row, err := conn.QueryRow(context.Background(), AppliedQuery)
	if err != nil {
		return 0, fmt.Errorf("read applied index: %w", err)
	}
	return row[0].(uint64), nil
}

// Applied returns the last log index whose effects are committed in DuckDB.
func (f *fsm) Applied() uint64 { return f.applied.Load() }

func (f *fsm) setApplied(idx uint64) {
	f.applied.Store(idx)
	f.progress.Add(1)
	f.mu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// watch returns a channel closed at the next change of the applied index,
// and the halt error if the FSM stopped.
func (f *fsm) watch() (<-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed, f.halted
}

// halt stops the FSM for good: applying later entries on top of a batch that
// could not be applied would diverge from the other nodes. A restart replays
// from the last committed batch (the daemon restarts itself, onHalt).
func (f *fsm) halt(err error) {
	f.log.Error("FSM halted; the node must restart to replay the log", "err", err)
	f.mu.Lock()
	f.halted = err
	f.stall = Stall{}
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	if f.onHalt != nil {
		f.onHalt(err)
	}
}

// stalled returns the batch the applier is retrying, if any.
func (f *fsm) stalled() (Stall, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stall, f.stall.Attempts > 0
}

func (f *fsm) setStall(st Stall) {
	f.mu.Lock()
	f.stall = st
	f.mu.Unlock()
}

func (f *fsm) haltErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.halted
}

// entryResult is the ApplyFuture response of a LogCommand entry: one result
// per command of its batch.
type entryResult struct {
	results []cmdResult
}

type cmdResult struct {
	res *wal.Result
	err error
}

// pending is one command of a batch being applied.
type pending struct {
	index uint64
	cmd   wal.Command
	out   *cmdResult
	// texts are the command's statements, lexed once for every attempt
	// to apply them (lexEntry).
	texts []sqltext.Statement
	// insert is set when the command may join a merged run of INSERTs.
	insert *plainInsert
	// literal is set once the command failed on the prepared path: it is
	// applied as literal text from then on (shapes.go).
	literal bool
}

// lexEntry lexes the statements of a command's entry: for a Statement its
// own, for a Txn one per entry (the zero Statement for an entry that is no
// statement).
func lexEntry(e wal.Entry) []sqltext.Statement {
	switch e := e.(type) {
	case wal.Statement:
		return []sqltext.Statement{sqltext.Parse(e.SQL)}
	case wal.Txn:
		out := make([]sqltext.Statement, len(e.Entries))
		for i, sub := range e.Entries {
			if st, ok := sub.(wal.Statement); ok {
				out[i] = sqltext.Parse(st.SQL)
			}
		}
		return out
	}
	return nil
}

// statement returns the statement at i of p's texts (as lexEntry numbers
// them), whose text is sql, lexing it if p's texts do not hold it.
func (p pending) statement(i int, sql string) sqltext.Statement { return lexedAt(p.texts, i, sql) }

// lexedAt returns texts[i] if it is sql lexed, else sql lexed now.
func lexedAt(texts []sqltext.Statement, i int, sql string) sqltext.Statement {
	if i < len(texts) && texts[i].Text == sql {
		return texts[i]
	}
	return sqltext.Parse(sql)
}

// Apply implements raft.FSM.
func (f *fsm) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch implements raft.BatchingFSM. Entries at or below the applied
// index are skipped; each command entry above it is applied in one DuckDB
// transaction together with the new applied index (entries raft passes
// without commands join the next transaction).
//
// One transaction per entry, not per ApplyBatch call, because raft groups
// entries into calls differently on each node, and a failing command re-runs
// the commands of its transaction: sequences are not transactional in
// DuckDB, so a re-run that reached across entries would consume nextval
// values on one node and not on another. Entries already carry the
// commands proposed together, so this costs few commits.
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	resps := make([]any, len(logs))
	if err := f.haltErr(); err != nil {
		for i := range resps {
			resps[i] = haltedOutcome(err)
		}
		return resps
	}
	applied := f.applied.Load()
	last := applied
	var work []pending
	flush := func() bool {
		if last == applied {
			return true
		}
		if err := f.applyWork(work, applied, last); err != nil {
			f.halt(err)
			for i, l := range logs {
				if l.Index > applied {
					resps[i] = haltedOutcome(err)
				}
			}
			return false
		}
		f.setApplied(last)
		applied, work = last, nil
		return true
	}
	for i, l := range logs {
		if l.Index <= applied {
			resps[i] = fmt.Errorf("entry %d: %w", l.Index, errAlreadyApplied)
			continue
		}
		last = l.Index
		if l.Type != raft.LogCommand {
			continue
		}
		b, err := wal.Decode(l.Data)
		if err != nil {
			resps[i] = fmt.Errorf("apply entry %d: %w", l.Index, err)
			continue
		}
		out := &entryResult{results: make([]cmdResult, len(b.Commands))}
		resps[i] = out
		for j, c := range b.Commands {
			work = append(work, pending{index: l.Index, cmd: c, out: &out.results[j]})
		}
		if !flush() {
			return resps
		}
	}
	flush()
	return resps
}

// haltedOutcome is the answer to a committed entry the halted FSM did not
// apply: it is in the log, and applies when the node has restarted, so its
// writer must not be told it failed.
func haltedOutcome(err error) error {
	return fmt.Errorf("%w: %w: %w", ErrUnknownOutcome, ErrHalted, err)
}

// errTxnBroken means a statement ended the batch transaction. The guard in
// checkStatement should make it impossible; if it happens the batch may be
// partly committed, so the FSM must not retry.
var errTxnBroken = errors.New("a statement ended the apply transaction")

// applyWork applies work and records last as the applied index, in one
// transaction. DuckDB has no savepoints, so when a command fails
// deterministically the transaction is rolled back and the batch re-applied
// without it; the failure becomes that command's result on every node.
func (f *fsm) applyWork(work []pending, prev, last uint64) error {
	for i := range work {
		work[i].texts = lexEntry(work[i].cmd.Entry)
	}
	if serialApply(work) {
		if err := f.serial.acquire(); err != nil {
			return err
		}
		defer f.serial.release()
	}
	parseInserts(work)
	failed := make(map[int]error)
	alone := make(map[int]bool)
	var stall Stall
	defer func() {
		if stall.Attempts > 0 {
			f.setStall(Stall{})
			f.db.ReleaseClients()
		}
	}()
	for {
		added := newKeyCache(f.keyWindow)
		at, err := f.tryApply(work, failed, alone, added, prev, last)
		if err == nil && f.stagesTouched {
			// Until it is set, holds keeps at least what is committed.
			if err := f.refreshHolds(context.Background()); err != nil {
				f.log.Warn("staged entries: keeping the log from the first entry applied", "err", err)
			}
		}
		if err == nil {
			for _, r := range added.order {
				f.keys.add(r)
			}
			f.keys.evict(last)
			if stall.Attempts > 0 {
				f.log.Info("apply recovered", "first", prev+1, "last", last, "attempts", stall.Attempts+1, "stalled", time.Since(stall.Since))
			}
			return nil
		}
		f.rollback()
		var re *runError
		switch {
		case at >= 0 && errors.Is(err, errPrepared):
			// The literal text decides what the command does.
			work[at].literal = true
			continue
		case errors.As(err, &re) && !nodeLocal(re.err):
			for i := re.first; i < re.first+re.n; i++ {
				alone[i] = true
			}
			continue
		case at >= 0 && !nodeLocal(err):
			failed[at] = err
			continue
		case unrecoverable(err):
			return fmt.Errorf("apply entries %d..%d: %w", prev+1, last, err)
		}
		if stall.Attempts == 0 {
			stall = Stall{First: prev + 1, Since: time.Now()}
		}
		stall.Attempts++
		stall.Err = err
		f.setStall(stall)
		if engine.ExceptionType(err) == "Out of Memory" {
			// Clients' reads share DuckDB's memory limit with the
			// applier; they yield (fail with ErrReadYielded, and new
			// ones too until the batch applies) so that the log applies.
			if n := f.db.InterruptClients(ErrReadYielded); n > 0 {
				f.log.Warn("interrupted client statements to free memory for the applier", "statements", n)
			}
		}
		wait := min(retryMax, retryFirst<<min(stall.Attempts-1, 10))
		if stall.Attempts <= 3 || stall.Attempts%20 == 0 {
			f.log.Warn("apply failed for a node-local reason, retrying", "first", prev+1, "last", last,
				"attempt", stall.Attempts, "retry_in", wait, "err", err)
		}
		select {
		case <-time.After(wait):
		case <-f.closing:
			return fmt.Errorf("apply entries %d..%d: %w (the store closed while retrying: %w)", prev+1, last, ErrClosed, err)
		}
	}
}

// unrecoverable reports whether err leaves the apply connection or the
// database unusable in this process: a statement that ended the batch
// transaction, or a DuckDB error after which DuckDB invalidates the
// database (FATAL, INTERNAL) or found it corrupt. Retrying cannot help;
// the FSM halts and the node restarts (Config.OnHalt).
func unrecoverable(err error) bool {
	if errors.Is(err, errTxnBroken) || errors.Is(err, ErrClosed) {
		return true
	}
	switch engine.ExceptionType(err) {
	case "FATAL", "INTERNAL", "Data Corruption":
		return true
	}
	return strings.Contains(err.Error(), "database has been invalidated")
}

// serialApply reports whether work holds a statement that reads rows while
// it writes (sqltext.Statement.ReadsRows: INSERT … SELECT, UPDATE, DELETE,
// MERGE, CREATE TABLE … AS, ALTER TABLE). DuckDB runs those on several
// threads, and then the order in which nextval hands out values or a
// floating-point sum adds up differs from node to node.
func serialApply(work []pending) bool {
	for _, p := range work {
		entries := []wal.Entry{p.cmd.Entry}
		if txn, ok := p.cmd.Entry.(wal.Txn); ok {
			entries = txn.Entries
		}
		for i, e := range entries {
			if st, ok := e.(wal.Statement); ok && p.statement(i, st.SQL).ReadsRows() {
				return true
			}
		}
	}
	return false
}

// tryApply runs one attempt. Keys applied by it go to added, which the
// caller merges into the cache once the attempt committed. On a command's
// failure it returns the command's position in work; on the failure of a
// merged run of INSERTs a *runError, after which the caller applies the
// run's commands alone; on any other failure -1.
func (f *fsm) tryApply(work []pending, failed map[int]error, alone map[int]bool, added *keyCache, prev, last uint64) (int, error) {
	ctx := context.Background()
	if err := f.conn.Begin(ctx); err != nil {
		return -1, fmt.Errorf("begin: %w", err)
	}
	skip := func(k int) bool {
		if _, ok := failed[k]; ok || alone[k] {
			return true
		}
		key := work[k].cmd.Key
		return len(key) > 0 && (added.lookup(key, work[k].index) != nil || f.keys.lookup(key, work[k].index) != nil)
	}
	for k := 0; k < len(work); k++ {
		p := work[k]
		if run, ok := nextRun(work, k, skip); ok {
			if err := f.applyRun(ctx, run, work, added); err != nil {
				return -1, err
			}
			k += run.n - 1
			continue
		}
		if len(p.cmd.Key) > 0 {
			first := added.lookup(p.cmd.Key, p.index)
			if first == nil {
				first = f.keys.lookup(p.cmd.Key, p.index)
			}
			if first != nil {
				r, err := first.replay()
				if err != nil {
					return -1, fmt.Errorf("replay idempotency key: %w", err)
				}
				*p.out = r
				continue
			}
		}
		res := &wal.Result{Index: p.index}
		err, ok := failed[k]
		if !ok {
			f.literalOnly = p.literal
			err = f.applyEntry(ctx, p.cmd.Entry, p.texts, p.cmd.Timestamp, res)
			f.literalOnly = false
			if err != nil {
				if nodeLocal(err) || !f.conn.InTransaction() {
					return -1, fmt.Errorf("entry %d: %w", p.index, err)
				}
				return k, err
			}
		}
		if err != nil {
			err = validUTF8(err)
			*p.out = cmdResult{err: fmt.Errorf("entry %d: %w", p.index, err)}
		} else {
			*p.out = cmdResult{res: res}
		}
		if len(p.cmd.Key) > 0 {
			r, err := newKeyRecord(p.cmd.Key, p.index, p.cmd.Timestamp, res, err)
			if err != nil {
				return -1, fmt.Errorf("record idempotency key: %w", err)
			}
			added.add(&r)
		}
	}
	if err := f.keyWriter.store(added.order, last); err != nil {
		return -1, err
	}
	if f.keyWindow > 0 && last/pruneEvery > prev/pruneEvery && last > f.keyWindow {
		// Lookups only see keys inside the window, so when pruning runs
		// does not affect results.
		if _, err := f.conn.Exec(ctx, "DELETE FROM "+metaSchema+".keys WHERE idx < ?", last-f.keyWindow); err != nil {
			return -1, fmt.Errorf("prune keys: %w", err)
		}
	}
	if err := f.conn.Commit(ctx); err != nil {
		return -1, fmt.Errorf("commit: %w", err)
	}
	return -1, nil
}

// pruneEvery is how many log indexes pass between prunes of old keys.
const pruneEvery = 1024

// applyEntry applies one entry of a command stamped ts, adding its effects
// to res. texts are its statements as lexEntry lexes them.
func (f *fsm) applyEntry(ctx context.Context, e wal.Entry, texts []sqltext.Statement, ts int64, res *wal.Result) error {
	switch e := e.(type) {
	case wal.Statement:
		text := lexedAt(texts, 0, e.SQL)
		if !keepsCatalog(text) {
			f.shapes.reset()
		}
		return f.applyStatement(ctx, e, text, res)
	case wal.Append:
		// An append names its schema as data, which checkStatement never
		// sees; DuckDB finds schemas whatever the case of their names.
		if strings.EqualFold(e.Path()[0], metaSchema) {
			return fmt.Errorf("%w: schema %s holds the applier's own bookkeeping (applied index, idempotency keys); "+
				"an append may not write to it", ErrRefused, metaSchema)
		}
		c, err := wire.DecodeDataChunk(wire.NewReader(e.Chunk), wire.Limits{})
		if err != nil {
			return fmt.Errorf("append to %s.%s: decode chunk: %w", strings.Join(e.Path(), "."), e.Table, err)
		}
		if err := f.conn.AppendPath(e.Path(), e.Table, c); err != nil {
			return err
		}
		res.RowsChanged += int64(c.Rows)
	case wal.Txn:
		for i, sub := range e.Entries {
			var text []sqltext.Statement
			if i < len(texts) {
				text = texts[i : i+1]
			}
			if err := f.applyEntry(ctx, sub, text, ts, res); err != nil {
				return fmt.Errorf("txn entry %d: %w", i, err)
			}
		}
	case wal.Stage:
		f.shapes.reset()
		return f.applyStage(ctx, e, res.Index, ts, res)
	case wal.Staged:
		f.shapes.reset()
		return f.applyStaged(ctx, e, res)
	case wal.Unstage:
		f.shapes.reset()
		return f.applyUnstage(ctx, e)
	case wal.NoOp:
	}
	return nil
}

// applyStatement applies s, whose text is lexed as text.
func (f *fsm) applyStatement(ctx context.Context, s wal.Statement, text sqltext.Statement, res *wal.Result) error {
	if err := checkStatement(text); err != nil {
		return err
	}
	if !f.literalOnly {
		n, ok, err := f.shapes.run(ctx, s, text)
		switch {
		case !ok:
		case err != nil:
			return err
		case !f.conn.InTransaction():
			return errTxnBroken
		case s.Returning:
			return setCount(res, n)
		default:
			res.RowsChanged += n
			return nil
		}
	}
	if !s.Returning {
		args := make([]any, len(s.Params))
		for i, p := range s.Params {
			args[i] = p.Value()
		}
		n, err := f.conn.Exec(ctx, s.SQL, args...)
		if err != nil {
			return err
		}
		if !f.conn.InTransaction() {
			return errTxnBroken
		}
		res.RowsChanged += n
		return nil
	}
	if done, err := f.applyCounted(ctx, s, text, res); done {
		return err
	}
	sql, err := inlineParams(text, s.Params)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	rows, err := f.conn.Query(ctx, sql)
	if err != nil {
		return err
	}
	defer rows.Close()
	res.Columns, res.Types, res.Chunks = rows.Names(), rows.Types(), nil
	var returned int64
	for {
		c, err := rows.Next()
		if err != nil {
			return err
		}
		if c == nil {
			break
		}
		enc, err := wire.AppendDataChunk(nil, c, wire.Q3)
		if err != nil {
			return fmt.Errorf("encode returned rows: %w", err)
		}
		res.Chunks = append(res.Chunks, enc)
		returned += int64(c.Rows)
	}
	switch rows.StatementType() {
	case engine.StatementInsert, engine.StatementUpdate, engine.StatementDelete, engine.StatementMergeInto:
		// DML with RETURNING reports its changes as the rows it returns.
		res.RowsChanged += max(rows.RowsChanged(), returned)
	}
	if !f.conn.InTransaction() {
		return errTxnBroken
	}
	return nil
}

// applyCounted runs an INSERT, UPDATE or DELETE without RETURNING whose
// result is wanted. DuckDB answers those with one BIGINT "Count" row equal to
// the rows changed, so the statement runs like a plain Exec and the row is
// built here, without streaming and re-encoding a result. done is false for
// other statements, which the caller runs as a query.
func (f *fsm) applyCounted(ctx context.Context, s wal.Statement, text sqltext.Statement, res *wal.Result) (done bool, err error) {
	switch firstKeyword(text) {
	case "INSERT", "UPDATE", "DELETE":
	default:
		return false, nil
	}
	if hasWord(text, "RETURNING") {
		return false, nil
	}
	st, err := f.conn.Prepare(s.SQL)
	if err != nil {
		return true, err
	}
	defer st.Close()
	switch st.StatementType() {
	case engine.StatementInsert, engine.StatementUpdate, engine.StatementDelete:
	default:
		return false, nil
	}
	if names := st.Names(); len(names) != 1 || names[0] != "Count" {
		return false, nil
	}
	args := make([]any, len(s.Params))
	for i, p := range s.Params {
		args[i] = p.Value()
	}
	n, err := st.Exec(ctx, args...)
	if err != nil {
		return true, err
	}
	if !f.conn.InTransaction() {
		return true, errTxnBroken
	}
	return true, setCount(res, n)
}

// setCount makes res DuckDB's answer to a DML statement without RETURNING:
// one BIGINT "Count" row holding the rows changed.
func setCount(res *wal.Result, n int64) error {
	count, err := wire.NewVector(countType, []any{n})
	if err != nil {
		return fmt.Errorf("encode count: %w", err)
	}
	enc, err := wire.AppendDataChunk(nil, &wire.DataChunk{Rows: 1, Columns: []*wire.Vector{count}}, wire.Q3)
	if err != nil {
		return fmt.Errorf("encode count: %w", err)
	}
	res.Columns, res.Types, res.Chunks = []string{"Count"}, []wire.LogicalType{countType}, [][]byte{enc}
	res.RowsChanged += n
	return nil
}

// runError is the failure of a merged run of INSERTs.
type runError struct {
	first, n int
	err      error
}

func (e *runError) Error() string { return fmt.Sprintf("merged insert: %v", e.err) }
func (e *runError) Unwrap() error { return e.err }

// applyRun applies a run of INSERTs as one statement and gives each command
// its own result, as if it had run alone.
func (f *fsm) applyRun(ctx context.Context, run insertRun, work []pending, added *keyCache) error {
	n, err := f.execRun(ctx, run)
	if err == nil && !f.conn.InTransaction() {
		return fmt.Errorf("entry %d: %w", work[run.first].index, errTxnBroken)
	}
	var want int64
	for _, r := range run.rows {
		want += r
	}
	if err == nil && n != want {
		err = fmt.Errorf("changed %d rows, expected %d", n, want)
	}
	if err != nil {
		return &runError{first: run.first, n: run.n, err: err}
	}
	for i, rows := range run.rows {
		p := work[run.first+i]
		res := &wal.Result{Index: p.index}
		if p.cmd.Entry.(wal.Statement).Returning {
			if err := setCount(res, rows); err != nil {
				return err
			}
		} else {
			res.RowsChanged = rows
		}
		*p.out = cmdResult{res: res}
		if len(p.cmd.Key) > 0 {
			r, err := newKeyRecord(p.cmd.Key, p.index, p.cmd.Timestamp, res, nil)
			if err != nil {
				return fmt.Errorf("record idempotency key: %w", err)
			}
			added.add(&r)
		}
	}
	return nil
}

// execRun runs a merged INSERT through its prepared shape where it has one
// (shapes.go), else as literal text. A failure on the prepared path fails
// the run, whose commands are then applied alone, each through its own
// shape or text, so the literal text still decides every error a client
// sees and a node records.
func (f *fsm) execRun(ctx context.Context, run insertRun) (int64, error) {
	if n, ok, err := f.shapes.run(ctx, wal.Statement{SQL: run.sql}, sqltext.Parse(run.sql)); ok {
		return n, err
	}
	return f.conn.Exec(ctx, run.sql)
}

// countType is the type of DuckDB's "Count" result column.
var countType = wire.LogicalType{ID: wire.TypeBigInt}

// nodeLocalErrors are DuckDB error types that depend on the node, not on
// the entry: retrying may succeed, and recording them as the entry's result
// would make nodes diverge.
var nodeLocalErrors = map[string]bool{
	"IO": true, "INTERRUPT": true, "FATAL": true, "INTERNAL": true, "Out of Memory": true,
	"Connection": true, "Network": true, "HTTP": true, "Data Corruption": true,
}

func nodeLocal(err error) bool {
	var e *engine.Error
	if errors.As(err, &e) {
		// A conflict needs another transaction writing at the same time:
		// the leader's own checks (routing/analyze runs a CREATE in a
		// transaction it rolls back) or a snapshot's. The applier is the
		// only writer of replicated state, so the conflict is this node's
		// alone, and recording it as the command's failure would diverge.
		if e.Type == "TransactionContext" && strings.Contains(strings.ToLower(e.Message), "conflict") {
			return true
		}
		return nodeLocalErrors[e.Type]
	}
	return errors.Is(err, errTxnBroken) || errors.Is(err, errStageLog) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Snapshot implements raft.FSM. It pins a read transaction at the current
// applied index on a connection of its own and returns at once; Persist
// streams from that transaction while ApplyBatch goes on.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	if err := f.haltErr(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHalted, err)
	}
	// Raft decides to snapshot by comparing the log's last index with the
	// newest snapshot's. After a node installs a snapshot its log is empty,
	// the difference underflows, and raft would write the same snapshot
	// again at every SnapshotInterval until the next entry arrives: a full
	// copy of the database each time, on an idle node.
	if f.covered != nil && f.covered() {
		return nil, raft.ErrNothingNewToSnapshot
	}
	snap, err := pinSnapshot(f.db, f.pins, f.log)
	if err == nil {
		f.readsStages(snap)
		snap.observe = f.observeSnapshot
		snap.compress = f.compress == nil || f.compress()
	}
	return snap, err
}

// readsStages lets snap read the staged rows it holds back from the log,
// which keeps them until snap is released. Called between two applies,
// when snap's view and the holds agree.
func (f *fsm) readsStages(snap *fsmSnapshot) {
	snap.stageLog = f.stageLog
	snap.unpin = f.holds.pin()
}

// Restore implements raft.FSM: it replaces the whole database with the
// snapshot's contents in one transaction.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	var idx uint64
	keys := newKeyCache(f.keyWindow)
	err := f.inTxn(func() error {
		var err error
		if idx, err = restoreSnapshot(f.conn, rc); err != nil {
			return err
		}
		return keys.load(f.conn, idx)
	})
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	f.keys = keys
	f.shapes.reset()
	f.keyWriter.reset()
	if err := f.refreshHolds(context.Background()); err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	f.setApplied(idx)
	f.log.Info("restored snapshot", "applied", idx)
	return nil
}

// stopRetrying ends the retries of a stalled batch: the store is closing.
func (f *fsm) stopRetrying() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.closing:
	default:
		close(f.closing)
	}
}

func (f *fsm) close() error {
	f.stopRetrying()
	f.shapes.reset()
	f.keyWriter.reset()
	return errors.Join(f.serial.close(), f.conn.Close())
}
