// Package replication keeps every node's DuckDB identical: a Store owns a
// hashicorp/raft node whose log carries wal batches, and an FSM that applies
// each committed entry to DuckDB exactly once. See DESIGN.md.
package replication

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/wal"
)

// Errors returned by a Store. Those another node may learn of are
// outcome's sentinels, which travel between nodes as codes: a peer's
// answer wraps the same sentinel (errors.Is).
var (
	// ErrNotLeader is wrapped by a *NotLeaderError, which names the leader
	// if one is known.
	ErrNotLeader = outcome.ErrNotLeader
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("replication: store closed")
	// ErrHalted means the FSM stopped applying after a node-local failure;
	// the node must be restarted. It is a kind of ErrApplyStalled
	// (errors.Is holds for both), as which other nodes learn of it.
	ErrHalted error = &kindError{"replication: FSM halted", ErrApplyStalled}
	// ErrRefused is wrapped by the result of a statement the applier will
	// not run (transaction control, settings, several statements).
	ErrRefused = errors.New("replication: statement refused")
	// ErrUnknownOutcome means a write entered the log (or may have) but
	// its outcome is not known yet: leadership was lost while it was in
	// flight, its wait for the apply ended, or the FSM halted before
	// applying it. It may or may not be applied; retrying with the same
	// idempotency key applies it at most once.
	ErrUnknownOutcome = outcome.ErrUnknownOutcome
	// ErrDiskFull means the leader could not store a write in its log
	// because its disk is full; the write was not stored, and the leader
	// steps down.
	ErrDiskFull = outcome.ErrDiskFull
	// ErrApplyStalled refuses a write, before it enters the log, on a
	// leader whose applier is retrying an entry it failed to apply for a
	// node-local reason (Store.Stalled). The write never applies; it may
	// be sent again.
	ErrApplyStalled = outcome.ErrApplyStalled

	errAlreadyApplied = errors.New("already applied")
)

// kindError is a sentinel that is a kind of another: errors.Is holds for
// both, and the error travels to other nodes under the other's code.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// NotLeaderError says that this node is not the leader and who is, so the
// caller can forward. LeaderID and LeaderAddr are empty when no leader is
// known.
type NotLeaderError struct {
	LeaderID, LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderAddr == "" {
		return ErrNotLeader.Error() + " (no leader known)"
	}
	return fmt.Sprintf("%s (leader %s at %s)", ErrNotLeader, e.LeaderID, e.LeaderAddr)
}

