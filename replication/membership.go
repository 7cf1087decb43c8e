package replication

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// Server is one member of the Raft configuration.
type Server struct {
	ID, Addr string
	Voter    bool
}

// Configuration returns the current Raft configuration.
func (s *Store) Configuration() ([]Server, error) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("raft configuration: %w", err)
	}
	var out []Server
	for _, srv := range f.Configuration().Servers {
		out = append(out, Server{ID: string(srv.ID), Addr: string(srv.Address), Voter: srv.Suffrage == raft.Voter})
	}
	return out, nil
}

// Demote makes a voter a non-voter. It must run on the leader.
func (s *Store) Demote(id string) error {
	if !s.IsLeader() {
		return s.notLeader()
	}
	if err := s.await(s.raft.DemoteVoter(raft.ServerID(id), 0, s.cfg.ApplyTimeout)); err != nil {
		return fmt.Errorf("demote %s: %w", id, err)
	}
	return nil
}
