package routing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/routing/balance"
	"github.com/duckraft/duckraft/routing/classify"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// errRemote marks a failure to reach another node for a read: nothing came
// back, so the read may run elsewhere.
var errRemote = errors.New("duckraft: reading on another node failed")

// nodeapiRead returns the requirement of a read another node routed here.
func nodeapiRead(ctx context.Context) (nodeapi.Read, bool, error) {
	h := node.RequestHeader(ctx)
	if h == nil {
		return nodeapi.Read{}, false, nil
	}
	return nodeapi.ReadFrom(h)
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
			return e.strongLocal(ctx, s, sql)
		case r.At > 0:
			return e.pinnedRead(ctx, s, r.At, sql)
		}
		return e.localAfter(ctx, s, r.After, sql)
	})
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

// waitApplied waits at most SessionWait for index idx to be applied here,
// and otherwise refuses with CodeBehind.
func (e *Executor) waitApplied(ctx context.Context, idx uint64) error {
	if e.cfg.Store.AppliedIndex() >= idx {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, e.cfg.SessionWait)
	err := e.cfg.Store.WaitForApplied(wctx, idx)
	cancel()
	if err != nil {
		applied := e.cfg.Store.AppliedIndex()
		return &nodeapi.Error{Code: nodeapi.CodeBehind, Index: applied,
			Message: fmt.Sprintf("duckraft: node is behind the index the read needs (%d, applied %d): %v", idx, applied, err)}
	}
	return nil
}

// localAfter runs sql here once index idx is applied.
func (e *Executor) localAfter(ctx context.Context, s *node.Session, idx uint64, sql string) (node.Rows, error) {
	if err := e.waitApplied(ctx, idx); err != nil {
		return nil, err
	}
	return e.local(ctx, s, sql)
}

// strongLocal runs sql on this node, which must lead, once everything
// committed before the read is applied. ReadIndex itself waits for that;
// the index it returns may be a no-op entry the applied index never
// reaches, so it is not waited for again.
func (e *Executor) strongLocal(ctx context.Context, s *node.Session, sql string) (node.Rows, error) {
	if _, err := e.cfg.Store.ReadIndex(ctx); err != nil {
		return nil, APIError(err)
	}
	return e.local(ctx, s, sql)
}

// read runs a read where the session's consistency level allows: on the
// session's home node while it qualifies, else on the cheapest node that
// does. A node that fails before answering is left out and the read tried
// elsewhere; nothing has reached the client then.
//
// The session's statement timeout bounds it: ctx's deadline, which remote
// reads carry to the node that runs them.
func (e *Executor) read(ctx context.Context, s *node.Session, st *sessionState, sql string) (node.Rows, error) {
	return bounded(ctx, st.statementTimeout(e.cfg.StatementTimeout), func(ctx context.Context) (node.Rows, error) {
		return e.readUnbounded(ctx, s, st, sql)
	})
}

