package node

import (
	"context"
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
	// client is the address the session was opened from; capped says
	// whether it counts toward that address's session cap.
	client string
	capped bool
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

	mu       sync.Mutex
	role     tokens.Role
	result   *result
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
