package main

import (
	"log/slog"
	"strconv"

	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/routing"
)

// membership knows the cluster's members and their Quack addresses.
type membership struct {
	self      string
	quackAddr string
}

func startMembership(c *config, token string, store *replication.Store, log *slog.Logger) (*membership, error) {
	return &membership{self: c.id, quackAddr: c.quackAddr}, nil
}

// QuackAddr implements routing.Directory.
func (m *membership) QuackAddr(id string) (string, bool) {
	if id == m.self {
		return m.quackAddr, true
	}
	return "", false
}

func (m *membership) Close() error { return nil }

// status assembles this node's view of the cluster.
func status(store *replication.Store, m *membership) routing.Status {
	stats := store.Stats()
	st := routing.Status{
		ID:       store.ID(),
		State:    stats["state"],
		LeaderID: store.LeaderID(),
		Applied:  store.AppliedIndex(),
		Commit:   store.CommitIndex(),
	}
	servers, _ := store.Servers()
	for id, addr := range servers {
		ms := routing.MemberStatus{ID: id, RaftAddr: addr, InRaft: true, Voter: true, Leader: id == st.LeaderID}
		ms.QuackAddr, _ = m.QuackAddr(id)
		if id == st.ID {
			ms.Applied, ms.State = st.Applied, "alive"
			ms.Lag = st.Commit - min(st.Commit, st.Applied)
		}
		st.Members = append(st.Members, ms)
	}
	_ = strconv.Itoa
	return st
}
