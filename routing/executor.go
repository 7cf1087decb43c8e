// Package routing decides where each statement runs: writes go through the
// Raft leader; reads run on the live node that serves the session's
// consistency level at the least cost (read replicas first), and large scans
// may be split over several nodes pinned at one log index.
//
// Its packages: classify says what a statement does, balance ranks the
// nodes, nodeapi is the typed protocol between nodes, and this package
// holds the sessions and the Executor, which classifies each statement and
// hands it to the part that runs it: reads (reader), writes (writer),
// transactions (txns) and split scans (splitScan). What it needs of the
// rest of a node is an interface each, defined here: Store (replication),
// Directory (gossip) and Remote (the other nodes); each part holds only
// the small subset of them it uses.
package routing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/routing/access"
	"github.com/duckraft/duckraft/routing/analyze"
	"github.com/duckraft/duckraft/routing/balance"
	"github.com/duckraft/duckraft/routing/classify"
	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/wal"
)

// Store is what routing needs of the replication store.
type Store interface {
	Execute(ctx context.Context, cmd wal.Command) (*wal.Result, error)
	// Prove runs cmd on the leader without keeping its effects, before
	// it is proposed: a write that would run out of memory or time on
	// every node is refused there (replication.Store.Prove). texts are
	// its statements as the leader lexed them, one per entry, so that
	// the proof does not lex them again.
	Prove(ctx context.Context, cmd wal.Command, texts []sqltext.Statement) error
	IsLeader() bool
	LeaderID() string
	// AppliedThrough is the index through which this node has applied
	// the log, counting the entries after the state machine's last that
	// raft never hands it (a new leader's no-op, barriers): reads judge
	// by it how far behind an index they need the node is. By the state
	// machine's own index, a node that saw elections and no write stayed
	// short of every new session's index for ever (replication.Store).
	AppliedThrough() uint64
	// CommitIndex is the newest index this node knows to be committed: a
	// new session's reads wait for it, so a client reads what another
	// client's acknowledged write changed.
	CommitIndex() uint64
	WaitForApplied(ctx context.Context, idx uint64) error
	ReadIndex(ctx context.Context) (uint64, error)
}

// Peer is a data node as gossip describes it.
type Peer = balance.Peer

// Directory finds the cluster's members (from gossip metadata).
type Directory interface {
	QuackAddr(id string) (string, bool)
	// Peers lists the live data nodes, this one included; routers, which
	// hold no data, are not peers.
	Peers() []Peer
}

// Config configures an Executor.
type Config struct {
	// ID is this node's id, as in gossip.
	ID string
	// Router is set on a data-less router: it runs no read itself.
	Router    bool
	Store     Store
	Directory Directory
	// Remote reaches the other nodes; nil is QuackRemote over Token and
	// NodeCredential.
	Remote Remote
	// DB is this node's database, used to evaluate volatile expressions on
	// the leader before they are replicated as data.
	DB *engine.DB
	// Token authenticates this node's sessions on other nodes (reads
	// routed there) as an admin: the admin token, or the node credential.
	// Their statements were held to the client's role here.
	Token string
	// NodeCredential is the cluster's node credential
	// (clusterkey.NodeAPI): the one this node's write endpoint accepts,
	// and the one it forwards writes with. Empty, the endpoint accepts
	// nothing.
	NodeCredential string
	// Consistency is the default read consistency of new sessions.
	Consistency Level
	// SessionWait bounds how long a routed read waits for its node to
	// apply the index it needs before the router tries another node.
	SessionWait time.Duration
	// MaxStaleness is the lag a bounded read tolerates.
	MaxStaleness uint64
	// LeaderWait bounds how long a write waits for a leader to be known.
	LeaderWait time.Duration
	// Voters, if set, reports how many voters the Raft configuration
	// holds, so that a write that found no leader says how far the
	// cluster is from a quorum (NoQuorumError).
	Voters func() int
	// StatementTimeout bounds every read of a session that has not set
	// duckraft_statement_timeout (timeout.go); 0 is none.
	StatementTimeout time.Duration
	// StageBytes is the size of an open transaction's appends past which
	// they are staged ahead of its COMMIT, in log entries of about that
	// size (stagesend.go); 0 is DefaultStageBytes, negative never stages.
	StageBytes int
	// Now is the clock the leader stamps statements with (now(),
	// current_date, …); nil is time.Now. Tests shift it to fake clock
	// jumps.
	Now func() time.Time
	// ObserveRead, if set, is told of every read this node routes once it
	// is answered: its level, the node that served it (empty when none
	// could, "split" for a split scan), and its error. ObserveWrite is
	// told of every write this node sends through the leader, after its
	// last retry. The daemon counts them for its metrics; they run on the
	// statement's goroutine, so they must be quick.
	ObserveRead  func(level Level, node string, err error)
	ObserveWrite func(err error)
	// ProtectedPaths are files and directories of the node that no
	// client statement may read or write, whatever its role and
	// --allow-external-access: the data directory, the tokens and key
	// files, the backup directory (guard.go adds DuckDB's own files and
	// /proc of this process).
	ProtectedPaths []string
	// SessionIDs and SessionAPI, both set, let the node's client sessions
	// outlive it (migrate.go): the ids the node's server signs, and the
	// other members' session endpoints.
	SessionIDs *node.SessionIDs
	SessionAPI SessionAPI
	Logger     *slog.Logger
}

