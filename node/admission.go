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

// AdmissionStats is what the admission gate of client statements
// (Config.MaxRunningStatements) holds now and has done since the server
// started.
type AdmissionStats struct {
	// Limit is the most statements that run at once.
	Limit int
	// Running are the statements holding a turn, Queued those waiting
	// for one; PeakRunning is the most that ever held one at once.
	Running, Queued, PeakRunning int
	// Admitted counts the turns given, Refused the statements refused
	// after waiting the whole AdmissionWait (code busy), Abandoned those
	// whose context ended while they waited (a cancel, a statement
	// timeout, the client gone).
	Admitted, Refused, Abandoned uint64
}

// AdmissionStats returns the admission gate's state and counts.
func (s *Server) AdmissionStats() AdmissionStats { return s.gate.stats() }

// admission is a node-wide gate of client statements: at most limit hold
// a turn at once, and the others wait in arrival order, each at most wait
// (and while its context lasts). It is the Admitter of the database's
// client connections (engine.DB.SetAdmitter).
type admission struct {
	limit int
	wait  time.Duration

	mu      sync.Mutex
	running int
	// queue holds the waiters in arrival order; a turn given back goes
	// to the first, whose channel is closed.
	queue []*waiter
	st    AdmissionStats
}

type waiter struct{ granted chan struct{} }

func newAdmission(limit int, wait time.Duration) *admission {
	return &admission{limit: limit, wait: wait}
}

// Admit implements engine.Admitter.
func (a *admission) Admit(ctx context.Context) (func(), error) {
	a.mu.Lock()
	if a.running < a.limit && len(a.queue) == 0 {
		a.running++
		a.admittedLocked()
		a.mu.Unlock()
		return a.releaser(), nil
	}
	w := &waiter{granted: make(chan struct{})}
	a.queue = append(a.queue, w)
	a.mu.Unlock()

	timer := time.NewTimer(a.wait)
	defer timer.Stop()
	var err error
	select {
	case <-w.granted:
		return a.releaser(), nil
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
		return a.releaser(), nil
	default:
	}
	for i, q := range a.queue {
		if q == w {
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			break
		}
	}
	if _, busy := err.(*errNoTurn); busy {
		a.st.Refused++
	} else {
		a.st.Abandoned++
	}
	return nil, err
}

// releaser returns the function that gives a turn back, once.
func (a *admission) releaser() func() {
	var once sync.Once
	return func() { once.Do(a.release) }
}

// release gives a turn back: to the first waiter, else to the pool.
func (a *admission) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.queue) > 0 {
		w := a.queue[0]
		a.queue[0] = nil
		a.queue = a.queue[1:]
		a.admittedLocked()
		close(w.granted)
		return
	}
	a.running--
}

// admittedLocked counts a turn given. The caller holds a.mu.
func (a *admission) admittedLocked() {
	a.st.Admitted++
	a.st.PeakRunning = max(a.st.PeakRunning, a.running)
}

func (a *admission) stats() AdmissionStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.st
	st.Limit, st.Running, st.Queued = a.limit, a.running, len(a.queue)
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
