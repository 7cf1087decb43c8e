// Package routing decides where each statement runs: writes go through the
// Raft leader; reads run on the live node that serves the session's
// consistency level at the least cost (read replicas first), and large scans
// may be split over several nodes pinned at one log index.
package routing

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/wal"
)

// Store is what routing needs of the replication store.
type Store interface {
	Execute(ctx context.Context, cmd wal.Command) (*wal.Result, error)
	IsLeader() bool
	LeaderID() string
	AppliedIndex() uint64
	WaitForApplied(ctx context.Context, idx uint64) error
	ReadIndex(ctx context.Context) (uint64, error)
}

// Config configures an Executor.
type Config struct {
	// ID is this node's id, as in gossip.
	ID string
	// Router is set on a data-less router: it runs no read itself.
	Router    bool
	Store     Store
	Directory Directory
	// DB is this node's database, used to evaluate volatile expressions on
	// the leader before they are replicated as data.
	DB *engine.DB
	// Token authenticates forwarded requests to other nodes.
	Token string
	// Consistency is the default read consistency of new sessions.
	Consistency Level
	// SessionWait bounds how long a routed read waits for its node to
	// apply the index it needs before the router tries another node.
	SessionWait time.Duration
	// MaxStaleness is the lag a bounded read tolerates.
	MaxStaleness uint64
	// LeaderWait bounds how long a write waits for a leader to be known.
	LeaderWait time.Duration
	// Now is the clock the leader stamps statements with (now(),
	// current_date, …); nil is time.Now. Tests shift it to fake clock
	// jumps.
	Now    func() time.Time
	Logger *slog.Logger
}

// Executor implements node.Executor for a cluster member.
type Executor struct {
	cfg      Config
	log      *slog.Logger
	volatile wal.Volatile
	fwd      *forwarder
	bal      *balancer

	// reads counts reads run on this node; active counts statements
	// running or streaming here, which gossip reports as load.
	reads  atomic.Uint64
	active atomic.Int64

	mu          sync.Mutex
	withRemotes map[*sessionState]struct{}
	lastSweep   time.Time
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
		cfg.MaxStaleness = 1000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	vol, err := loadVolatile(cfg.DB)
	if err != nil {
		return nil, err
	}
	return &Executor{cfg: cfg, log: cfg.Logger, volatile: vol, fwd: newForwarder(cfg.Token), bal: newBalancer(),
		withRemotes: map[*sessionState]struct{}{}}, nil
}

// Reads returns how many reads this node has run itself, its own clients'
// and those routed here.
func (e *Executor) Reads() uint64 { return e.reads.Load() }

// Load returns the statements running or streaming results on this node.
func (e *Executor) Load() uint64 { return uint64(max(0, e.active.Load())) }

func loadVolatile(db *engine.DB) (wal.Volatile, error) {
	conn, err := db.Connect()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	res, err := conn.Query(context.Background(),
		"SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE stability = 'VOLATILE'")
	if err != nil {
		return nil, fmt.Errorf("list volatile functions: %w", err)
	}
	defer res.Close()
	vol := wal.Volatile{}
	for {
		c, err := res.Next()
		if err != nil {
			return nil, fmt.Errorf("list volatile functions: %w", err)
		}
		if c == nil {
			return vol, nil
		}
		for i := 0; i < c.Rows; i++ {
			if v, err := c.Columns[0].Value(i); err == nil {
				if s, ok := v.(string); ok {
					vol[s] = true
				}
			}
		}
	}
}

// sessionState is what the router remembers per Quack session.
type sessionState struct {
	mu          sync.Mutex
	consistency Level
	// lastIndex is the log index of the session's last write: its reads
	// run only where that index is applied.
	lastIndex uint64
	// split is how many nodes a splittable scan is spread over (0: off).
	split int
	// txn collects the writes of an explicit transaction until COMMIT.
	txn *pendingTxn
	// home is the node the session's reads stick to while it qualifies,
	// for cache locality.
	home string
	// remotes are the session's Quack sessions on other nodes, by id.
	remotes map[string]*remoteConn
	// settings are the statements that changed the session's settings,
	// replayed in remote sessions (settings.go); settingsVersion counts
	// their changes.
	settings        []string
	settingsVersion uint64
	used            time.Time
	busy            atomic.Int64
}

