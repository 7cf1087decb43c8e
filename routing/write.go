package routing

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/sqlquote"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/routing/analyze"
	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/wal"
)

// errLeaderChanged marks a forwarded write abandoned because another node
// became leader while it waited; it is retried there with the same key.
var errLeaderChanged = errors.New("duckraft: the leader changed while a write was forwarded to it")

// newCommand is a client write as the leader receives it: its statements
// and appends in client order, as they came (the leader makes them
// deterministic), under a fresh idempotency key that makes a retry safe.
func newCommand(entries []wal.Entry) wal.Command {
	key := make([]byte, 16)
	rand.Read(key)
	return wal.Command{Key: key, Entry: joinEntries(entries)}
}

// joinEntries is the one entry of a command holding entries: the entry
// itself when there is one, else a Txn of them all. splitEntries undoes it.
func joinEntries(entries []wal.Entry) wal.Entry {
	if len(entries) == 1 {
		return entries[0]
	}
	return wal.Txn{Entries: entries}
}

// splitEntries returns the entries of a command's entry: a Txn's, or the
// entry alone.
func splitEntries(e wal.Entry) []wal.Entry {
	if txn, ok := e.(wal.Txn); ok {
		return txn.Entries
	}
	return []wal.Entry{e}
}

// leaderStore is what writes need of replication: who leads and, on the
// leader, proving and proposing a command.
type leaderStore interface {
	IsLeader() bool
	LeaderID() string
	// Prove runs cmd on the leader without keeping its effects, before
	// it is proposed (Store.Prove).
	Prove(ctx context.Context, cmd wal.Command, texts []sqltext.Statement) error
	Execute(ctx context.Context, cmd wal.Command) (*wal.Result, error)
}

// leaderForwarder forwards a command to the leader's write endpoint
// (Remote.Write).
type leaderForwarder interface {
	Write(ctx context.Context, addr string, cmd wal.Command) (*wal.Result, error)
}

// writer sends a client's writes through the leader: on the leader it
// makes each statement deterministic (routing/analyze), proves and
// proposes the command; elsewhere it forwards the command to the leader,
// and retries it under its idempotency key across leader changes.
type writer struct {
	log   *slog.Logger
	store leaderStore
	// dir finds the leader's address and the engines the nodes embed;
	// nil in tests with no other node.
	dir     Directory
	forward leaderForwarder
	// db is this node's database: its DuckDB version, and the tables a
	// materialized INSERT resolves to. The analyzer and the
	// materializer take their connections from pool.
	db       *engine.DB
	pool     *engine.Pool
	analyzer *analyze.Analyzer
	volatile sqltext.Volatile
	now      func() time.Time
	// leaderWait bounds the retries of a write (Config.LeaderWait).
	leaderWait time.Duration
	// voters is Config.Voters, observe Config.ObserveWrite; either may
	// be nil.
	voters  func() int
	observe func(err error)
	// changed tells the other nodes of a session's changed state
	// (Executor.sessionChanged, migrate.go).
	changed func(st *sessionState)
}

// write applies cmd through the leader, retrying with the same idempotency
// key across leader changes so that it applies once. lexed holds the
// command's statements as this node lexed them from the client's text, in
// the order of its Statement entries (see lexedStatement), or is nil: a
// leader here reads them as they are, and a leader elsewhere receives the
// text and lexes it once.
func (w *writer) write(ctx context.Context, st *sessionState, cmd wal.Command, lexed []sqltext.Statement) (*wal.Result, error) {
	keyed := st.useWriteKey(&cmd)
	res, err := w.writeRetrying(ctx, st, cmd, lexed)
	if keyed {
		// The other nodes learn that the key was used before the
		// write is answered: a node that adopts the session must not
		// give it to the session's next write.
		w.changed(st)
	}
	if w.observe != nil {
		w.observe(err)
	}
	return res, err
}