// Unwrap makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// Config configures a Store. ID, Dir, RaftAddr, TLS and DB are required; zero
// durations and counts take the defaults documented on each field.
type Config struct {
	// ID is this node's Raft server ID, stable across restarts.
	ID string
	// Dir holds the log and stable store (raft.db, or wal/ for raft-wal)
	// and the snapshots.
	Dir string
	// LogStore (default LogStoreBoltDB) is the library that keeps raft's
	// log and stable state: LogStoreBoltDB or LogStoreWAL. A Dir holding
	// the other one's state is refused (*LogStoreMismatchError).
	LogStore string
	// RaftAddr is the address the Raft transport listens on (TCP, with
	// TLS).
	RaftAddr string
	// AdvertiseAddr is the address other nodes dial; defaults to the bound
	// RaftAddr.
	AdvertiseAddr string
	// Bootstrap makes this node the first voter of a new cluster when it has
	// no Raft state yet. Other nodes start without it and are added by the
	// leader's Join.
	Bootstrap bool
	// TLS is the mutual TLS of the Raft transport: the certificate this
	// node presents and the CA its peers' certificates must chain to
	// (clusterkey.RaftTLS or clusterkey.LoadRaftTLS). Required: a Raft
	// port that accepts anyone lets anyone rewrite the database.
	TLS *tls.Config
	// DB is the database the FSM applies to. The Store does not close it.
	DB *engine.DB
	// Logger receives Store and raft diagnostics; nil discards them.
	Logger *slog.Logger

	// HeartbeatTimeout (default 500ms) and ElectionTimeout (default 500ms)
	// bound how long followers wait before electing a new leader: a new
	// leader is normally elected within 0.5–1.5 s after the old one dies.
	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	// LeaderLeaseTimeout (default 500ms, the heartbeat timeout) is how long
	// a leader keeps leading without hearing from a quorum. At 250ms,
	// leaders of 3 nodes sharing two loaded cores stepped down during a
	// large ingest when a few heartbeat answers came late; a follower waits
	// as long before it stands, and a leader that cannot reach a quorum
	// commits nothing meanwhile (reads confirm leadership with a quorum).
	LeaderLeaseTimeout time.Duration
	// SnapshotThreshold (default 8192) is the number of log entries since
	// the last snapshot that triggers a new one; TrailingLogs (default 4096)
	// entries stay in the log after it so slightly lagging followers catch
	// up without a snapshot. SnapshotInterval (default 2m) is how often the
	// threshold is checked.
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotInterval  time.Duration
	// ApplyTimeout (default 10s) bounds how long a proposal waits to be
	// accepted by raft.
	ApplyTimeout time.Duration
	// KeyWindow (default 1<<16) is how many log entries an idempotency key
	// is remembered for. Keys inside the window are held in memory, so the
	// window bounds the FSM's memory as well as the keys table.
	KeyWindow uint64
	// MaxBatch (default 256) bounds the commands packed into one log entry.
	MaxBatch int
	// GatherMax (default 5ms; negative: never) is the longest the leader
	// holds concurrent writes to pack more into one log entry, and
	// GatherIdle (default 1ms) ends the wait early once no write has
	// arrived for that long. A lone writer is never held.
	GatherMax, GatherIdle time.Duration
	// WrapLogStore, if set, wraps the log store raft reads and writes
	// entries through; tests use it to inject faults such as slow fsyncs.
	WrapLogStore func(raft.LogStore) raft.LogStore
	// ObserveSnapshot, if set, is told of every snapshot this node
	// persists: how long it took, its size in bytes, and its error.
	// ObserveLeader is told of every change of the leader this node sees
	// (the new leader's id, empty while none is known). The daemon turns
	// them into metrics and its list of recent leader changes.
	ObserveSnapshot func(took time.Duration, bytes int64, err error)
	ObserveLeader   func(leaderID string)
	// OnHalt, if set, is told when the FSM halts: an entry failed in a way
	// this process cannot recover from (DuckDB invalidated the database).
	// The daemon restarts itself, which reopens DuckDB and replays the
	// log from the last applied entry.
	OnHalt func(error)
	// ReadsCompressedSnapshots, if set, reports whether the node with the
	// given id reads snapshots with compressed frames (the daemon asks
	// gossip: cluster.Meta.CompressedSnapshots). A node writes compressed
	// snapshots only while it holds for every server of the Raft
	// configuration, since any of them may be sent the snapshot and an
	// older build refuses it; nil compresses always.
	ReadsCompressedSnapshots func(id string) bool
	// WriteTimeout (default 1m; negative: none) bounds how long the leader
	// proves a heavy write before proposing it (Prove); a write that runs
	// longer is refused and never enters the log.
	WriteTimeout time.Duration
	// StallHandover (default 5s; negative: never) is how long a leader's
	// applier may be stalled (Stalled) before the leader hands leadership
	// to the most up-to-date voter, once per stall: a stall from this
	// node's own memory or disk need not stop the cluster's writes.
	StallHandover time.Duration
	// OutcomeWait (default 10s) bounds how long Execute waits, beyond the
	// write's proof, for an entry it proposed to be applied while the
	// applier makes no progress (applies no entry, inserts no staged
	// entry's rows); then it answers ErrUnknownOutcome.
	OutcomeWait time.Duration
}

