package node

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/duckraft/duckraft/node/outcome"
)

// DefaultAdmissionWait is how long a client statement waits for its turn
// to run before it is refused (code busy): long enough for a few heavy
// statements ahead of it to end, short enough that an overloaded node says
// so rather than queue a statement for minutes. A shorter statement
// timeout ends the wait first.
const DefaultAdmissionWait = 30 * time.Second

// DefaultMaxRunningStatements is how many client statements run in DuckDB
// at once by default: twice the processors Go uses, and at least 4.
// DuckDB runs each statement on all its worker threads (one per core), so
// more at once add no throughput, only memory (each holds its own hash
// tables and sorts) and CPU taken from the applier; twice the cores keeps
// them busy while some statements wait between chunks, and the floor lets
// a small read pass beside a heavy one on a machine of one or two cores.
func DefaultMaxRunningStatements() int { return max(4, 2*runtime.GOMAXPROCS(0)) }

// DefaultStatementMemoryLimit is the operator_memory_limit of each client
// session when Config.StatementMemoryLimit is "": half of DuckDB's
// memory_limit shared by the statements that run at once
// (MaxRunningStatements), so that clients' sorts, hash tables and joins
// together spill to disk before they take more than half the memory the
// node's own work (applying the log) shares with them.
func DefaultStatementMemoryLimit(memoryLimit int64, running int) string {
	return strconv.FormatInt(max(memoryLimit/int64(2*max(running, 1)), 1<<20), 10) + "B"
}

// limitStatementMemory sets the client sessions' operator_memory_limit
// (Config.StatementMemoryLimit).
func (s *Server) limitStatementMemory() error {
	limit := s.cfg.StatementMemoryLimit
	switch limit {
	case "none":
		limit = ""
	case "":
		total, err := s.cfg.DB.MemoryLimit()
		if err != nil {
			return fmt.Errorf("node: DuckDB's memory limit: %w", err)
		}
		limit = DefaultStatementMemoryLimit(total, s.cfg.MaxRunningStatements)
	}
	if err := s.cfg.DB.SetClientMemoryLimit(limit); err != nil {
		return fmt.Errorf("node: statement memory limit: %w", err)
	}
	return nil
}

// DefaultMaxRunningStatementsPerClient is the share of the turns one
// client may hold at once by default: half of them (at least one), so that
// a client with many sessions, or one that pipelines, cannot take every
// turn, and a turn stays free for the others. Half the turns are as many
// statements as the processors at the default limit: one client still
// keeps every core busy.
func DefaultMaxRunningStatementsPerClient(running int) int { return max(1, running/2) }

// AdmissionStats is what the admission gate of client statements
// (Config.MaxRunningStatements) holds now and has done since the server
// started.
type AdmissionStats struct {
	// Limit is the most statements that run at once, PerClient the most
	// of one client's.
	Limit, PerClient int
	// Running are the statements holding a turn, Queued those waiting
	// for one; PeakRunning is the most that ever held one at once.
	Running, Queued, PeakRunning int
	// Clients are the clients holding or waiting for a turn.
	Clients int
	// Admitted counts the turns given, Refused the statements refused
	// after waiting the whole AdmissionWait (code busy), Abandoned those
	// whose context ended while they waited (a cancel, a statement
	// timeout, the client gone).
	Admitted, Refused, Abandoned uint64
}

// AdmissionStats returns the admission gate's state and counts.
func (s *Server) AdmissionStats() AdmissionStats { return s.gate.stats() }

// admission is a node-wide gate of client statements: at most limit hold
// a turn at once, and at most perClient of one client's (its principal,
// principal.go). The others wait, each at most wait and while its
// context lasts. A turn given back goes to the waiting client that holds
// the fewest turns, and among those to the one that got a turn the
// longest ago; a client's own statements get theirs in arrival order. So
// a bystander's statement gets the next turn given back however many
// statements other clients have queued. It is the Admitter of the
// database's client connections (engine.DB.SetAdmitter).
type admission struct {
	limit, perClient int
	wait             time.Duration

	mu      sync.Mutex
	running int
	// clients are the clients holding or waiting for a turn.
	clients map[string]*share
	queued  int
	// served counts the turns given, and orders the clients by when
	// they last got one; arrivals counts the clients that came.
	served, arrivals uint64
	st               AdmissionStats
}

// share is one client's part of the gate.
type share struct {
	held int
	// queue holds the client's waiters in arrival order.
	queue []*waiter
	// last is the served count when the client last got a turn (0:
	// never), and arrived orders those never served by arrival.
	last, arrived uint64
}