// writeRetrying is write without its observation. Once an attempt may have
// entered the log, the write ends applied or with an UnknownOutcomeError,
// never with a later attempt's refusal: that would call failed a write
// that may still apply.
func (w *writer) writeRetrying(ctx context.Context, st *sessionState, cmd wal.Command, lexed []sqltext.Statement) (*wal.Result, error) {
	deadline := time.Now().Add(w.leaderWait)
	var logged error
	fail := func(err error) (*wal.Result, error) {
		if logged == nil && inLog(err) {
			logged = err
		}
		if logged == nil && errors.Is(err, replication.ErrClosed) {
			return nil, ErrShuttingDown
		}
		if logged != nil {
			var uo *UnknownOutcomeError
			if errors.As(err, &uo) {
				return nil, err
			}
			if !inLog(err) {
				err = fmt.Errorf("%w (a later attempt: %v)", logged, err)
			}
			return nil, &UnknownOutcomeError{Key: cmd.Key, Err: err}
		}
		return nil, err
	}
	for {
		var res *wal.Result
		var err error
		leader := w.store.LeaderID()
		if w.store.IsLeader() {
			res, err = w.applyOnLeader(ctx, cmd, lexed)
		} else if addr, ok := w.leaderAddr(); ok {
			res, err = w.forwardWrite(ctx, addr, cmd)
		} else {
			err = w.noQuorum()
		}
		if err == nil {
			st.wrote(res.Index)
			return res, nil
		}
		if logged == nil && inLog(err) {
			logged = err
		}
		if !retryableWrite(err) || time.Now().After(deadline) {
			return fail(err)
		}
		if err := awaitLeaderChange(ctx, w.store, leader); err != nil {
			return fail(err)
		}
	}
}

// retryPause is the longest pause between the attempts of a write (or of
// asking for the leader's read index) that found no leader, or one that
// could not take it: a leader that answered not_leader or apply_stalled
// may take the next attempt without a change this node sees. A variable
// for the tests.
var retryPause = 100 * time.Millisecond

// leaderPoll is how often such a pause checks whether Raft named another
// leader (an atomic read), so that the attempt after an election goes out
// as soon as this node knows the winner.
const leaderPoll = 5 * time.Millisecond

// awaitLeaderChange pauses before the next attempt: until the leader this
// node knows is another than seen (a new one elected, or the old one
// given up, after which the pause starts again), at most retryPause, or
// until ctx ends.
func awaitLeaderChange(ctx context.Context, store interface{ LeaderID() string }, seen string) error {
	pause := time.NewTimer(retryPause)
	defer pause.Stop()
	poll := time.NewTicker(leaderPoll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-pause.C:
			return nil
		case <-poll.C:
			if store.LeaderID() != seen {
				return nil
			}
		}
	}
}

// writeRetries are the errors on which a write is sent again with the same
// key: it reached no leader, the leader lost leadership before its outcome
// was known, or the leader's applier refused it before it entered the log
// (replication.ErrHalted is a kind of outcome.ErrApplyStalled). The
// sentinels hold for this node's own errors and for a leader's answer
// alike (node/outcome).
var writeRetries = []error{outcome.ErrNotLeader, outcome.ErrUnknownOutcome, outcome.ErrApplyStalled,
	nodeapi.ErrUnreachable, errLeaderChanged}

// retryableWrite reports whether a write may be sent again with the same
// key (writeRetries).
func retryableWrite(err error) bool { return isAny(err, writeRetries) }

// isAny reports whether err wraps one of targets.
func isAny(err error, targets []error) bool {
	return slices.ContainsFunc(targets, func(t error) bool { return errors.Is(err, t) })
}

// forwardWrite hands cmd to the leader at addr, and gives up on it as soon
// as this node learns of another leader: a frozen or cut-off leader never
// answers, and the retry is safe because it carries the same idempotency
// key.
func (w *writer) forwardWrite(ctx context.Context, addr string, cmd wal.Command) (*wal.Result, error) {
	leader := w.store.LeaderID()
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
				if id := w.store.LeaderID(); id != leader {
					cancel()
					return
				}
			}
		}
	}()
	res, err := w.forward.Write(fctx, addr, cmd)
	switch {
	case err != nil && ctx.Err() == nil && fctx.Err() != nil:
		return nil, fmt.Errorf("%w (from %s)", errLeaderChanged, leader)
	case errors.Is(err, nodeapi.ErrUnreachable):
		return nil, fmt.Errorf("duckraft: forwarding the write to the leader %s failed: %w", leader, err)
	}
	return res, err
}