func (c *Config) setDefaults() {
	setDefault(&c.HeartbeatTimeout, 500*time.Millisecond)
	setDefault(&c.ElectionTimeout, 500*time.Millisecond)
	setDefault(&c.LeaderLeaseTimeout, 500*time.Millisecond)
	setDefault(&c.SnapshotThreshold, 8192)
	setDefault(&c.TrailingLogs, 4096)
	setDefault(&c.SnapshotInterval, 2*time.Minute)
	setDefault(&c.ApplyTimeout, 10*time.Second)
	setDefault(&c.KeyWindow, 1<<16)
	setDefault(&c.MaxBatch, 256)
	setDefault(&c.GatherMax, 5*time.Millisecond)
	setDefault(&c.GatherIdle, time.Millisecond)
	setDefault(&c.LogStore, LogStoreBoltDB)
	setDefault(&c.WriteTimeout, time.Minute)
	setDefault(&c.OutcomeWait, 10*time.Second)
	setDefault(&c.StallHandover, 5*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// maxInflight bounds the log entries proposed but not yet applied; while
// they are in flight new writes queue up and are packed into one entry.
// One entry at a time makes batches as large as the waiting writes: each
// batch costs one DuckDB COMMIT on every node, which dominates (measured
// with `duckraft bench writes`: 162 → 287 tx/s at 8 clients against 4).
const maxInflight = 1

// logCacheSize and logCacheBytes bound the recent log entries kept in
// memory (logCache), so that replicating a new entry to followers does not
// read it back from the log store.
const (
	logCacheSize  = 512
	logCacheBytes = 64 << 20
)

// Store is one node's replicated state: the raft node, its stores and
// transport, and the FSM.
type Store struct {
	cfg  Config
	log  *slog.Logger
	raft *raft.Raft
	fsm  *fsm
	logs raftStore
	// maxEntry bounds a command's encoded size (0: no bound).
	maxEntry int
	trans    *rpcGuard
	// layer is the transport's stream layer, whose refused dials Close
	// ends before raft's shutdown waits for them.
	layer *tlsStreamLayer
	term  raftTerm
	// carry is a proposal the proposer took but left for the next entry
	// (pack); only the proposer goroutine uses it.
	carry *proposal

	// readyTerm is the term in which this node, as leader, has committed
	// an entry of its own, so its commit index is current for reads.
	readyTerm atomic.Uint64

	proposals chan *proposal
	// answered counts the log entries proposed and answered; a proposal
	// records it when queued, so the next gather knows whether the
	// proposal waited for the entry in flight (see propose).
	answered atomic.Uint64
	// gathers counts the gathers that held an entry for more writes, and
	// gatherTimeouts those of them that ended on GatherIdle or GatherMax
	// instead of on the count of writers expected back. Tests read them.
	gathers, gatherTimeouts atomic.Int64
	closing                 chan struct{}
	// raftDown is closed once raft has shut down; await ends on it.
	raftDown  chan struct{}
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup
}

// Open starts the Store: it opens (or creates) the Raft state in cfg.Dir,
// starts the transport and raft, and bootstraps if asked to and there is no
// state yet.
func Open(cfg Config) (*Store, error) {
	cfg.setDefaults()
	if cfg.ID == "" || cfg.Dir == "" || cfg.RaftAddr == "" || cfg.TLS == nil || cfg.DB == nil {
		return nil, errors.New("replication: Config needs ID, Dir, RaftAddr, TLS and DB")
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{
		cfg:       cfg,
		log:       cfg.Logger.With("node", cfg.ID),
		proposals: make(chan *proposal, cfg.MaxBatch),
		closing:   make(chan struct{}),
		raftDown:  make(chan struct{}),
	}
	var cleanup []func() error
	fail := func(err error) (*Store, error) {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
		return nil, fmt.Errorf("open store %s: %w", cfg.ID, err)
	}

	var err error
	if s.fsm, err = newFSM(cfg.DB, cfg.KeyWindow, s.log.With("component", "fsm")); err != nil {
		return fail(err)
	}
	s.fsm.observeSnapshot = cfg.ObserveSnapshot
	s.fsm.onHalt = cfg.OnHalt
	cleanup = append(cleanup, s.fsm.close)
	hlog := newHCLogger(s.log, "raft")
	if s.logs, err = openRaftStore(cfg.LogStore, cfg.Dir, hlog); err != nil {
		return fail(err)
	}
	cleanup = append(cleanup, s.logs.Close)
	if cfg.LogStore == LogStoreWAL {
		s.maxEntry = walMaxEntry
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hlog.Named("snapshots"))
	if err != nil {
		return fail(err)
	}
	if cfg.ReadsCompressedSnapshots != nil {
		s.fsm.compress = func() bool {
			r := s.term.r.Load()
			if r == nil {
				return false
			}
			f := r.GetConfiguration()
			return f.Error() == nil && everyServerReads(f.Configuration().Servers, cfg.ReadsCompressedSnapshots)
		}
	}
	s.fsm.covered = func() bool {
		r := s.term.r.Load()
		if r == nil {
			return false
		}
		list, err := snaps.List()
		return err == nil && len(list) > 0 && r.AppliedIndex() <= list[0].Index
	}
	var advertise net.Addr
	if cfg.AdvertiseAddr != "" {
		if advertise, err = net.ResolveTCPAddr("tcp", cfg.AdvertiseAddr); err != nil {
			return fail(err)
		}
	}
	tlog := s.log.With("component", "raft-transport")
	layer, err := newTLSStreamLayer(cfg.RaftAddr, advertise, cfg.TLS, handshakeTimeout, tlog)
	if err != nil {
		return fail(err)
	}
	s.layer = layer
	s.term.stable = s.logs
	s.trans = newRPCGuard(raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: layer, MaxPool: 3, Timeout: 10 * time.Second, Logger: hlog.Named("transport"),
	}), s.term.current, s.logs, tlog)
	s.trans.standFor = cfg.ElectionTimeout
	cleanup = append(cleanup, s.trans.Close)

	// A bootstrapping node whose database already holds state (a backup
	// installed by duckraftd --restore) starts the log after it.
	has := false
	if cfg.Bootstrap {
		if has, err = raft.HasExistingState(s.logs, s.logs, snaps); err != nil {
			return fail(err)
		}
		if !has && s.fsm.Applied() > 0 {
			if err := s.seedSnapshot(snaps); err != nil {
				return fail(err)
			}
			has = true
		}
	}
	restore, err := needRestore(s.fsm.Applied(), snaps, s.logs)
	if err != nil {
		return fail(err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hlog
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.BatchApplyCh = true
	// An AppendEntries RPC carries at most this many entries; staged rows
	// make entries of several MB, and raft's 64 would let one RPC to a
	// follower catching up hold hundreds of MB.
	rc.MaxAppendEntries = maxAppendEntries
	// The database survives restarts, so restoring the last snapshot at
	// every start would only redo work; the FSM skips replayed entries it
	// already has instead. See DESIGN.md.
	rc.NoSnapshotRestoreOnStart = !restore
	s.log.Info("opening raft", "applied", s.fsm.Applied(), "restore_snapshot", restore)
	var logs raft.LogStore = s.logs
	if cfg.WrapLogStore != nil {
		logs = cfg.WrapLogStore(logs)
	}
	cache, err := newLogCache(logCacheSize, logCacheBytes, logs)
	if err != nil {
		return fail(err)
	}
	cache.keep = s.fsm.holds.keep
	s.fsm.stageLog = cache
	logs = cache
	if s.raft, err = raft.NewRaft(rc, s.fsm, logs, s.logs, snaps, s.trans); err != nil {
		return fail(err)
	}
	s.term.r.Store(s.raft)

	if cfg.Bootstrap && !has {
		boot := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: rc.LocalID, Address: s.trans.LocalAddr(),
		}}}
		if err := s.raft.BootstrapCluster(boot).Error(); err != nil {
			s.raft.Shutdown()
			return fail(fmt.Errorf("bootstrap: %w", err))
		}
	}
	s.wg.Add(1)
	go s.propose()
	s.wg.Add(1)
	go s.watchLeaderDeath()
	if cfg.StallHandover > 0 {
		s.wg.Add(1)
		go s.handOverWhenStalled()
	}
	if cfg.ObserveLeader != nil {
		s.watchLeader(cfg.ObserveLeader)
	}
	return s, nil
}

