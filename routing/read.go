package routing

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/replication"
)

// errBehind is a node's answer to a routed read it cannot serve in time
// because it has not applied the index the read needs; the router tries
// another node.
var errBehind = errors.New("duckraft: node is behind the index the read needs")

// A routed read carries, in a leading comment, what the node that runs it
// must check first, since the node's own session state knows nothing of the
// client's session:
//
//	/*duckraft:after=N*/  run once index N is applied (session, bounded)
//	/*duckraft:strong*/   run on the leader after a read index
//	/*duckraft:at=N*/     run in a read transaction at exactly index N (split scans)
var routedPrefix = regexp.MustCompile(`^/\*duckraft:(strong|after=(\d+)|at=(\d+))\*/ `)

// routed is a read's requirement as sent to the node that runs it.
type routed struct {
	strong bool
	after  uint64
	at     uint64
}

func (r routed) prefix() string {
	switch {
	case r.strong:
		return "/*duckraft:strong*/ "
	case r.at > 0:
		return fmt.Sprintf("/*duckraft:at=%d*/ ", r.at)
	}
	return fmt.Sprintf("/*duckraft:after=%d*/ ", r.after)
}

// parseRouted splits a routed read into its requirement and its SQL.
func parseRouted(sql string) (routed, string, bool) {
	m := routedPrefix.FindStringSubmatchIndex(sql)
	if m == nil {
		return routed{}, sql, false
	}
	var r routed
	switch {
	case m[4] >= 0:
		r.after, _ = strconv.ParseUint(sql[m[4]:m[5]], 10, 64)
	case m[6] >= 0:
		r.at, _ = strconv.ParseUint(sql[m[6]:m[7]], 10, 64)
	default:
		r.strong = true
	}
	return r, sql[m[1]:], true
}

// serveRouted runs a read another node routed here, after the check it
// asks for.
func (e *Executor) serveRouted(ctx context.Context, s *node.Session, r routed, sql string) (node.Rows, error) {
	stmts, err := Classify(sql)
	if err != nil {
		return nil, err
	}
	if len(stmts) != 1 || stmts[0].Class != ClassRead {
		return nil, errors.New("duckraft: a routed statement must be a single read")
	}
	switch {
	case r.strong:
		return e.strongLocal(ctx, s, sql)
	case r.at > 0:
		return e.pinnedRead(ctx, s, r.at, sql)
	}
	return e.localAfter(ctx, s, r.after, sql)
}

// local runs sql on the session's own connection and counts it.
func (e *Executor) local(ctx context.Context, s *node.Session, sql string) (node.Rows, error) {
	e.reads.Add(1)
	e.active.Add(1)
	rows, err := node.LocalExecutor{}.Query(ctx, s, sql)
	if err != nil {
		e.active.Add(-1)
		return nil, err
	}
	return newTrackedRows(rows, func() { e.active.Add(-1) }), nil
}

// localAfter runs sql here once index idx is applied, waiting at most
// SessionWait.
func (e *Executor) localAfter(ctx context.Context, s *node.Session, idx uint64, sql string) (node.Rows, error) {
	if e.cfg.Store.AppliedIndex() < idx {
		wctx, cancel := context.WithTimeout(ctx, e.cfg.SessionWait)
		err := e.cfg.Store.WaitForApplied(wctx, idx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%w (%d, applied %d): %w", errBehind, idx, e.cfg.Store.AppliedIndex(), err)
		}
	}
	return e.local(ctx, s, sql)
}

// strongLocal runs sql on this node, which must lead, once everything
// committed before the read is applied. ReadIndex itself waits for that;
// the index it returns may be a no-op entry the applied index never
// reaches, so it is not waited for again.
func (e *Executor) strongLocal(ctx context.Context, s *node.Session, sql string) (node.Rows, error) {
	if _, err := e.cfg.Store.ReadIndex(ctx); err != nil {
		return nil, err
	}
	return e.local(ctx, s, sql)
}