// DefaultMaxStaleness is Config.MaxStaleness when it is zero.
const DefaultMaxStaleness = 1000

// Executor implements node.Executor for a cluster member: it classifies a
// client's text, checks it against the session's role and the node's
// guard, and hands it to the part that runs it.
type Executor struct {
	cfg Config
	log *slog.Logger
	// pool holds the connections the leader binds (analyzer) and
	// materializes writes on, so that a write does not open one.
	pool *engine.Pool
	// guard keeps client statements from the applier's schema and the
	// node's files (guard.go).
	guard *access.Guard

	members *members
	local   *localReads
	reads   *reader
	writes  *writer
	txns    *txns
	split   *splitScan

	// mig lets sessions outlive this node, and this node adopt others';
	// nil without Config.SessionIDs.
	mig *migrator
}

// New returns an Executor; it reads the list of volatile functions from db.
func New(cfg Config) (*Executor, error) {
	if cfg.Consistency == "" {
		cfg.Consistency = Session
	}
	if cfg.SessionWait <= 0 {
		cfg.SessionWait = 2 * time.Second
	}
	if cfg.LeaderWait <= 0 {
		cfg.LeaderWait = 10 * time.Second
	}
	if cfg.MaxStaleness == 0 {
		cfg.MaxStaleness = DefaultMaxStaleness
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Remote == nil {
		cfg.Remote = NewQuackRemote(cfg.Token, cfg.NodeCredential, nil)
	}
	vol, err := loadVolatile(cfg.DB)
	if err != nil {
		return nil, err
	}
	guard, err := newGuard(cfg)
	if err != nil {
		return nil, err
	}
	pool := engine.NewPool(cfg.DB, poolIdle)
	e := &Executor{cfg: cfg, log: cfg.Logger, pool: pool, guard: guard}
	e.local = &localReads{store: cfg.Store, wait: cfg.SessionWait}
	e.members = &members{id: cfg.ID, router: cfg.Router, dir: cfg.Directory, store: cfg.Store, bal: balance.New(),
		maxStaleness: cfg.MaxStaleness, load: e.local.load}
	remote := &remoteReads{log: cfg.Logger, open: cfg.Remote, members: e.members}
	e.split = &splitScan{log: cfg.Logger, members: e.members, remote: remote, local: e.local}
	e.reads = &reader{log: cfg.Logger, members: e.members, local: e.local, remote: remote, split: e.split, leader: cfg.Store,
		leaderWait: cfg.LeaderWait, timeout: cfg.StatementTimeout, observe: cfg.ObserveRead, floor: e.restoreFloor}
	e.writes = &writer{log: cfg.Logger, store: cfg.Store, dir: cfg.Directory, forward: cfg.Remote, db: cfg.DB, pool: pool,
		// The leader checks a forwarded write against its own files
		// too: it evaluates an INSERT … SELECT FROM read_csv(…) itself.
		analyzer: analyze.New(pool).WithGuard(guard.Check), volatile: vol, now: cfg.Now,
		leaderWait: cfg.LeaderWait, voters: cfg.Voters, observe: cfg.ObserveWrite, changed: e.sessionChanged}
	e.txns = &txns{log: cfg.Logger, store: cfg.Store, dir: cfg.Directory, stageSize: cfg.StageBytes,
		writes: e.writes, reads: e.reads, sessions: e}
	if cfg.SessionIDs != nil && cfg.SessionAPI != nil {
		e.mig = newMigrator(e, cfg.SessionIDs, cfg.SessionAPI)
	}
	return e, nil
}

// poolIdle bounds the idle connections of an Executor's pool. A write
// holds one for a moment on the leader, so a few serve the writes of many
// clients; more in use at once connect anew.
const poolIdle = 4

// Close closes the connections the Executor keeps; the database stays
// open, and the Executor's owner closes it after this. Writes still being
// decided close theirs when they end.
func (e *Executor) Close() error {
	if e.mig != nil {
		e.mig.close()
	}
	return e.pool.Close()
}

// Reads returns how many reads this node has run itself, its own clients'
// and those routed here.
func (e *Executor) Reads() uint64 { return e.local.reads.Load() }

// Load returns the statements running or streaming results on this node.
func (e *Executor) Load() uint64 { return e.local.load() }

func loadVolatile(db *engine.DB) (sqltext.Volatile, error) {
	conn, err := db.Connect()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	names, err := conn.QueryStrings(context.Background(),
		"SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE stability = 'VOLATILE'")
	if err != nil {
		return nil, fmt.Errorf("list volatile functions: %w", err)
	}
	vol := sqltext.Volatile{}
	for _, n := range names {
		vol[n] = true
	}
	return vol, nil
}

// Query implements node.Executor. A read routed here by another node
// carries its requirement in the request's nodeapi.ReadHeader.
func (e *Executor) Query(ctx context.Context, s *node.Session, sql string) (node.Rows, error) {
	req, routed, err := nodeapiRead(ctx)
	if err != nil {
		return nil, err
	}
	if routed {
		return e.serveRouted(ctx, s, req, sql)
	}
	stmts, err := classify.Statements(sql)
	if err != nil {
		return nil, err
	}
	if err := requireRole(s, stmts); err != nil {
		return nil, err
	}
	if err := refuseNodeStatements(stmts); err != nil {
		return nil, err
	}
	if err := e.checkAccess(stmts); err != nil {
		return nil, err
	}
	st := e.state(s)
	if rows, ok, err := e.sessionLosses(st, stmts); ok {
		return rows, err
	}
	if len(stmts) == 1 {
		if rows, ok, err := e.routerSetting(st, stmts[0].Statement); ok {
			return rows, err
		}
	}
	reads, writes, control, settings := 0, 0, 0, 0
	for _, stmt := range stmts {
		switch stmt.Class {
		case classify.Read:
			reads++
		case classify.Begin, classify.Commit, classify.Rollback:
			control++
		case classify.Session:
			settings++
		default:
			writes++
		}
	}
	switch {
	case control > 0 || st.openTxn() != nil:
		return e.txns.run(ctx, s, st, stmts)
	case writes == 0 && settings > 0:
		// Settings belong to the client's session here, so a text that
		// changes one runs here whole; reads elsewhere replay it.
		rows, err := node.LocalExecutor{}.Query(ctx, s, sql)
		if err == nil {
			e.sessionStatements(st, stmts)
		}
		return rows, err
	case writes == 0:
		return e.reads.read(ctx, s, st, sql)
	case reads > 0:
		return nil, errors.New("duckraft: this text mixes reads and writes in one request; send them separately")
	}
	var entries []wal.Entry
	lexed := make([]sqltext.Statement, 0, len(stmts))
	for _, stmt := range stmts {
		entries = append(entries, wal.Statement{SQL: stmt.Text})
		lexed = append(lexed, stmt.Statement)
	}
	res, err := e.writes.write(ctx, st, newCommand(entries), lexed)
	if err != nil {
		return nil, err
	}
	return resultRows(res)
}

// serveRouted runs a read another node routed here, after the check it
// asks for.
func (e *Executor) serveRouted(ctx context.Context, s *node.Session, r nodeapi.Read, sql string) (node.Rows, error) {
	stmts, err := classify.Statements(sql)
	if err != nil {
		return nil, err
	}
	if len(stmts) != 1 || stmts[0].Class != classify.Read {
		return nil, nodeapi.Errorf(nodeapi.CodeBadRequest, "duckraft: a routed statement must be a single read")
	}
	// Members route reads in sessions of the node credential; a client
	// that sends the header itself is held to its own role.
	if err := requireRole(s, stmts); err != nil {
		return nil, err
	}
	// Held to this node's own files, which may lie elsewhere than the
	// routing node's.
	if err := e.checkAccess(stmts); err != nil {
		return nil, err
	}
	// The routing node's statement timeout is kept here too, so the read
	// ends where it runs even if that node is gone.
	return bounded(ctx, r.Timeout, func(ctx context.Context) (node.Rows, error) {
		switch {
		case r.Strong:
			return e.reads.strongLocal(ctx, s, sql)
		case r.At > 0:
			return e.split.pinnedRead(ctx, s, r.At, sql)
		}
		return e.local.after(ctx, s, r.After, sql)
	})
}

// ErrNodeStatement refuses a client statement that would reconfigure the
// node it runs on for every session there.
var ErrNodeStatement = errors.New("duckraft: this statement reconfigures the node it runs on for every session " +
	"(a GLOBAL setting, DuckDB's logging, its parser, its extensions or a persistent secret), which would make " +
	"that node differ from the others; " +
	"it is refused. Session settings (SET without GLOBAL) are allowed")

// ErrSettingRefused refuses a client's SET, RESET or PRAGMA of a setting
// outside routing/classify's allow-list of session settings.
var ErrSettingRefused = errors.New("duckraft: a client may change only session settings that cannot change " +
	"what replicated statements do (TimeZone, Calendar, search_path, schema, the progress bar, explain_output and " +
	"the duckraft_ settings; see docs/consistency.md); this setting is refused. DuckDB applies many settings to " +
	"every connection of a node, replication's included, and the others would give this session reads and writes " +
	"that disagree. Node resources are duckraftd's flags (--threads, --memory-limit)")

// refuseNodeStatements refuses a text holding a classify.Node or
// classify.Refused statement.
func refuseNodeStatements(stmts []classify.Statement) error {
	for _, stmt := range stmts {
		switch stmt.Class {
		case classify.Node:
			return fmt.Errorf("%w: %s", ErrNodeStatement, stmt.Text)
		case classify.Refused:
			return fmt.Errorf("%w: %s", ErrSettingRefused, stmt.Text)
		}
	}
	return nil
}

// Append implements node.Executor.
func (e *Executor) Append(ctx context.Context, s *node.Session, schema []string, table string, chunk *wire.DataChunk) error {
	if err := s.Require(tokens.Write, "APPEND to "+strings.Join(append(schema[:len(schema):len(schema)], table), ".")); err != nil {
		return err
	}
	a, err := appendEntry(schema, table, chunk)
	if err != nil {
		return err
	}
	st := e.state(s)
	if err := st.appendLoss(); err != nil {
		return err
	}
	if ok, err := e.txns.appendToTxn(st, a, uint64(chunk.Rows)); ok || err != nil {
		return err
	}
	_, err = e.writes.write(ctx, st, newCommand([]wal.Entry{a}), nil)
	return err
}

// appendEntry is the log entry that appends chunk to table in the schema
// at path schema.
func appendEntry(schema []string, table string, chunk *wire.DataChunk) (wal.Append, error) {
	if len(schema) == 0 {
		return wal.Append{}, fmt.Errorf("append to %s: no schema", table)
	}
	enc, err := wire.AppendDataChunk(nil, chunk, wire.Q3)
	if err != nil {
		return wal.Append{}, fmt.Errorf("append to %s.%s: %w", strings.Join(schema, "."), table, err)
	}
	name, parents := splitSchemaPath(schema)
	return wal.Append{Schema: name, Parents: parents, Table: table, Chunk: enc}, nil
}

// splitSchemaPath splits a schema's path into the schema's own name and
// the schemas it is nested in (nil for a top-level one), as wal.Append and
// wal.Staged name it.
func splitSchemaPath(path []string) (string, []string) {
	n := len(path) - 1
	if n == 0 {
		return path[0], nil
	}
	return path[n], path[:n:n]
}

// InTransaction implements node.Executor: the session's transaction is the
// one the router collects until COMMIT.
func (e *Executor) InTransaction(s *node.Session) bool {
	st := e.state(s)
	return st.openTxn() != nil || st.appendLoss() != nil
}

// EndSession implements node.SessionEnder: the session's sessions on other
// nodes end with it.
func (e *Executor) EndSession(s *node.Session) {
	if st, ok := s.Value(stateKey{}).(*sessionState); ok {
		if e.mig != nil {
			e.mig.release(st)
		}
		st.closeRemotes()
		if t := st.openTxn(); t != nil && t.stager != nil {
			st.setTxn(nil)
			go e.txns.unstage(st, t)
		}
	}
}