// watchLeader tells observe of each leader change raft reports, until the
// Store closes.
func (s *Store) watchLeader(observe func(string)) {
	// Not blocking: raft would wait on a full channel, and during Close
	// nobody reads it any more. Leader changes are rare, so the buffer
	// drops one only when 64 arrive faster than observe takes them.
	ch := make(chan raft.Observation, 64)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	s.raft.RegisterObserver(obs)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.raft.DeregisterObserver(obs)
		for {
			select {
			case o := <-ch:
				observe(string(o.Data.(raft.LeaderObservation).LeaderID))
			case <-s.closing:
				return
			}
		}
	}()
}

// needRestore reports whether raft must restore the latest snapshot at
// start. It must when the database lacks entries that the snapshot covers
// and the log no longer has (or has, but raft would not replay them because
// they are at or below the snapshot index): the database was lost or is
// older than the Raft state. Entries raft does not give the FSM (no-ops,
// barriers) do not count.
func needRestore(applied uint64, snaps raft.SnapshotStore, logs raft.LogStore) (bool, error) {
	list, err := snaps.List()
	if err != nil {
		return false, fmt.Errorf("list snapshots: %w", err)
	}
	if len(list) == 0 || list[0].Index <= applied {
		return false, nil
	}
	for i := applied + 1; i <= list[0].Index; i++ {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			return true, nil
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			return true, nil
		}
	}
	return false, nil
}

// proposal is one command waiting to be packed into a log entry.
type proposal struct {
	cmd wal.Command
	// size is the command's encoded size.
	size int
	done chan cmdResult
	// answered is Store.answered when the proposal was queued: lower
	// than the count once the entry in flight is answered means the
	// proposal waited for that entry, so its writer is not one of the
	// entry's (a writer has one write outstanding).
	answered uint64
}

// Execute proposes cmd on the leader, waits until it is applied locally and
// returns its result. A command that failed deterministically (a constraint
// violation, say) returns its error, the same on every node. On a follower
// it returns a *NotLeaderError. An error wrapping ErrUnknownOutcome means
// the command may still apply (ctx ended, or the applier made no progress
// for OutcomeWait after it was queued, leadership was lost, the FSM
// halted); any other error means it never will.
func (s *Store) Execute(ctx context.Context, cmd wal.Command) (*wal.Result, error) {
	wait, err := s.Submit(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return wait(ctx)
}

// Submit queues cmd as Execute does and returns once it is queued, with a
// function that waits for its result. Commands submitted one after another
// enter the log in that order (or the later ones not at all), which lets a
// staging transaction keep several Stage entries in flight.
func (s *Store) Submit(ctx context.Context, cmd wal.Command) (func(context.Context) (*wal.Result, error), error) {
	select {
	case <-s.closing:
		return nil, ErrClosed
	default:
	}
	if s.raft.State() != raft.Leader {
		return nil, s.notLeader()
	}
	if err := s.applierHealthy(); err != nil {
		return nil, err
	}
	if cmd.Timestamp == 0 {
		cmd.Timestamp = time.Now().UnixMicro()
	}
	// Encoding errors belong to this command alone, so they are found
	// before it is packed with others.
	enc, err := (wal.Batch{Commands: []wal.Command{cmd}}).MarshalBinary()
	if err != nil {
		return nil, err
	}
	// A command over maxEntry goes alone into its entry (pack keeps
	// entries of several commands under maxEntryBytes), so refusing it
	// here keeps every entry within what the log store can read back.
	if s.maxEntry > 0 && len(enc) > s.maxEntry {
		return nil, fmt.Errorf("%w: %d bytes encoded, the %s log store holds at most %d", ErrEntryTooLarge, len(enc), s.cfg.LogStore, s.maxEntry)
	}
	p := &proposal{cmd: cmd, size: len(enc), done: make(chan cmdResult, 1), answered: s.answered.Load()}
	select {
	case s.proposals <- p:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.closing:
		return nil, ErrClosed
	}
	return func(ctx context.Context) (*wal.Result, error) {
		return awaitOutcome(ctx, p.done, s.cfg.OutcomeWait, s.fsm.progress.Load, s.fsm.Applied)
	}, nil
}

// awaitOutcome waits for a proposed command's result until ctx ends or the
// applier has made no progress (progress unchanged) for wait: a COMMIT that
// inserts millions of staged rows applies for longer than wait, and its
// writer must not be told its outcome is unknown while the applier works
// through it. applied names the applied index in the error.
func awaitOutcome(ctx context.Context, done <-chan cmdResult, wait time.Duration, progress, applied func() uint64) (*wal.Result, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	last := progress()
	for {
		select {
		case r := <-done:
			return r.res, r.err
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: the write is queued for the log or in it: %w", ErrUnknownOutcome, ctx.Err())
		case <-timer.C:
			if now := progress(); now != last {
				last = now
				timer.Reset(wait)
				continue
			}
			return nil, fmt.Errorf("%w: the write is in the log but the applier made no progress for %v (applied index %d)",
				ErrUnknownOutcome, wait, applied())
		}
	}
}

// handOverWhenStalled transfers leadership away from this node when its
// applier has been stalled for StallHandover while it leads, once per
// stall, until the Store closes. The stalled entry is committed: the new
// leader applies it, or stalls on it too and hands over in turn, so a
// stall every node shares moves leadership at most once per node.
func (s *Store) handOverWhenStalled() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.StallHandover / 5)
	defer t.Stop()
	var handed time.Time
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
		}
		st, ok := s.fsm.stalled()
		if !ok || !s.IsLeader() || time.Since(st.Since) < s.cfg.StallHandover || st.Since.Equal(handed) {
			continue
		}
		handed = st.Since
		s.log.Warn("the applier is stalled: handing leadership over", "entry", st.First, "since", st.Since, "err", st.Err)
		if err := s.TransferLeadership(""); err != nil {
			s.log.Warn("hand leadership over", "err", err)
		}
	}
}