// read runs a read where the session's consistency level allows: on the
// session's home node while it qualifies, else on the cheapest node that
// does. A node that fails before answering is left out and the read tried
// elsewhere; nothing has reached the client then.
func (e *Executor) read(ctx context.Context, s *node.Session, st *sessionState, sql string) (node.Rows, error) {
	st.mu.Lock()
	level, last, split := st.consistency, st.lastIndex, st.split
	st.mu.Unlock()
	if split > 1 && level != Strong {
		if table, ok := splitTable(sql); ok {
			return e.splitRead(ctx, s, st, table, split, level, last)
		}
	}
	return e.readOne(ctx, s, st, level, last, sql)
}

// readOne runs a read on one node.
func (e *Executor) readOne(ctx context.Context, s *node.Session, st *sessionState, level Level, last uint64, sql string) (node.Rows, error) {
	deadline := time.Now().Add(e.cfg.LeaderWait)
	tried := map[string]bool{}
	for {
		p, req, ok := e.pick(st, level, last, tried)
		if ok {
			rows, err := e.readOn(ctx, s, st, p, req, sql)
			if err == nil || !retryableRead(err) || ctx.Err() != nil {
				return rows, err
			}
			e.log.Debug("read failed, trying another node", "node", p.ID, "err", err)
			tried[p.ID] = true
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("duckraft: no node can serve a %s read", level)
		}
		// Every candidate failed or none is known (a leader election):
		// wait for gossip and Raft to catch up and start over.
		clear(tried)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// retryableRead reports whether a read that failed on one node may run on
// another: the node was unreachable, or could not serve it in time. Other
// errors are the statement's own, which any node would answer alike.
func retryableRead(err error) bool {
	if errors.Is(err, errRemote) || errors.Is(err, errBehind) || errors.Is(err, replication.ErrNotLeader) ||
		errors.Is(err, errPinned) {
		return true
	}
	var se *client.ServerError
	if !errors.As(err, &se) {
		return false
	}
	for _, s := range []string{errBehind.Error(), replication.ErrNotLeader.Error(), "Invalid connection id",
		"heartbeat lease expired", "too many sessions", errPinned.Error()} {
		if strings.Contains(se.Message, s) {
			return true
		}
	}
	return false
}

// errRemote marks a failure to reach another node for a read.
var errRemote = errors.New("duckraft: reading on another node failed")

// maxApplied is the furthest applied index this node knows of: a bound on
// what is committed.
func (e *Executor) maxApplied(peers []Peer) uint64 {
	m := e.cfg.Store.AppliedIndex()
	if c, ok := e.cfg.Store.(interface{ CommitIndex() uint64 }); ok {
		m = max(m, c.CommitIndex())
	}
	for _, p := range peers {
		m = max(m, p.Applied)
	}
	return m
}

// peers returns the live data nodes with this node's own entry made exact.
func (e *Executor) peers() []Peer {
	if e.cfg.Directory == nil {
		return nil
	}
	peers := e.cfg.Directory.Peers()
	leader := e.cfg.Store.LeaderID()
	for i := range peers {
		if peers[i].ID == e.cfg.ID && !e.cfg.Router {
			peers[i].Applied = e.cfg.Store.AppliedIndex()
			peers[i].Load = uint64(max(0, e.active.Load()))
		}
		if leader != "" {
			peers[i].Leader = peers[i].ID == leader
		}
	}
	return peers
}

// pick chooses the node for a read at level and what it must check there.
func (e *Executor) pick(st *sessionState, level Level, last uint64, tried map[string]bool) (Peer, routed, bool) {
	peers := e.peers()
	top := e.maxApplied(peers)
	now := time.Now()
	var req routed
	switch level {
	case Strong:
		req.strong = true
	case Session:
		req.after = last
	case Bounded:
		req.after = top - min(top, e.cfg.MaxStaleness)
	}
	var live, fresh []Peer
	for _, p := range peers {
		if p.ID == e.cfg.ID && e.cfg.Router || e.bal.suspected(p.ID, now) {
			continue
		}
		if level == Strong && !p.Leader {
			continue
		}
		live = append(live, p)
		// A node within the staleness bound catches up to a session's
		// index within milliseconds; one far behind would make it wait.
		if level == Any || p.Applied >= req.after || top-min(top, p.Applied) <= e.cfg.MaxStaleness {
			fresh = append(fresh, p)
		}
	}
	if len(fresh) == 0 {
		fresh = live
	}
	var home *Peer
	var open []Peer
	st.mu.Lock()
	homeID := st.home
	st.mu.Unlock()
	for i, p := range fresh {
		if p.ID == homeID {
			home = &fresh[i]
		}
		if !tried[p.ID] {
			open = append(open, p)
		}
	}
	if len(open) == 0 {
		return Peer{}, req, false
	}
	best, bestCost := e.bal.cheapest(open, e.cfg.ID, top)
	if level == Strong {
		return best, req, true
	}
	if home != nil && !tried[home.ID] && e.bal.cost(*home, e.cfg.ID, top) <= bestCost+rehomeSlack {
		return *home, req, true
	}
	// A session moves only when its home is gone, far behind or much
	// busier; a one-off fallback after a failed try keeps the home.
	if home == nil || !tried[home.ID] {
		st.mu.Lock()
		st.home = best.ID
		st.mu.Unlock()
	}
	return best, req, true
}

// readOn runs sql on p, here when p is this node.
func (e *Executor) readOn(ctx context.Context, s *node.Session, st *sessionState, p Peer, req routed, sql string) (node.Rows, error) {
	if p.ID == e.cfg.ID && !e.cfg.Router {
		if req.strong {
			return e.strongLocal(ctx, s, sql)
		}
		return e.localAfter(ctx, s, req.after, sql)
	}
	return e.remoteQuery(ctx, st, p, req.prefix()+sql)
}

// remoteQuery runs a routed read on p through the session's connection to
// p. Its rows stream from p as the client reads them.
func (e *Executor) remoteQuery(ctx context.Context, st *sessionState, p Peer, sql string) (node.Rows, error) {
	rc, err := e.remoteConn(ctx, st, p)
	if err != nil {
		return nil, err
	}
	conn := rc.conn
	if err := st.syncSettings(ctx, rc); err != nil {
		var se *client.ServerError
		if !errors.As(err, &se) {
			st.dropRemote(p.ID, conn)
			e.bal.suspect(p.ID)
			return nil, fmt.Errorf("%w: %s: %w", errRemote, p.ID, err)
		}
		return nil, err
	}
	n := e.bal.counter(p.ID)
	n.Add(1)
	st.busy.Add(1)
	rows, err := e.queryWhileAlive(ctx, conn, p.ID, sql)
	if err != nil {
		n.Add(-1)
		st.busy.Add(-1)
		var se *client.ServerError
		if !errors.As(err, &se) || strings.Contains(se.Message, "Invalid connection id") {
			// The node or its session is gone: reconnect next time.
			st.dropRemote(p.ID, conn)
			if !errors.As(err, &se) {
				e.bal.suspect(p.ID)
				return nil, fmt.Errorf("%w: %s: %w", errRemote, p.ID, err)
			}
		}
		return nil, err
	}
	return newTrackedRows(remoteRows{rows}, func() {
		n.Add(-1)
		st.busy.Add(-1)
	}), nil
}

// queryWhileAlive runs sql on conn and waits for its first answer only while
// gossip lists node id as alive. A node that is frozen (SIGSTOP, a hung
// disk) keeps its sockets open, so without this a read would wait for the
// client's deadline; once gossip declares it dead the read fails with
// errRemote and runs elsewhere. Nothing has reached the client by then.
func (e *Executor) queryWhileAlive(ctx context.Context, conn *client.Conn, id, sql string) (*client.Rows, error) {
	qctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	answered := make(chan struct{})
	defer close(answered)
	go func() {
		t := time.NewTicker(livenessPoll)
		defer t.Stop()
		for {
			select {
			case <-answered:
				return
			case <-t.C:
				if !e.alive(id) {
					cancel(fmt.Errorf("%w: %s stopped answering and gossip declared it dead", errRemote, id))
					return
				}
			}
		}
	}()
	rows, err := conn.Query(qctx, sql)
	if err != nil && context.Cause(qctx) != nil && ctx.Err() == nil {
		return nil, context.Cause(qctx)
	}
	return rows, err
}

// livenessPoll is how often a read waiting on another node checks that
// gossip still lists the node.
const livenessPoll = 250 * time.Millisecond

// alive reports whether gossip lists node id among the live peers.
func (e *Executor) alive(id string) bool {
	for _, p := range e.peers() {
		if p.ID == id {
			return true
		}
	}
	return false
}

// connectTimeout bounds opening a session on another node, so that a read
// moves on quickly from a node that just died.
const connectTimeout = 2 * time.Second

// remoteConn returns the session's connection to p, opening it if needed.
func (e *Executor) remoteConn(ctx context.Context, st *sessionState, p Peer) (*remoteConn, error) {
	st.mu.Lock()
	st.used = time.Now()
	rc := st.remotes[p.ID]
	if rc != nil && rc.addr != p.QuackAddr {
		delete(st.remotes, p.ID)
		go rc.conn.Close()
		rc = nil
	}
	st.mu.Unlock()
	if rc != nil {
		return rc, nil
	}
	e.sweepIdle()
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	c, err := client.Connect(cctx, "quack:"+p.QuackAddr, client.Options{Token: e.cfg.Token, Generation: wire.Q1})
	if err != nil {
		e.bal.suspect(p.ID)
		return nil, fmt.Errorf("%w: connect to %s at %s: %w", errRemote, p.ID, p.QuackAddr, err)
	}
	st.mu.Lock()
	if st.remotes == nil {
		st.remotes = map[string]*remoteConn{}
	}
	if old := st.remotes[p.ID]; old != nil {
		go old.conn.Close()
	}
	rc = &remoteConn{conn: c, addr: p.QuackAddr}
	st.remotes[p.ID] = rc
	st.mu.Unlock()
	e.mu.Lock()
	e.withRemotes[st] = struct{}{}
	e.mu.Unlock()
	return rc, nil
}

func (st *sessionState) dropRemote(id string, c *client.Conn) {
	st.mu.Lock()
	if rc := st.remotes[id]; rc != nil && rc.conn == c {
		delete(st.remotes, id)
	}
	st.mu.Unlock()
	go c.Close()
}

// Remote sessions are a cache: node.Server does not say when a client
// session ends, so those idle for remoteIdle are closed (and reopened if
// the session reads again), checked at most every sweepEvery.
const (
	remoteIdle = 2 * time.Minute
	sweepEvery = 30 * time.Second
)

// sweepIdle closes the remote sessions of sessions that have been idle for
// remoteIdle.
func (e *Executor) sweepIdle() {
	now := time.Now()
	e.mu.Lock()
	if now.Sub(e.lastSweep) < sweepEvery {
		e.mu.Unlock()
		return
	}
	e.lastSweep = now
	var idle []*remoteConn
	for st := range e.withRemotes {
		st.mu.Lock()
		if st.busy.Load() == 0 && now.Sub(st.used) > remoteIdle {
			for _, rc := range st.remotes {
				idle = append(idle, rc)
			}
			st.remotes = nil
			delete(e.withRemotes, st)
		}
		st.mu.Unlock()
	}
	e.mu.Unlock()
	for _, rc := range idle {
		go rc.conn.Close()
	}
}

// trackedRows calls done once when the rows are closed.
type trackedRows struct {
	node.Rows
	once sync.Once
	done func()
}

func newTrackedRows(r node.Rows, done func()) *trackedRows {
	return &trackedRows{Rows: r, done: done}
}

func (r *trackedRows) Close() {
	r.Rows.Close()
	r.once.Do(r.done)
}