// leaderAddr is the Quack address of the leader, as gossip has it.
func (w *writer) leaderAddr() (string, bool) {
	id := w.store.LeaderID()
	if id == "" || w.dir == nil {
		return "", false
	}
	return w.dir.QuackAddr(id)
}

// WriteHandler serves nodeapi.WritePath: writes other nodes forward to this
// one while it leads.
func (e *Executor) WriteHandler() http.Handler {
	return nodeapi.WriteHandler(e.cfg.NodeCredential, e.writes.applyForwarded)
}

// applyForwarded applies a forwarded write, answering with the codes the
// forwarding node retries on.
func (w *writer) applyForwarded(ctx context.Context, cmd wal.Command) (*wal.Result, error) {
	if !w.store.IsLeader() {
		return nil, replication.ErrNotLeader
	}
	res, err := w.applyOnLeader(ctx, cmd, nil)
	return res, APIError(err)
}

// APIError is err as this node answers another with it. An error that
// wraps one of outcome's sentinels (replication's ErrNotLeader, …) is
// returned unchanged: the answer carries the sentinel's code (outcome.Of),
// which tells the node that asked whether to retry. A DuckDB error
// becomes CodeFailed with its exception type and raw message, so the node
// that asked answers its client as this one would. Other errors are
// returned unchanged.
func APIError(err error) error {
	if err == nil || outcome.Of(err) != "" {
		return err
	}
	if typ := engine.ExceptionType(err); typ != "" {
		return &nodeapi.Error{Code: nodeapi.CodeFailed, Message: engine.RawMessage(err), Type: typ}
	}
	return err
}

// applyOnLeader makes each statement of cmd deterministic with the
// leader's clock, as the lexer's rules and DuckDB's binder decide
// (routing/analyze), and proposes the result as one command. Each
// statement is lexed once: lexed holds those the client's node lexed (see
// write), the others are lexed here; the proof reads the statements it
// proposes as the analysis lexed them.
func (w *writer) applyOnLeader(ctx context.Context, cmd wal.Command, lexed []sqltext.Statement) (*wal.Result, error) {
	now := w.now()
	var entries []wal.Entry
	// texts are the proposed statements as lexed, at their entries'
	// places (Store.Prove); the zero Statement stands for other entries.
	var texts []sqltext.Statement
	statements := 0
	// The command is proved (Store.Prove) when one of its statements is
	// heavy and every entry is safe to run twice: a statement the
	// analysis cleared (no sequence), or an append.
	prove, proved := false, 0
	for _, entry := range splitEntries(cmd.Entry) {
		switch entry := entry.(type) {
		case wal.Append:
			// An append to a nested schema is encoded as older builds
			// cannot decode.
			if err := w.mixedEngines(len(entry.Parents) == 0); err != nil {
				return nil, err
			}
			proved++
			entries = append(entries, entry)
		case wal.Statement:
			if len(entry.Params) > 0 {
				return nil, errors.New("duckraft: a forwarded statement carries no parameters")
			}
			stmt := lexedStatement(lexed, statements, entry.SQL)
			statements++
			if err := w.mixedEngines(stmt.LiteralInsert()); err != nil {
				return nil, err
			}
			plan, text, err := w.analyzer.Decide(ctx, stmt, now, w.volatile, w.log)
			if err != nil {
				return nil, err
			}
			if plan.Materialize == nil {
				prove = prove || plan.Prove
				if plan.Prove || plan.Rerunnable {
					proved++
				}
				texts = append(texts, make([]sqltext.Statement, len(entries)-len(texts))...)
				texts = append(texts, text)
				entries = append(entries, wal.Statement{SQL: plan.SQL, Returning: true})
				continue
			}
			mat, err := w.materialize(ctx, plan.Materialize)
			if err != nil {
				return nil, err
			}
			entries = append(entries, mat...)
		case wal.Stage, wal.Staged, wal.Unstage:
			// Data and the moves of data that staging sends (stagesend.go),
			// computed nowhere; only builds that gossip staging get them.
			entries = append(entries, entry)
		default:
			return nil, fmt.Errorf("duckraft: a client write holds statements, appends and staged rows, not a %v entry", entry.Kind())
		}
	}
	out := wal.Command{Timestamp: now.UnixMicro(), Key: cmd.Key, Entry: joinEntries(entries)}
	if prove && proved == len(entries) {
		if err := w.store.Prove(ctx, out, texts); err != nil {
			return nil, err
		}
	}
	return w.store.Execute(ctx, out)
}