type pendingTxn struct {
	req writeRequest
}

type stateKey struct{}

func (e *Executor) state(s *node.Session) *sessionState {
	if st, ok := s.Value(stateKey{}).(*sessionState); ok {
		return st
	}
	// A new session starts at what this node knows to be committed, so a
	// client that connects after another one's write was acknowledged
	// reads it, wherever its reads run.
	st := &sessionState{consistency: e.cfg.Consistency}
	if c, ok := e.cfg.Store.(interface{ CommitIndex() uint64 }); ok {
		st.lastIndex = c.CommitIndex()
	}
	s.SetValue(stateKey{}, st)
	return st
}

// Query implements node.Executor.
func (e *Executor) Query(ctx context.Context, s *node.Session, sql string) (node.Rows, error) {
	if r, rest, ok := parseRouted(sql); ok {
		return e.serveRouted(ctx, s, r, rest)
	}
	stmts, err := Classify(sql)
	if err != nil {
		return nil, err
	}
	st := e.state(s)
	if len(stmts) == 1 {
		if level, ok, err := consistencySetting(stmts[0].SQL); ok {
			if err != nil {
				return nil, err
			}
			st.mu.Lock()
			st.consistency = level
			st.mu.Unlock()
			return successRows(), nil
		}
		if n, ok, err := splitSetting(stmts[0].SQL); ok {
			if err != nil {
				return nil, err
			}
			st.mu.Lock()
			st.split = n
			st.mu.Unlock()
			return successRows(), nil
		}
	}
	reads, writes, control, settings := 0, 0, 0, 0
	for _, st := range stmts {
		switch st.Class {
		case ClassRead:
			reads++
		case ClassTxnBegin, ClassTxnCommit, ClassTxnRollback:
			control++
		case ClassSession:
			settings++
		default:
			writes++
		}
	}
	st.mu.Lock()
	inTxn := st.txn != nil
	st.mu.Unlock()
	switch {
	case control > 0 || inTxn:
		return e.transaction(ctx, s, st, stmts)
	case writes == 0 && settings > 0:
		// Settings belong to the client's session here, so a text that
		// changes one runs here whole; reads elsewhere replay it.
		rows, err := node.LocalExecutor{}.Query(ctx, s, sql)
		if err == nil {
			st.rememberSettings(followingSettings(stmts))
		}
		return rows, err
	case writes == 0:
		return e.read(ctx, s, st, sql)
	case reads > 0:
		return nil, errors.New("duckraft: this text mixes reads and writes in one request; send them separately")
	}
	req := writeRequest{Key: newKey()}
	for _, stmt := range stmts {
		req.Statements = append(req.Statements, stmt.SQL)
		req.Order = append(req.Order, true)
	}
	res, err := e.write(ctx, st, req)
	if err != nil {
		return nil, err
	}
	return resultRows(res)
}

// Append implements node.Executor.
func (e *Executor) Append(ctx context.Context, s *node.Session, schema, table string, chunk *wire.DataChunk) error {
	enc, err := wire.AppendDataChunk(nil, chunk, wire.Q3)
	if err != nil {
		return fmt.Errorf("append to %s.%s: %w", schema, table, err)
	}
	st := e.state(s)
	a := appendRequest{Schema: schema, Table: table, Chunk: enc}
	st.mu.Lock()
	if st.txn != nil {
		st.txn.req.Appends = append(st.txn.req.Appends, a)
		st.txn.req.Order = append(st.txn.req.Order, false)
		st.mu.Unlock()
		return nil
	}
	st.mu.Unlock()
	_, err = e.write(ctx, st, writeRequest{Key: newKey(), Appends: []appendRequest{a}, Order: []bool{false}})
	return err
}

func newKey() []byte {
	k := make([]byte, 16)
	rand.Read(k)
	return k
}

