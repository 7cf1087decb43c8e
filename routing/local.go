package routing

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// appliedWaiter is what a read run here needs of replication: how far this
// node has applied the log, and a wait until it applies further.
type appliedWaiter interface {
	AppliedThrough() uint64 // as Store.AppliedThrough
	WaitForApplied(ctx context.Context, idx uint64) error
}

// localReads runs reads on this node's own DuckDB, in the session's
// connection, once the index they need is applied, and counts them: gossip
// reports the count running as this node's load.
type localReads struct {
	store appliedWaiter
	// wait bounds how long a read waits for its index (Config.SessionWait).
	wait time.Duration

	// reads counts reads run on this node; active counts statements
	// running or streaming here.
	reads  atomic.Uint64
	active atomic.Int64
}

// load is the statements running or streaming results on this node.
func (l *localReads) load() uint64 { return uint64(max(0, l.active.Load())) }

// run runs sql on the session's own connection and counts it.
func (l *localReads) run(ctx context.Context, s *node.Session, sql string) (node.Rows, error) {
	l.reads.Add(1)
	l.active.Add(1)
	rows, err := node.LocalExecutor{}.Query(ctx, s, sql)
	if err != nil {
		l.active.Add(-1)
		return nil, err
	}
	return newTrackedRows(rows, func() { l.active.Add(-1) }), nil
}

// farBehind is how many entries short of a read's index a node refuses it
// at once instead of waiting: that far behind, it is catching up (it
// restarted and replays the log, or restores a snapshot) and would hold
// the read for the session wait before refusing it, while the router has
// nodes that caught up. A follower in step with the leader is a few
// entries behind at most (an entry is a group commit); one replaying the
// log after a restart on a loaded machine was seen to apply about 45 a
// second.
const farBehind = 32

// waitApplied waits at most the session wait for index idx to be applied
// here, and otherwise refuses with CodeBehind; a node farBehind refuses at
// once.
func (l *localReads) waitApplied(ctx context.Context, idx uint64) error {
	applied := l.store.AppliedThrough()
	if applied >= idx {
		return nil
	}
	if idx-applied > farBehind {
		return &nodeapi.Error{Code: nodeapi.CodeBehind, Index: applied,
			Message: fmt.Sprintf("duckraft: node is catching up, %d entries behind the index the read needs (%d, applied %d)",
				idx-applied, idx, applied)}
	}
	wctx, cancel := context.WithTimeout(ctx, l.wait)
	err := l.store.WaitForApplied(wctx, idx)
	cancel()
	if err != nil {
		applied := l.store.AppliedThrough()
		return &nodeapi.Error{Code: nodeapi.CodeBehind, Index: applied,
			Message: fmt.Sprintf("duckraft: node is behind the index the read needs (%d, applied %d): %v", idx, applied, err)}
	}
	return nil
}

// after runs sql here once index idx is applied.
func (l *localReads) after(ctx context.Context, s *node.Session, idx uint64, sql string) (node.Rows, error) {
	if err := l.waitApplied(ctx, idx); err != nil {
		return nil, err
	}
	return l.run(ctx, s, sql)
}