type waiter struct{ granted chan struct{} }

func newAdmission(limit, perClient int, wait time.Duration) *admission {
	return &admission{limit: limit, perClient: min(max(perClient, 1), limit), wait: wait, clients: make(map[string]*share)}
}

// Admit implements engine.Admitter. The statement counts for the client
// ctx names (withPrincipal).
func (a *admission) Admit(ctx context.Context) (func(), error) {
	p := principalOf(ctx)
	a.mu.Lock()
	c := a.clients[p]
	if c == nil {
		a.arrivals++
		c = &share{arrived: a.arrivals}
		a.clients[p] = c
	}
	// A turn free now is nobody's: the waiters are all past their
	// share (grantLocked gave the others one).
	if a.running < a.limit && c.held < a.perClient && len(c.queue) == 0 {
		a.grantLocked(c)
		a.mu.Unlock()
		return a.releaser(p), nil
	}
	w := &waiter{granted: make(chan struct{})}
	c.queue = append(c.queue, w)
	a.queued++
	a.mu.Unlock()

	timer := time.NewTimer(a.wait)
	defer timer.Stop()
	var err error
	select {
	case <-w.granted:
		return a.releaser(p), nil
	case <-ctx.Done():
		err = fmt.Errorf("the statement waited for its turn to run (at most %d run at once on this node): %w", a.limit, context.Cause(ctx))
	case <-timer.C:
		err = &errNoTurn{limit: a.limit, wait: a.wait}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-w.granted:
		// Granted as the wait ended: the turn is this statement's.
		return a.releaser(p), nil
	default:
	}
	for i, q := range c.queue {
		if q == w {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			a.queued--
			break
		}
	}
	a.forgetIdleLocked(p, c)
	if _, busy := err.(*errNoTurn); busy {
		a.st.Refused++
	} else {
		a.st.Abandoned++
	}
	return nil, err
}

// releaser returns the function that gives p's turn back, once.
func (a *admission) releaser(p string) func() {
	var once sync.Once
	return func() { once.Do(func() { a.release(p) }) }
}

// release gives a turn of p back, and the free turns to the waiters.
func (a *admission) release(p string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.clients[p]
	c.held--
	a.running--
	a.forgetIdleLocked(p, c)
	for a.running < a.limit {
		next := a.nextLocked()
		if next == nil {
			return
		}
		w := next.queue[0]
		next.queue[0] = nil
		next.queue = next.queue[1:]
		a.queued--
		a.grantLocked(next)
		close(w.granted)
	}
}

// nextLocked returns the client whose first waiter gets the next turn:
// of those waiting within their share, the one holding the fewest turns,
// then the one served longest ago; nil if none. The caller holds a.mu.
func (a *admission) nextLocked() *share {
	var best *share
	for _, c := range a.clients {
		if len(c.queue) == 0 || c.held >= a.perClient {
			continue
		}
		if best == nil || c.held < best.held ||
			c.held == best.held && (c.last < best.last || c.last == best.last && c.arrived < best.arrived) {
			best = c
		}
	}
	return best
}

// grantLocked gives c a turn. The caller holds a.mu.
func (a *admission) grantLocked(c *share) {
	a.running++
	c.held++
	a.served++
	c.last = a.served
	a.st.Admitted++
	a.st.PeakRunning = max(a.st.PeakRunning, a.running)
}

// forgetIdleLocked drops p's share once it holds and awaits nothing, so
// the map holds only the clients in the gate. The caller holds a.mu.
func (a *admission) forgetIdleLocked(p string, c *share) {
	if c.held == 0 && len(c.queue) == 0 {
		delete(a.clients, p)
	}
}

func (a *admission) stats() AdmissionStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.st
	st.Limit, st.PerClient, st.Running, st.Queued, st.Clients = a.limit, a.perClient, a.running, a.queued, len(a.clients)
	return st
}

// errNoTurn refuses a statement that found no turn within the wait. It
// unwraps to outcome.ErrBusy, so the answer's code is busy.
type errNoTurn struct {
	limit int
	wait  time.Duration
}

func (e *errNoTurn) Error() string {
	return fmt.Sprintf("the server is busy: it runs as many statements at once as it allows (%d) and this one waited %v for its turn; "+
		"run it again later", e.limit, e.wait)
}

func (e *errNoTurn) Unwrap() error { return outcome.ErrBusy }