func (e *Executor) readUnbounded(ctx context.Context, s *node.Session, st *sessionState, sql string) (node.Rows, error) {
	st.mu.Lock()
	level := st.consistency
	st.mu.Unlock()
	if level == Session {
		if err := e.restoreFloor(ctx, st); err != nil {
			return nil, err
		}
	}
	st.mu.Lock()
	last, split := st.lastIndex, st.split
	st.mu.Unlock()
	if split > 1 && level != Strong {
		// The whole text, as sent: only one statement, with at most one
		// semicolon after it, is split.
		if table, ok := splitTable(sqltext.Parse(sql)); ok {
			rows, err := e.splitRead(ctx, s, st, table, split, level, last)
			e.observeRead(level, "split", err)
			return rows, err
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
			if err == nil {
				st.saw(e.seen(p))
			}
			if err == nil || !retryableRead(err) || ctx.Err() != nil {
				e.observeRead(level, p.ID, err)
				return rows, err
			}
			e.log.Debug("read failed, trying another node", "node", p.ID, "err", err)
			tried[p.ID] = true
			continue
		}
		if time.Now().After(deadline) {
			err := fmt.Errorf("duckraft: no node can serve a %s read", level)
			e.observeRead(level, "", err)
			return nil, err
		}
		// Every candidate failed or none is known (a leader election):
		// wait for gossip and Raft to catch up and start over.
		clear(tried)
		select {
		case <-ctx.Done():
			e.observeRead(level, "", context.Cause(ctx))
			return nil, context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// seen is an index the state a read on p just saw is known to have
// reached, so that the session's next read sees no older state (monotonic
// reads): this node's applied index once its own read began, or the index
// gossip last reported p had applied. The latter is a lower bound: a node
// that applied more since it gossiped may have shown a newer state.
func (e *Executor) seen(p Peer) uint64 {
	if p.ID == e.cfg.ID && !e.cfg.Router {
		return e.cfg.Store.AppliedIndex()
	}
	return p.Applied
}

// observeRead tells Config.ObserveRead of a read.
func (e *Executor) observeRead(level Level, node string, err error) {
	if e.cfg.ObserveRead != nil {
		e.cfg.ObserveRead(level, node, err)
	}
}

// readRetries are the errors on which a read that failed on one node runs
// on another: the node was unreachable, could not serve it in time, or had
// forgotten or refused the session. Other errors are the statement's own,
// which any node would answer alike. The sentinels hold for this node's
// own errors and for another node's answer alike (node/outcome).
var readRetries = []error{errRemote, outcome.ErrBehind, outcome.ErrNotLeader, outcome.ErrPinned,
	outcome.ErrUnknownSession, outcome.ErrSessionExpired, outcome.ErrTooManySessions,
	outcome.ErrSessionLost, outcome.ErrSessionMoving}

// retryableRead reports whether a read that failed on one node may run on
// another (readRetries).
func retryableRead(err error) bool { return isAny(err, readRetries) }

// maxApplied is the furthest applied index this node knows of: a bound on
// what is committed.
func (e *Executor) maxApplied(peers []Peer) uint64 {
	m := max(e.cfg.Store.AppliedIndex(), e.cfg.Store.CommitIndex())
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
func (e *Executor) pick(st *sessionState, level Level, last uint64, tried map[string]bool) (Peer, nodeapi.Read, bool) {
	peers := e.peers()
	top := e.maxApplied(peers)
	now := time.Now()
	var req nodeapi.Read
	switch level {
	case Strong:
		req.Strong = true
	case Session:
		req.After = last
	case Bounded:
		req.After = top - min(top, e.cfg.MaxStaleness)
	}
	var live, fresh []Peer
	for _, p := range peers {
		if p.ID == e.cfg.ID && e.cfg.Router || e.bal.Suspected(p.ID, now) {
			continue
		}
		if level == Strong && !p.Leader {
			continue
		}
		live = append(live, p)
		// A node within the staleness bound catches up to a session's
		// index within milliseconds; one far behind would make it wait.
		if level == Any || p.Applied >= req.After || top-min(top, p.Applied) <= e.cfg.MaxStaleness {
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
	if level == Any && !e.cfg.Router {
		// An any read runs where the client is connected, as documented:
		// it asks for no freshness, so the hop buys nothing.
		for _, p := range open {
			if p.ID == e.cfg.ID {
				return p, req, true
			}
		}
	}
	best, bestCost := e.bal.Cheapest(open, e.cfg.ID, top)
	if level == Strong {
		return best, req, true
	}
	if home != nil && !tried[home.ID] && e.bal.Cost(*home, e.cfg.ID, top) <= bestCost+balance.RehomeSlack {
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
func (e *Executor) readOn(ctx context.Context, s *node.Session, st *sessionState, p Peer, req nodeapi.Read, sql string) (node.Rows, error) {
	if p.ID == e.cfg.ID && !e.cfg.Router {
		if req.Strong {
			return e.strongLocal(ctx, s, sql)
		}
		return e.localAfter(ctx, s, req.After, sql)
	}
	return e.remoteQuery(ctx, st, p, req, sql)
}
