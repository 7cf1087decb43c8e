package routing

import (
	"context"
	"errors"

	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/wal"
)

// NewRouter returns the Executor of a data-less router (duckraftd --router):
// it sends writes to the leader and every read to a data node, learning
// both from cfg.Directory. cfg.DB only backs the client sessions' own
// settings; it holds no cluster data.
func NewRouter(cfg Config) (*Executor, error) {
	if cfg.Directory == nil {
		return nil, errors.New("routing: a router needs a Directory")
	}
	cfg.Router = true
	cfg.Store = routerStore{dir: cfg.Directory}
	return New(cfg)
}

// routerStore is a router's view of replication: never the leader, nothing
// applied, the leader as gossip reports it.
type routerStore struct{ dir Directory }

func (routerStore) Execute(context.Context, wal.Command) (*wal.Result, error) {
	return nil, replication.ErrNotLeader
}

func (routerStore) Prove(context.Context, wal.Command, []sqltext.Statement) error {
	return replication.ErrNotLeader
}

func (routerStore) IsLeader() bool         { return false }
func (routerStore) AppliedThrough() uint64 { return 0 }
func (routerStore) CommitIndex() uint64    { return 0 }

func (r routerStore) LeaderID() string {
	for _, p := range r.dir.Peers() {
		if p.Leader {
			return p.ID
		}
	}
	return ""
}

// WaitForApplied is never reached: a router runs no read itself.
func (routerStore) WaitForApplied(context.Context, uint64) error {
	return errors.New("duckraft: a router applies no log")
}

func (routerStore) ReadIndex(context.Context) (uint64, error) { return 0, replication.ErrNotLeader }