// applierHealthy refuses a write while this node's FSM is halted or
// retrying an entry: it would only queue behind it, and answering it
// "outcome unknown" later is worse than refusing it now.
func (s *Store) applierHealthy() error {
	if err := s.fsm.haltErr(); err != nil {
		return fmt.Errorf("%w: %w", ErrHalted, err)
	}
	if st, ok := s.fsm.stalled(); ok {
		return fmt.Errorf("%w: entry %d has failed %d times since %s (%v); writes are refused until it applies",
			ErrApplyStalled, st.First, st.Attempts, st.Since.Format(time.RFC3339), st.Err)
	}
	return nil
}

// Stalled returns the entry this node's applier is retrying, if it is.
func (s *Store) Stalled() (Stall, bool) { return s.fsm.stalled() }

// propose packs queued proposals into log entries (group commit) and
// hands each entry's outcome back to its proposals.
func (s *Store) propose() {
	defer s.wg.Done()
	inflight := make(chan struct{}, maxInflight)
	last := 0
	for {
		var batch []*proposal
		if s.carry != nil {
			batch, s.carry = append(batch, s.carry), nil
		} else {
			select {
			case p := <-s.proposals:
				batch = append(batch, p)
			case <-s.closing:
				s.failQueued()
				return
			}
		}
		// A Stage entry (a large transaction's rows, sent ahead of its
		// COMMIT) does not wait for the entry in flight: its transaction
		// sends the next one while this one is written and applied, and
		// raft writes one while the FSM applies the one before. It goes
		// alone, so small writes keep their group commit.
		if _, ok := batch[0].cmd.Entry.(wal.Stage); ok {
			s.proposeAlone(batch[0])
			continue
		}
		select {
		case inflight <- struct{}{}:
		case <-s.closing:
			respond(batch, cmdResult{err: ErrClosed})
			s.failQueued()
			return
		}
		// One entry in flight at most: every entry proposed so far
		// is answered now.
		answered := s.answered.Load()
	more:
		for len(batch) < s.cfg.MaxBatch && s.carry == nil {
			select {
			case p := <-s.proposals:
				batch = s.pack(batch, p)
			default:
				break more
			}
		}
		// Concurrent writers: a write waited for the previous entry, or
		// that entry carried several. Their clients answer and send again
		// within a moment; waiting for them fills one entry instead of
		// splitting them into alternating half-full ones.
		//
		// The writers to wait for: the last entry's, about to come
		// back, and those in hand that were queued before it was
		// answered. A write in hand that was queued after the answer
		// may be one of the last entry's writers come back, so it is
		// not counted again. When the proposer took a write does not
		// tell: it can take one between the answer and the release of
		// the in-flight slot. The count the write recorded when it was
		// queued does.
		waited := 0
		for _, p := range batch {
			if p.answered < answered {
				waited++
			}
		}
		if (waited > 0 || last > 1) && s.cfg.GatherMax > 0 && s.carry == nil {
			batch = s.gather(batch, last+waited)
		}
		last = len(batch)
		b := wal.Batch{Commands: make([]wal.Command, len(batch))}
		for i, p := range batch {
			b.Commands[i] = p.cmd
		}
		data, err := b.MarshalBinary()
		if err != nil {
			<-inflight
			respond(batch, cmdResult{err: err})
			continue
		}
		select {
		case <-s.closing:
			// Close began (a gather ends on it). Raft is shutting
			// down and may never answer an entry proposed now (one
			// left in its buffered apply queue is dropped), and
			// Close waits for every answer.
			<-inflight
			respond(batch, cmdResult{err: ErrClosed})
			s.failQueued()
			return
		default:
		}
		s.apply(data, batch, func() { <-inflight })
	}
}