// lexedStatement returns the command's statement number i, whose text is
// sql: lexed[i] when the client's node lexed it, else sql lexed now.
func lexedStatement(lexed []sqltext.Statement, i int, sql string) sqltext.Statement {
	if i < len(lexed) && lexed[i].Text == sql {
		return lexed[i]
	}
	return sqltext.Parse(sql)
}

// ErrMixedEngines refuses a write while the cluster's nodes embed
// different DuckDB versions (a rolling upgrade): only writes that compute
// nothing are accepted then.
var ErrMixedEngines = errors.New("duckraft: the nodes run different DuckDB versions")

// mixedEngines refuses a write unless every live data node embeds this
// node's DuckDB version or the write computes nothing (an INSERT … VALUES
// of literals, an append to a schema of the database). DuckDB 1.5 and
// 2.0 compute some statements differently (1 // 0 is NULL in 1.5 and an
// error in 2.0; 'abc' ~ 'b' false and true; x -> x + 1 a lambda and an
// error), and every node applies a statement with its own engine, so any
// other write could leave the versions with different data. Appends carry
// data, not expressions, and pass.
func (w *writer) mixedEngines(computesNothing bool) error {
	if computesNothing || w.dir == nil || w.db == nil {
		return nil
	}
	own := w.db.Version()
	for _, p := range w.dir.Peers() {
		if p.Engine == own {
			continue
		}
		other := p.Engine
		if other == "" {
			other = "an older build (DuckDB v1.5.6)"
		}
		return fmt.Errorf("%w: this leader embeds DuckDB %s and %s %s; until every node runs one version (an upgrade is in progress), "+
			"only INSERT … VALUES of literals and appends are accepted, because other statements may compute differently on each",
			ErrMixedEngines, own, p.ID, other)
	}
	return nil
}

// materialize evaluates a volatile query once, here on the leader, and
// returns its rows as appends that every node applies identically. Appends
// carry whole rows, so an INSERT column list must name every column.
func (w *writer) materialize(ctx context.Context, m *sqltext.Materialize) ([]wal.Entry, error) {
	conn, err := w.pool.Get()
	if err != nil {
		return nil, fmt.Errorf("materialize: %w", err)
	}
	defer w.pool.Put(conn)
	schema, table, err := w.db.ResolveTable(m.Table)
	if err != nil {
		return nil, fmt.Errorf("cannot insert into %w", err)
	}
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
		a, err := appendEntry(schema, table, c)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
}

// fullRowQuery reorders the columns of query, which yields the listed
// columns, into the table's column order.
func fullRowQuery(ctx context.Context, conn *engine.Conn, schema []string, table string, columns []string, query string) (string, error) {
	tableCols, err := conn.QueryStrings(ctx, "SELECT column_name FROM (DESCRIBE "+sqlquote.Path(append(append([]string{conn.Catalog()}, schema...), table))+")")
	if err != nil {
		return "", err
	}
	pos := map[string]int{}
	for i, col := range columns {
		parts := sqlquote.SplitPath(col)
		pos[strings.ToLower(parts[len(parts)-1])] = i + 1
	}
	if len(tableCols) == 0 || len(pos) != len(tableCols) {
		return "", fmt.Errorf("%w: an INSERT with volatile values into %s.%s must list every column of the table (or none)",
			sqltext.ErrNondeterministic, strings.Join(schema, "."), table)
	}
	sel := make([]string, len(tableCols))
	for i, col := range tableCols {
		p, ok := pos[strings.ToLower(col)]
		if !ok {
			return "", fmt.Errorf("%w: the INSERT column list misses column %s of %s.%s", sqltext.ErrNondeterministic, col, strings.Join(schema, "."), table)
		}
		sel[i] = fmt.Sprintf("#%d", p)
	}
	return fmt.Sprintf("SELECT %s FROM (%s)", strings.Join(sel, ", "), query), nil
}
