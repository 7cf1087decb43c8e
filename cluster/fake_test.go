package cluster

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

var errFakeNotLeader = errors.New("fake raft: not the leader")

// fakeRaft is an in-memory twin of a Raft configuration with hashicorp/raft's semantics for
// membership changes: AddVoter promotes an existing non-voter or moves a voter's address,
// AddNonvoter never demotes, and no change may leave the configuration without voters.
type fakeRaft struct {
	mu      sync.Mutex
	leader  bool
	applied uint64
	servers []Server
	changes []string // every change made, for failure messages
}

func newFakeRaft(servers ...Server) *fakeRaft {
	return &fakeRaft{leader: true, servers: servers}
}

func (f *fakeRaft) IsLeader() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader
}

func (f *fakeRaft) AppliedIndex() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

func (f *fakeRaft) Servers() ([]Server, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.servers), nil
}

func (f *fakeRaft) AddVoter(id, addr string) error {
	return f.change("add voter "+id, func(s []Server) []Server {
		if i := index(s, id); i >= 0 {
			s[i] = Server{ID: id, Address: addr, Voter: true}
			return s
		}
		return append(s, Server{ID: id, Address: addr, Voter: true})
	})
}

func (f *fakeRaft) AddNonvoter(id, addr string) error {
	return f.change("add nonvoter "+id, func(s []Server) []Server {
		if i := index(s, id); i >= 0 {
			s[i].Address = addr
			return s
		}
		return append(s, Server{ID: id, Address: addr})
	})
}

func (f *fakeRaft) DemoteVoter(id string) error {
	return f.change("demote "+id, func(s []Server) []Server {
		if i := index(s, id); i >= 0 {
			s[i].Voter = false
		}
		return s
	})
}

func (f *fakeRaft) RemoveServer(id string) error {
	return f.change("remove "+id, func(s []Server) []Server {
		if i := index(s, id); i >= 0 {
			return slices.Delete(s, i, i+1)
		}
		return s
	})
}

func (f *fakeRaft) change(what string, fn func([]Server) []Server) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.leader {
		return errFakeNotLeader
	}
	next := fn(slices.Clone(f.servers))
	if !slices.ContainsFunc(next, func(s Server) bool { return s.Voter }) {
		return fmt.Errorf("fake raft: %s: no voters left", what)
	}
	f.servers = next
	f.changes = append(f.changes, what)
	return nil
}

func index(s []Server, id string) int {
	return slices.IndexFunc(s, func(s Server) bool { return s.ID == id })
}

// fakeMembership is a settable gossip view.
type fakeMembership struct {
	mu      sync.Mutex
	members []Member
}

func (f *fakeMembership) Members() []Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.members)
}

func (f *fakeMembership) set(m []Member) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members = m
}