// gather adds proposals to batch as they arrive, until it holds want,
// none has come for GatherIdle, GatherMax has passed, or the batch is full.
func (s *Store) gather(batch []*proposal, want int) []*proposal {
	if len(batch) >= want {
		return batch
	}
	s.gathers.Add(1)
	deadline := time.NewTimer(s.cfg.GatherMax)
	defer deadline.Stop()
	idle := time.NewTimer(s.cfg.GatherIdle)
	defer idle.Stop()
	for len(batch) < s.cfg.MaxBatch {
		select {
		case p := <-s.proposals:
			batch = s.pack(batch, p)
			if len(batch) >= want || s.carry != nil {
				return batch
			}
			idle.Reset(s.cfg.GatherIdle)
		case <-idle.C:
			s.gatherTimeouts.Add(1)
			return batch
		case <-deadline.C:
			s.gatherTimeouts.Add(1)
			return batch
		case <-s.closing:
			return batch
		}
	}
	return batch
}

// proposeAlone proposes p as an entry of its own, without the in-flight
// slot.
func (s *Store) proposeAlone(p *proposal) {
	batch := []*proposal{p}
	data, err := wal.Batch{Commands: []wal.Command{p.cmd}}.MarshalBinary()
	if err != nil {
		respond(batch, cmdResult{err: err})
		return
	}
	select {
	case <-s.closing:
		respond(batch, cmdResult{err: ErrClosed})
		return
	default:
	}
	s.apply(data, batch, func() {})
}

// apply hands an encoded entry to raft and answers its proposals when it
// is applied, then calls done.
func (s *Store) apply(data []byte, batch []*proposal, done func()) {
	f := s.raft.Apply(data, s.cfg.ApplyTimeout)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer done()
		s.finish(f, batch)
	}()
}

// maxAppendEntries bounds the entries of one AppendEntries RPC.
const maxAppendEntries = 16

// maxEntryBytes bounds the commands packed into one log entry: one past
// it waits for the next entry (Store.carry). A single command may be
// larger; staging keeps a client's large transaction in entries of about
// routing's StageBytes, so that no entry stalls heartbeats while it is
// written, sent and applied.
const maxEntryBytes = 8 << 20

// pack adds p to batch unless that would make the entry larger than
// maxEntryBytes, or p is a Stage, which goes alone; then p is carried to
// the next entry.
func (s *Store) pack(batch []*proposal, p *proposal) []*proposal {
	size := 0
	for _, q := range batch {
		size += q.size
	}
	_, stage := p.cmd.Entry.(wal.Stage)
	if len(batch) > 0 && (stage || size+p.size > maxEntryBytes) {
		s.carry = p
		return batch
	}
	return append(batch, p)
}

func (s *Store) failQueued() {
	if s.carry != nil {
		s.carry.done <- cmdResult{err: ErrClosed}
		s.carry = nil
	}
	for {
		select {
		case p := <-s.proposals:
			p.done <- cmdResult{err: ErrClosed}
		default:
			return
		}
	}
}

func respond(batch []*proposal, r cmdResult) {
	for _, p := range batch {
		p.done <- r
	}
}

// finish waits for an entry to be applied and fans its results out.
func (s *Store) finish(f raft.ApplyFuture, batch []*proposal) {
	err := s.await(f)
	// Before any write of the entry is answered, so that its writers'
	// next writes record the new count.
	s.answered.Add(1)
	if err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
			err = s.notLeader()
		case errors.Is(err, raft.ErrLeadershipLost):
			err = fmt.Errorf("%w: %w", ErrUnknownOutcome, s.notLeader())
		case errors.Is(err, raft.ErrRaftShutdown):
			// Raft may have stored the entry before it shut down, or
			// committed it without applying it (await): it applies at
			// the next start.
			err = fmt.Errorf("%w: %w", ErrUnknownOutcome, ErrClosed)
		case errors.Is(err, syscall.ENOSPC):
			// Raft answers an entry its log store could not write with
			// that error, before any follower has it.
			err = fmt.Errorf("%w: %w", ErrDiskFull, err)
		default:
			err = fmt.Errorf("propose: %w", err)
		}
		respond(batch, cmdResult{err: err})
		return
	}
	switch r := f.Response().(type) {
	case *entryResult:
		for i, p := range batch {
			p.done <- r.results[i]
		}
	case error:
		respond(batch, cmdResult{err: r})
	default:
		respond(batch, cmdResult{err: fmt.Errorf("entry %d: unexpected FSM response %T", f.Index(), r)})
	}
}

func (s *Store) notLeader() error {
	addr, id := s.raft.LeaderWithID()
	return &NotLeaderError{LeaderID: string(id), LeaderAddr: string(addr)}
}