// write applies req through the leader, retrying with the same idempotency
// key across leader changes so that it applies once.
func (e *Executor) write(ctx context.Context, st *sessionState, req writeRequest) (*wal.Result, error) {
	deadline := time.Now().Add(e.cfg.LeaderWait)
	for {
		var res *wal.Result
		var err error
		if e.cfg.Store.IsLeader() {
			res, err = e.applyOnLeader(ctx, req)
		} else if addr, ok := e.leaderQuackAddr(); ok {
			res, err = e.forwardWrite(ctx, addr, req)
		} else {
			err = replication.ErrNotLeader
		}
		if err == nil {
			st.mu.Lock()
			st.lastIndex = max(st.lastIndex, res.Index)
			st.mu.Unlock()
			return res, nil
		}
		if !retryable(err) || time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// forwardWrite hands req to the leader at addr, and gives up on it as soon
// as this node learns of another leader: a frozen or cut-off leader never
// answers, and the retry is safe because it carries the same idempotency
// key.
func (e *Executor) forwardWrite(ctx context.Context, addr string, req writeRequest) (*wal.Result, error) {
	leader := e.cfg.Store.LeaderID()
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if id := e.cfg.Store.LeaderID(); id != leader {
					cancel()
					return
				}
			}
		}
	}()
	res, err := e.fwd.write(fctx, addr, req)
	if err != nil && ctx.Err() == nil && fctx.Err() != nil {
		return nil, fmt.Errorf("%w: leader changed from %s while writing", errForward, leader)
	}
	return res, err
}

func retryable(err error) bool {
	return errors.Is(err, replication.ErrNotLeader) || errors.Is(err, replication.ErrUnknownOutcome) ||
		errors.Is(err, errForward)
}

func (e *Executor) leaderQuackAddr() (string, bool) {
	id := e.cfg.Store.LeaderID()
	if id == "" || e.cfg.Directory == nil {
		return "", false
	}
	return e.cfg.Directory.QuackAddr(id)
}

// applyOnLeader turns req into one command, making each statement
// deterministic with the leader's clock, and proposes it.
func (e *Executor) applyOnLeader(ctx context.Context, req writeRequest) (*wal.Result, error) {
	now := e.cfg.Now()
	var entries []wal.Entry
	stmts, apps := req.Statements, req.Appends
	for _, isStmt := range req.Order {
		if !isStmt {
			a := apps[0]
			apps = apps[1:]
			entries = append(entries, wal.Append{Schema: a.Schema, Table: a.Table, Chunk: a.Chunk})
			continue
		}
		plan, err := wal.Deterministic(stmts[0], now, e.volatile)
		stmts = stmts[1:]
		if err != nil {
			return nil, err
		}
		if plan.Materialize == nil {
			entries = append(entries, wal.Statement{SQL: plan.SQL, Returning: true})
			continue
		}
		mat, err := e.materialize(ctx, plan.Materialize)
		if err != nil {
			return nil, err
		}
		entries = append(entries, mat...)
	}
	cmd := wal.Command{Timestamp: now.UnixMicro(), Key: req.Key}
	if len(entries) == 1 {
		cmd.Entry = entries[0]
	} else {
		cmd.Entry = wal.Txn{Entries: entries}
	}
	return e.cfg.Store.Execute(ctx, cmd)
}

// materialize evaluates a volatile query once, here on the leader, and
// returns its rows as appends that every node applies identically. Appends
// carry whole rows, so an INSERT column list must name every column.
func (e *Executor) materialize(ctx context.Context, m *wal.Materialize) ([]wal.Entry, error) {
	conn, err := e.cfg.DB.Connect()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	schema, table := splitTableName(m.Table)
	query := m.Query
	if m.Columns != nil {
		if query, err = fullRowQuery(ctx, conn, schema, table, m.Columns, m.Query); err != nil {
			return nil, err
		}
	}
	res, err := conn.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	var out []wal.Entry
	for {
		c, err := res.Next()
		if err != nil {
			return nil, err
		}
		if c == nil {
			return out, nil
		}
		enc, err := wire.AppendDataChunk(nil, c, wire.Q3)
		if err != nil {
			return nil, err
		}
		out = append(out, wal.Append{Schema: schema, Table: table, Chunk: enc})
	}
}

