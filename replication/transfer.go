package replication

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/node/outcome"
)

// ErrNoSuchVoter means a leadership transfer named a server that is not a
// voter of the cluster: read replicas cannot lead. It is outcome's
// sentinel, which travels between nodes as a code.
var ErrNoSuchVoter = outcome.ErrNoSuchVoter

// TransferLeadership hands leadership to the voter with ID to, or, when to
// is empty, to the voter whose log is most up to date, and returns once
// that voter has taken over (raft gives it an election timeout to do so).
// Writes proposed meanwhile fail with a *NotLeaderError, which routers
// retry on the new leader. It must run on the leader; transferring to the
// leader itself does nothing.
func (s *Store) TransferLeadership(to string) error {
	if !s.IsLeader() {
		return s.notLeader()
	}
	if to == s.cfg.ID {
		return nil
	}
	addr, err := s.voterAddr(to)
	if err != nil {
		return err
	}
	var f raft.Future
	if to == "" {
		f = s.raft.LeadershipTransfer()
	} else {
		f = s.raft.LeadershipTransferToServer(raft.ServerID(to), addr)
	}
	if err := s.await(f); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return s.notLeader()
		}
		return fmt.Errorf("transfer leadership: %w", err)
	}
	// The old leader learns who took over from the new leader's first
	// heartbeat; wait for it so callers can report the new leader.
	deadline := time.Now().Add(2 * s.cfg.ElectionTimeout)
	for s.LeaderID() == "" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	s.log.Info("transferred leadership", "to", s.LeaderID())
	return nil
}

// voterAddr returns the Raft address of the voter with ID id, or, for an
// empty id, of any voter but this one.
func (s *Store) voterAddr(id string) (raft.ServerAddress, error) {
	cf := s.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return "", fmt.Errorf("transfer leadership: %w", err)
	}
	for _, srv := range cf.Configuration().Servers {
		if srv.Suffrage != raft.Voter || srv.ID == raft.ServerID(s.cfg.ID) {
			continue
		}
		if id == "" || srv.ID == raft.ServerID(id) {
			return srv.Address, nil
		}
	}
	if id == "" {
		return "", fmt.Errorf("%w: no voter but this one", ErrNoSuchVoter)
	}
	return "", fmt.Errorf("%w: %q", ErrNoSuchVoter, id)
}

// LastIndex returns the last index in this node's Raft log, committed or not.
func (s *Store) LastIndex() uint64 { return s.raft.LastIndex() }

// LeaderCh reports leadership changes of this node: true when it becomes
// leader, false when it stops. Raft keeps only the latest value for a slow
// reader; there may be only one reader.
func (s *Store) LeaderCh() <-chan bool { return s.raft.LeaderCh() }