// IsLeader reports whether this node is the leader.
func (s *Store) IsLeader() bool { return s.raft.State() == raft.Leader }

// LeaderAddr returns the leader's Raft address, or "" if none is known.
func (s *Store) LeaderAddr() string {
	addr, _ := s.raft.LeaderWithID()
	return string(addr)
}

// LeaderID returns the leader's server ID, or "" if none is known.
func (s *Store) LeaderID() string {
	_, id := s.raft.LeaderWithID()
	return string(id)
}

// Addr returns the address of this node's Raft transport.
func (s *Store) Addr() string { return string(s.trans.LocalAddr()) }

// ID returns this node's server ID.
func (s *Store) ID() string { return s.cfg.ID }

// WaitForLeader waits until a leader is known and returns its ID.
func (s *Store) WaitForLeader(timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		if id := s.LeaderID(); id != "" {
			return id, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no leader after %v", timeout)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-s.closing:
			return "", ErrClosed
		}
	}
}

// Join adds a server to the cluster, as a voter or a read replica
// (non-voter). It must run on the leader. Joining again with the same ID and
// address is a no-op. A known ID changes in place: a non-voter is promoted,
// a voter demoted, an address updated, so that the server is never out of
// the configuration (a removal leaves raft replicating to the removed server
// from its old position, see ErrStaleSnapshot). Another server at the same
// address is removed.
func (s *Store) Join(id, addr string, voter bool) error {
	if !s.IsLeader() {
		return s.notLeader()
	}
	cf := s.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return fmt.Errorf("join %s: %w", id, err)
	}
	for _, srv := range cf.Configuration().Servers {
		switch {
		case srv.ID == raft.ServerID(id):
			isVoter := srv.Suffrage == raft.Voter
			if srv.Address == raft.ServerAddress(addr) && isVoter == voter {
				return nil
			}
			if isVoter && !voter {
				if err := s.await(s.raft.DemoteVoter(srv.ID, 0, s.cfg.ApplyTimeout)); err != nil {
					return fmt.Errorf("join %s: demote: %w", id, err)
				}
			}
		case srv.Address == raft.ServerAddress(addr):
			if err := s.await(s.raft.RemoveServer(srv.ID, 0, s.cfg.ApplyTimeout)); err != nil {
				return fmt.Errorf("join %s: remove %s at the same address: %w", id, srv.ID, err)
			}
		}
	}
	var f raft.IndexFuture
	if voter {
		f = s.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, s.cfg.ApplyTimeout)
	} else {
		f = s.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, s.cfg.ApplyTimeout)
	}
	if err := s.await(f); err != nil {
		return fmt.Errorf("join %s at %s: %w", id, addr, err)
	}
	s.log.Info("joined", "id", id, "addr", addr, "voter", voter)
	return nil
}

// Remove removes a server from the cluster. It must run on the leader.
func (s *Store) Remove(id string) error {
	if !s.IsLeader() {
		return s.notLeader()
	}
	if err := s.await(s.raft.RemoveServer(raft.ServerID(id), 0, s.cfg.ApplyTimeout)); err != nil {
		return fmt.Errorf("remove %s: %w", id, err)
	}
	return nil
}

// AppliedIndex returns the last log index whose effects are committed in
// this node's DuckDB.
func (s *Store) AppliedIndex() uint64 { return s.fsm.Applied() }

// CommitIndex returns the latest log index this node knows to be committed.
func (s *Store) CommitIndex() uint64 { return s.raft.CommitIndex() }

// AppliedThrough is the index through which this node has applied every
// entry: the FSM's applied index, moved past the entries after it that
// raft never passes to the FSM (a new leader's no-op, barriers) once raft
// has taken them. It is the applied index lag is measured from (the
// leader's commit index less it) and the one gossip publishes: an idle
// node, the leader too, is 0 behind, which the FSM's own index, stuck
// before a trailing no-op, would not say.
func (s *Store) AppliedThrough() uint64 {
	applied, top := s.fsm.Applied(), s.raft.AppliedIndex()
	for i := applied + 1; i <= top; i++ {
		var l raft.Log
		if err := s.logs.GetLog(i, &l); err == nil && (l.Type == raft.LogCommand || l.Type == raft.LogConfiguration) {
			break
		}
		// Not for the FSM, or compacted into a snapshot, hence applied.
		applied = i
	}
	return applied
}

// WaitForApplied waits until this node has applied index idx: a read after
// it sees every write up to idx. Entries raft never passes to the FSM (the
// no-op a new leader commits) count as applied, so a commit index that
// ends in one is reached: without that, a new session on a node whose last
// entry is an election's no-op waited for an index the FSM never reports.
func (s *Store) WaitForApplied(ctx context.Context, idx uint64) error {
	for {
		ch, halted := s.fsm.watch()
		if s.appliedThrough(idx) {
			return nil
		}
		if halted != nil {
			return fmt.Errorf("%w: %w", ErrHalted, halted)
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Millisecond):
			// Entries the FSM never sees do not move the applied index;
			// re-check the log for them.
		case <-ctx.Done():
			return fmt.Errorf("wait for index %d (applied %d): %w", idx, s.fsm.Applied(), ctx.Err())
		case <-s.closing:
			return ErrClosed
		}
	}
}

