package replication

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/wal"
)

// doneFuture is a raft.ApplyFuture that has ended with err.
type doneFuture struct{ err error }

func (f doneFuture) Error() error  { return f.err }
func (f doneFuture) Response() any { return nil }
func (f doneFuture) Index() uint64 { return 0 }

// TestFinishSaysWhatHappened answers proposals from raft's errors: each
// says whether the write may still apply.
func TestFinishSaysWhatHappened(t *testing.T) {
	for _, tc := range []struct {
		raft    error
		want    error
		unknown bool
	}{
		{fmt.Errorf("store logs: write raft.db: %w", syscall.ENOSPC), ErrDiskFull, false},
		{raft.ErrLeadershipLost, ErrUnknownOutcome, true},
		{raft.ErrRaftShutdown, ErrClosed, true},
		{raft.ErrNotLeader, ErrNotLeader, false},
	} {
		nodes := startCluster(t, 1, nil)
		s := waitLeader(t, nodes).store
		p := &proposal{cmd: wal.Command{}, done: make(chan cmdResult, 1)}
		s.finish(doneFuture{tc.raft}, []*proposal{p})
		got := (<-p.done).err
		if !errors.Is(got, tc.want) || errors.Is(got, ErrUnknownOutcome) != tc.unknown {
			t.Errorf("raft %v: answered %v; want %v, outcome unknown %v", tc.raft, got, tc.want, tc.unknown)
		}
	}
}
