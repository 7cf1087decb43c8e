package routing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/routing/balance"
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

// readIndexer is what a strong read needs of replication: the leader's
// read index, for which a quorum confirms its leadership.
type readIndexer interface {
	ReadIndex(ctx context.Context) (uint64, error)
}

// reader runs a client's read where the session's consistency level
// allows: on one node chosen among the members, here or in the session's
// session on another node, or split over several (splitScan).
type reader struct {
	log     *slog.Logger
	members *members
	local   *localReads
	remote  *remoteReads
	split   *splitScan
	leader  readIndexer
	// leaderWait bounds the retries of a read no node could serve
	// (Config.LeaderWait); timeout is the statement timeout of sessions
	// that set none (Config.StatementTimeout).
	leaderWait, timeout time.Duration
	// observe is Config.ObserveRead, or nil.
	observe func(level Level, node string, err error)
	// floor gives a session that moved here its read floor before its
	// first session read (Executor.restoreFloor, migrate.go).
	floor func(ctx context.Context, st *sessionState) error
}

// strongLocal runs sql on this node, which must lead, once everything
// committed before the read is applied. ReadIndex itself waits for that;
// the index it returns may be a no-op entry the applied index never
// reaches, so it is not waited for again.
func (r *reader) strongLocal(ctx context.Context, s *node.Session, sql string) (node.Rows, error) {
	if _, err := r.leader.ReadIndex(ctx); err != nil {
		return nil, APIError(err)
	}
	return r.local.run(ctx, s, sql)
}

// read runs a read where the session's consistency level allows: on the
// session's home node while it qualifies, else on the cheapest node that
// does. A node that fails before answering is left out and the read tried
// elsewhere; nothing has reached the client then.
//
// The session's statement timeout bounds it: ctx's deadline, which remote
// reads carry to the node that runs them.
func (r *reader) read(ctx context.Context, s *node.Session, st *sessionState, sql string) (node.Rows, error) {
	return bounded(ctx, st.statementTimeout(r.timeout), func(ctx context.Context) (node.Rows, error) {
		return r.readUnbounded(ctx, s, st, sql)
	})
}

func (r *reader) readUnbounded(ctx context.Context, s *node.Session, st *sessionState, sql string) (node.Rows, error) {
	st.mu.Lock()
	level := st.consistency
	st.mu.Unlock()
	if level == Session {
		if err := r.floor(ctx, st); err != nil {
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
			rows, ok, err := r.split.read(ctx, st, table, split, last)
			if !ok {
				// No split: fewer than two nodes, or they met at no
				// index. One node scans it all.
				rows, err = r.readOne(ctx, s, st, level, last, "SELECT * FROM "+table)
			}
			r.observeRead(level, "split", err)
			return rows, err
		}
	}
	return r.readOne(ctx, s, st, level, last, sql)
}

// readOne runs a read on one node.
func (r *reader) readOne(ctx context.Context, s *node.Session, st *sessionState, level Level, last uint64, sql string) (node.Rows, error) {
	deadline := time.Now().Add(r.leaderWait)
	tried := map[string]bool{}
	// refusal is the last node's, which the read's failure wraps: a
	// client told busy everywhere gets the code busy, not a bare text.
	var refusal error
	for {
		p, req, ok := r.pick(st, level, last, tried)
		if ok {
			rows, err := r.readOn(ctx, s, st, p, req, sql)
			if err == nil {
				st.saw(r.members.seen(p))
			}
			if err == nil || !retryableRead(err) || ctx.Err() != nil {
				r.observeRead(level, p.ID, err)
				return rows, err
			}
			r.log.Debug("read failed, trying another node", "node", p.ID, "err", err)
			tried[p.ID] = true
			refusal = err
			continue
		}
		if time.Now().After(deadline) {
			err := fmt.Errorf("duckraft: no node can serve a %s read", level)
			if refusal != nil {
				err = fmt.Errorf("%w; the last refusal: %w", err, refusal)
			}
			r.observeRead(level, "", err)
			return nil, err
		}
		// Every candidate failed or none is known (a leader election):
		// wait for gossip and Raft to catch up and start over.
		clear(tried)
		select {
		case <-ctx.Done():
			r.observeRead(level, "", context.Cause(ctx))
			return nil, context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// observeRead tells Config.ObserveRead of a read.
func (r *reader) observeRead(level Level, node string, err error) {
	if r.observe != nil {
		r.observe(level, node, err)
	}
}

// readRetries are the errors on which a read that failed on one node runs
// on another: the node was unreachable, could not serve it in time (behind,
// or busy: its admission gate refused the statement a turn), or had
// forgotten or refused the session. Other errors are the statement's own,
// which any node would answer alike. The sentinels hold for this node's
// own errors and for another node's answer alike (node/outcome).
var readRetries = []error{errRemote, outcome.ErrBehind, outcome.ErrNotLeader, outcome.ErrPinned,
	outcome.ErrUnknownSession, outcome.ErrSessionExpired, outcome.ErrTooManySessions,
	outcome.ErrSessionLost, outcome.ErrSessionMoving, outcome.ErrBusy}

// retryableRead reports whether a read that failed on one node may run on
// another (readRetries).
func retryableRead(err error) bool { return isAny(err, readRetries) }

// pick chooses the node for a read at level and what it must check there.
func (r *reader) pick(st *sessionState, level Level, last uint64, tried map[string]bool) (Peer, nodeapi.Read, bool) {
	m := r.members
	peers := m.peers()
	top := m.maxApplied(peers)
	now := time.Now()
	var req nodeapi.Read
	switch level {
	case Strong:
		req.Strong = true
	case Session:
		req.After = last
	case Bounded:
		req.After = top - min(top, m.maxStaleness)
	}
	var live, fresh []Peer
	for _, p := range peers {
		if p.ID == m.id && m.router || m.bal.Suspected(p.ID, now) {
			continue
		}
		if level == Strong && !p.Leader {
			continue
		}
		live = append(live, p)
		// A node within the staleness bound catches up to a session's
		// index within milliseconds; one far behind would make it wait.
		if level == Any || p.Applied >= req.After || top-min(top, p.Applied) <= m.maxStaleness {
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
	if level == Any && !m.router {
		// An any read runs where the client is connected, as documented:
		// it asks for no freshness, so the hop buys nothing.
		for _, p := range open {
			if p.ID == m.id {
				return p, req, true
			}
		}
	}
	best, bestCost := m.bal.Cheapest(open, m.id, top)
	if level == Strong {
		return best, req, true
	}
	if home != nil && !tried[home.ID] && m.bal.Cost(*home, m.id, top) <= bestCost+balance.RehomeSlack {
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
func (r *reader) readOn(ctx context.Context, s *node.Session, st *sessionState, p Peer, req nodeapi.Read, sql string) (node.Rows, error) {
	if r.members.isSelf(p) {
		if req.Strong {
			return r.strongLocal(ctx, s, sql)
		}
		return r.local.after(ctx, s, req.After, sql)
	}
	return r.remote.query(ctx, st, p, req, sql)
}