// ReadIndex makes a strong read safe on the leader: it confirms leadership
// with a quorum, then waits until everything committed so far is applied
// locally. It returns the index the read will reflect.
func (s *Store) ReadIndex(ctx context.Context) (uint64, error) {
	if !s.IsLeader() {
		return 0, s.notLeader()
	}
	// A new leader's commit index may not yet cover the last entries of
	// the previous term: it does once an entry of its own term commits.
	// A barrier per term waits for that (Raft §8).
	if term := s.raft.CurrentTerm(); s.readyTerm.Load() != term {
		if err := s.barrier(ctx); err != nil {
			return 0, err
		}
		s.readyTerm.Store(term)
	}
	if err := s.VerifyLeader(); err != nil {
		return 0, err
	}
	commit := s.raft.CommitIndex()
	for {
		ch, halted := s.fsm.watch()
		if s.appliedThrough(commit) {
			return commit, nil
		}
		if halted != nil {
			return 0, fmt.Errorf("%w: %w", ErrHalted, halted)
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Millisecond):
			// Entries the FSM never sees (no-ops) do not move the
			// applied index; re-check the log for them.
		case <-ctx.Done():
			return 0, fmt.Errorf("read index %d: %w", commit, ctx.Err())
		case <-s.closing:
			return 0, ErrClosed
		}
	}
}

// barrier waits until an entry of this leader's term commits. A leader
// that is handing over rejects it until the transfer ends; the read waits
// for that outcome rather than failing: leadership moved (a
// *NotLeaderError, which routers retry on the new leader) or the transfer
// failed and this node still leads.
func (s *Store) barrier(ctx context.Context) error {
	for {
		err := s.await(s.raft.Barrier(s.cfg.ApplyTimeout))
		switch {
		case err == nil:
			return nil
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
			return s.notLeader()
		case errors.Is(err, raft.ErrRaftShutdown):
			return fmt.Errorf("read index barrier: %w", ErrClosed)
		case !errors.Is(err, raft.ErrLeadershipTransferInProgress):
			return fmt.Errorf("read index barrier: %w", err)
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("read index barrier: %w: %w", err, ctx.Err())
		case <-s.closing:
			return ErrClosed
		}
		if !s.IsLeader() {
			return s.notLeader()
		}
	}
}

// appliedThrough reports whether every entry up to idx that the FSM applies
// has been applied. The FSM's own index answers most calls without a look
// at the log.
func (s *Store) appliedThrough(idx uint64) bool {
	return s.fsm.Applied() >= idx || s.AppliedThrough() >= idx
}

// VerifyLeader confirms with a quorum that this node is still the leader.
func (s *Store) VerifyLeader() error {
	if err := s.await(s.raft.VerifyLeader()); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return s.notLeader()
		}
		if errors.Is(err, raft.ErrRaftShutdown) {
			return fmt.Errorf("verify leader: %w", ErrClosed)
		}
		return fmt.Errorf("verify leader: %w", err)
	}
	return nil
}

// Snapshot asks raft to take a snapshot now and compact the log.
func (s *Store) Snapshot() error {
	if err := s.await(s.raft.Snapshot()); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

// Stats returns raft's statistics plus the FSM's applied index.
func (s *Store) Stats() map[string]string {
	st := s.raft.Stats()
	st["fsm_applied_index"] = strconv.FormatUint(s.fsm.Applied(), 10)
	if err := s.fsm.haltErr(); err != nil {
		st["fsm_halted"] = err.Error()
	}
	if stall, ok := s.fsm.stalled(); ok {
		st["fsm_stalled"] = fmt.Sprintf("entry %d, %d attempts since %s: %v", stall.First, stall.Attempts,
			stall.Since.Format(time.RFC3339), stall.Err)
	}
	return st
}

// Voters returns how many voters the Raft configuration this node knows
// holds, 0 if it cannot tell.
func (s *Store) Voters() int {
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	n := 0
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage == raft.Voter {
			n++
		}
	}
	return n
}

// Servers returns the current cluster configuration as ID → address.
func (s *Store) Servers() (map[string]string, error) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	out := make(map[string]string)
	for _, srv := range f.Configuration().Servers {
		out[string(srv.ID)] = string(srv.Address)
	}
	return out, nil
}

// Close stops the Store: queued writes fail with ErrClosed, raft shuts down
// (in-flight entries are applied or abandoned, never half-applied), and the
// Raft stores are closed. The DB stays open.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.fsm.stopRetrying()
		// A replication goroutine waiting in Dial for a peer that
		// refuses connections would hold raft's shutdown until the
		// dial's timeout.
		s.layer.stopDialing()
		err := s.raft.Shutdown().Error()
		// Raft's goroutines have ended: a future it has not answered
		// now never will be, and its waiters (await) end.
		close(s.raftDown)
		s.wg.Wait()
		s.closeErr = errors.Join(err, s.trans.Close(), s.logs.Close(), s.fsm.close())
	})
	return s.closeErr
}