// fullRowQuery reorders the columns of query, which yields the listed
// columns, into the table's column order.
func fullRowQuery(ctx context.Context, conn *engine.Conn, schema, table string, columns []string, query string) (string, error) {
	res, err := conn.Query(ctx, fmt.Sprintf(
		"SELECT column_name FROM duckdb_columns() WHERE schema_name = %s AND table_name = %s ORDER BY column_index",
		sqlString(schema), sqlString(table)))
	if err != nil {
		return "", err
	}
	defer res.Close()
	var tableCols []string
	for {
		c, err := res.Next()
		if err != nil {
			return "", err
		}
		if c == nil {
			break
		}
		for i := 0; i < c.Rows; i++ {
			v, _ := c.Columns[0].Value(i)
			s, _ := v.(string)
			tableCols = append(tableCols, s)
		}
	}
	pos := map[string]int{}
	for i, col := range columns {
		_, name := splitTableName(col)
		pos[strings.ToLower(name)] = i + 1
	}
	if len(tableCols) == 0 || len(pos) != len(tableCols) {
		return "", fmt.Errorf("%w: an INSERT with volatile values into %s.%s must list every column of the table (or none)",
			wal.ErrNondeterministic, schema, table)
	}
	sel := make([]string, len(tableCols))
	for i, col := range tableCols {
		p, ok := pos[strings.ToLower(col)]
		if !ok {
			return "", fmt.Errorf("%w: the INSERT column list misses column %s of %s.%s", wal.ErrNondeterministic, col, schema, table)
		}
		sel[i] = fmt.Sprintf("#%d", p)
	}
	return fmt.Sprintf("SELECT %s FROM (%s)", strings.Join(sel, ", "), query), nil
}

func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// splitTableName splits a possibly schema-qualified, possibly quoted table
// name; an unqualified name is in schema main.
func splitTableName(name string) (schema, table string) {
	var parts []string
	var cur strings.Builder
	quoted := false
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '"' && quoted && i+1 < len(name) && name[i+1] == '"':
			cur.WriteByte('"')
			i++
		case c == '"':
			quoted = !quoted
		case c == '.' && !quoted:
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	parts = append(parts, cur.String())
	if len(parts) == 1 {
		return "main", strings.TrimSpace(parts[0])
	}
	return strings.TrimSpace(parts[len(parts)-2]), strings.TrimSpace(parts[len(parts)-1])
}

// transaction handles BEGIN … COMMIT: writes are collected and applied as
// one Raft entry at COMMIT, so the transaction commits atomically on every
// node. Reads inside it see the committed state.
func (e *Executor) transaction(ctx context.Context, s *node.Session, st *sessionState, stmts []Statement) (node.Rows, error) {
	var last node.Rows
	for _, stmt := range stmts {
		if last != nil {
			last.Close()
			last = nil
		}
		st.mu.Lock()
		txn := st.txn
		st.mu.Unlock()
		switch stmt.Class {
		case ClassTxnBegin:
			if txn != nil {
				return nil, errors.New("TransactionContext Error: cannot start a transaction within a transaction")
			}
			st.mu.Lock()
			st.txn = &pendingTxn{req: writeRequest{Key: newKey()}}
			st.mu.Unlock()
			last = successRows()
		case ClassTxnCommit:
			if txn == nil {
				return nil, errors.New("TransactionContext Error: cannot commit - no transaction is active")
			}
			st.mu.Lock()
			st.txn = nil
			st.mu.Unlock()
			if len(txn.req.Order) > 0 {
				if _, err := e.write(ctx, st, txn.req); err != nil {
					return nil, err
				}
			}
			last = successRows()
		case ClassTxnRollback:
			if txn == nil {
				return nil, errors.New("TransactionContext Error: cannot rollback - no transaction is active")
			}
			st.mu.Lock()
			st.txn = nil
			st.mu.Unlock()
			last = successRows()
		case ClassRead:
			rows, err := e.read(ctx, s, st, stmt.SQL)
			if err != nil {
				return nil, err
			}
			last = rows
		case ClassSession:
			rows, err := node.LocalExecutor{}.Query(ctx, s, stmt.SQL)
			if err != nil {
				return nil, err
			}
			last = rows
		default:
			if txn == nil {
				res, err := e.write(ctx, st, writeRequest{Key: newKey(), Statements: []string{stmt.SQL}, Order: []bool{true}})
				if err != nil {
					return nil, err
				}
				rows, err := resultRows(res)
				if err != nil {
					return nil, err
				}
				last = rows
				continue
			}
			st.mu.Lock()
			txn.req.Statements = append(txn.req.Statements, stmt.SQL)
			txn.req.Order = append(txn.req.Order, true)
			st.mu.Unlock()
			last = countRows(nil)
		}
	}
	return last, nil
}
