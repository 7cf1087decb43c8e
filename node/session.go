package node

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/node/wire"
)

// Session is one Quack connection: a DuckDB connection of its own (so SET,
// temporary tables and transactions are per session), the generation the
// client speaks, and at most one active result.
type Session struct {
	id   string
	gen  wire.Generation
	conn *engine.Conn
	// client is the address the session was opened from; member is set
	// for a cluster's member's session (Config.MemberCredential), which
	// the session caps do not count.
	client string
	member bool
	// principal is the client its statements count for in the
	// admission gate (principal.go).
	principal string
	// inflate is the session's budget of decompressed request bytes
	// (Config.MaxSessionDecompressedBytes).
	inflate *byteBudget
	// auth is the credential the session opened with, which the server
	// checks again on every request (Authenticator); role is what it
	// allowed at the last check.
	auth string

	// ctx lives as long as the session; statements run under it because
	// their results outlive the request that started them.
	ctx    context.Context
	cancel context.CancelFunc

	// exec serialises statements and appends on the connection.
	exec sync.Mutex

	mu     sync.Mutex
	role   tokens.Role
	result *result
	// running is the statement whose PREPARE is in progress: a CANCEL
	// that arrives before it has a result interrupts it through its
	// context.
	running  *statement
	lastUsed time.Time
	lease    time.Duration
	values   map[any]any
	// streams are the Q3 insert streams this session has open, by id.
	streams map[string]*dataStream
}

// NewSession returns a Q1 session of role on conn that no server holds, for
// running an Executor in process: routing's tests connect Executors
// through an in-memory network this way. The caller closes conn when done.
func NewSession(id string, conn *engine.Conn, role tokens.Role) *Session {
	ctx, cancel := context.WithCancel(context.Background())
	return &Session{id: id, gen: wire.Q1, conn: conn, ctx: ctx, cancel: cancel, lastUsed: time.Now(), lease: DefaultIdleTimeout, role: role}
}

// Role returns what the session's token allows, as of its latest request.
func (s *Session) Role() tokens.Role {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.role
}

func (s *Session) setRole(r tokens.Role) {
	s.mu.Lock()
	s.role = r
	s.mu.Unlock()
}

// ID returns the session id the client puts in every message header.
func (s *Session) ID() string { return s.id }

// Generation returns the Quack generation the client negotiated.
func (s *Session) Generation() wire.Generation { return s.gen }

// Conn returns the session's own DuckDB connection.
func (s *Session) Conn() *engine.Conn { return s.conn }

// Value returns what SetValue stored under key; an Executor keeps its
// per-session state (for example the index of the last write) here.
func (s *Session) Value(key any) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.values[key]
}

// SetValue stores v under key for the life of the session.
func (s *Session) SetValue(key, v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.values == nil {
		s.values = make(map[any]any)
	}
	s.values[key] = v
}

func (s *Session) touch(now time.Time) {
	s.mu.Lock()
	s.lastUsed = now
	s.mu.Unlock()
}

func (s *Session) expired(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease > 0 && now.Sub(s.lastUsed) > s.lease
}

// statement is one statement's context, from its PREPARE until its result
// is closed. Everything the statement does runs under ctx: the local query
// (engine.Conn interrupts on its cancellation), a routed read's request to
// another node, every share of a split scan. A CANCEL, the client dropping
// the PREPARE's request, or a replacement of a result still running
// cancels it with ErrInterrupted; its normal end with errStatementEnded,
// after its rows are closed.
type statement struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	// uuid is the query uuid the client named in its PREPARE, if known
	// (Q3, and 1.5-branch clients that send one); a CANCEL must name it
	// or the wildcard.
	uuid  wire.Hugeint
	known bool
}

// errStatementEnded is the cause of a statement context's cancellation
// when the statement ended normally: nothing is interrupted by it.
var errStatementEnded = errors.New("statement ended")

// beginStatement starts the context of a statement and makes it the
// running one. Callers hold s.exec.
func (s *Session) beginStatement(uuid wire.Hugeint, known bool) *statement {
	ctx, cancel := context.WithCancelCause(s.ctx)
	st := &statement{ctx: ctx, cancel: cancel, uuid: uuid, known: known}
	s.mu.Lock()
	s.running = st
	s.mu.Unlock()
	return st
}

// settleStatement records that st's PREPARE has answered: a CANCEL from now
// on is for its result, if it has one.
func (s *Session) settleStatement(st *statement) {
	s.mu.Lock()
	if s.running == st {
		s.running = nil
	}
	s.mu.Unlock()
}

func (s *Session) runningStatement() *statement {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// interrupt cancels st's context, which interrupts whatever it runs, here
// and on other nodes; it does nothing once st has ended.
func (st *statement) interrupt() { st.cancel(ErrInterrupted) }

// end releases st's context after its normal end.
func (st *statement) end() { st.cancel(errStatementEnded) }

// interrupted reports whether st was interrupted rather than ended.
func (st *statement) interrupted() bool {
	return errors.Is(context.Cause(st.ctx), ErrInterrupted)
}

func (s *Session) currentResult() *result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.result
}

// replaceResult makes r the active result and stops the previous one,
// interrupting its query if it is still running. Callers hold s.exec.
func (s *Session) replaceResult(r *result) {
	s.mu.Lock()
	old := s.result
	s.result = r
	s.mu.Unlock()
	if old != nil {
		if old.running() {
			// A routed read streams from another node: its context
			// tells that node to stop too.
			old.interrupt()
			s.conn.Interrupt()
		}
		old.close()
	}
}

// close ends the session: its query is interrupted and its connection
// closed, which rolls back an open transaction.
func (s *Session) close() {
	s.cancel()
	s.conn.Interrupt()
	s.exec.Lock()
	defer s.exec.Unlock()
	s.replaceResult(nil)
	s.conn.Close()
}
