package replication

import (
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// A follower learns of its leader's death from raft only when the leader
// has been silent for a heartbeat timeout (500 ms), at a check that comes
// every 0.5–1 s; the survivors then hold pre-votes, which a survivor that
// has not timed out yet refuses (it still knows a leader), and two that
// time out together split the vote. A killed process's sockets are closed
// by its kernel, so a follower can know sooner and for certain: the
// leader's connections to it end and its Raft port refuses connections.
// watchLeaderDeath acts on that. See DESIGN.md, "Leader death".
const (
	// deathWatchEvery is how often the watch looks at the follower's last
	// contact with its leader.
	deathWatchEvery = 25 * time.Millisecond
	// deathProbeTimeout bounds a probe of the leader's Raft port.
	deathProbeTimeout = time.Second
)

// watchLeaderDeath runs until the Store closes. While this node follows a
// leader, a read failing on an inbound Raft connection, or a silence of
// the leader longer than half the heartbeat timeout, makes it probe the
// leader's Raft port. If the port refuses the connection, the leader's
// process is gone, and the survivors (the voters but the leader, by ID)
// act in turn: the first stands for election at once (startElection). The
// others stand only if that one's candidacy cannot win their vote: when a
// candidate's RequestVote arrives with a log behind their own (raft
// refuses it) while no leader is known. Otherwise raft's own timers stay
// in charge, as before.
//
// That RequestVote may arrive before this node noticed the death: raft
// then forgets the leader (it does at every change of term), and the
// watch would have no leader to probe. So the watch remembers the last
// leader it saw, and a follower that knows no leader, whose vote a
// candidate with a shorter log asked for since that leader was last heard
// from, probes the remembered leader and stands if its port refuses.
func (s *Store) watchLeaderDeath() {
	defer s.wg.Done()
	quiet := s.cfg.HeartbeatTimeout / 2
	tick := time.NewTicker(deathWatchEvery)
	defer tick.Stop()
	var (
		// probedAt and probed: the last probe that found the leader
		// listening, which is not repeated within quiet.
		probedAt time.Time
		probed   raft.ServerAddress
		// standby: this node waits, until standbyEnd, for the
		// candidacy of the first in line after gone, last heard from
		// at goneAt, died.
		standby    bool
		gone       raft.ServerID
		goneAt     time.Time
		standbyEnd time.Time
		// lastAddr and lastID: the last leader this follower knew, until
		// it stands or another leader is known.
		lastAddr raft.ServerAddress
		lastID   raft.ServerID
	)
	stand := func(gone raft.ServerID, why string) {
		standby, lastAddr, lastID = false, "", ""
		s.stand(gone, why)
	}
	for {
		hint := false
		select {
		case <-s.closing:
			return
		case <-s.layer.ended:
			hint = true
		case <-tick.C:
		}
		if s.raft.State() != raft.Follower {
			standby = false
			continue
		}
		addr, id := s.raft.LeaderWithID()
		if standby {
			if id != "" && id != gone || time.Now().After(standbyEnd) {
				standby = false
			} else if s.refusedCandidate(goneAt) {
				stand(gone, "a candidate's log is behind this node's")
			}
			continue
		}
		if id == raft.ServerID(s.cfg.ID) {
			continue
		}
		// target is the leader to probe: the one raft knows, or, when a
		// candidacy's new term made raft forget it, the last one seen.
		target, targetID := addr, id
		forgotten := addr == ""
		if forgotten {
			if lastAddr == "" || !s.refusedCandidate(s.raft.LastContact()) {
				continue
			}
			target, targetID = lastAddr, lastID
		} else {
			lastAddr, lastID = addr, id
			if !hint && time.Since(s.raft.LastContact()) < quiet {
				continue
			}
		}
		if target == probed && time.Since(probedAt) < quiet {
			continue
		}
		switch s.layer.probe(target, deathProbeTimeout) {
		case probeAnswered:
			probed, probedAt = target, time.Now()
			continue
		case probeUnknown:
			// A reset while the dying process closes its sockets, or
			// a slow leader: the next tick probes again.
			continue
		}
		if cur, _ := s.raft.LeaderWithID(); cur != addr || s.raft.State() != raft.Follower {
			continue
		}
		rank, ok := s.rankAfter(targetID)
		switch {
		case !ok:
		case forgotten:
			stand(targetID, "a candidate's log is behind this node's, and no leader is known")
		case rank == 0:
			stand(targetID, "first in line")
		default:
			s.log.Info("leader's Raft port refuses connections; waiting for the first in line's candidacy",
				"leader", targetID, "rank", rank)
			// The first in line may have asked for this node's vote
			// already: any RequestVote since the leader was last heard
			// from counts.
			standby, gone, goneAt = true, targetID, s.raft.LastContact()
			standbyEnd = time.Now().Add(2 * (s.cfg.HeartbeatTimeout + s.cfg.ElectionTimeout))
		}
	}
}

// rankAfter returns this node's place among the voters of the latest
// configuration other than the leader gone, ordered by ID, and false if
// this node is not such a voter.
func (s *Store) rankAfter(gone raft.ServerID) (int, bool) {
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return 0, false
	}
	var ids []string
	self := false
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage != raft.Voter || srv.ID == gone {
			continue
		}
		ids = append(ids, string(srv.ID))
		self = self || srv.ID == raft.ServerID(s.cfg.ID)
	}
	if !self {
		return 0, false
	}
	slices.Sort(ids)
	return slices.Index(ids, s.cfg.ID), true
}

// refusedCandidate reports whether a RequestVote that arrived after since
// came from a candidate whose log is behind this node's, so that raft
// refused it its vote.
func (s *Store) refusedCandidate(since time.Time) bool {
	rv := s.trans.lastVote.Load()
	if rv == nil || rv.at.Before(since) {
		return false
	}
	idx := s.raft.LastIndex()
	var l raft.Log
	if err := s.logs.GetLog(idx, &l); err != nil {
		// Compacted into a snapshot: too rare to judge here; raft's
		// timers decide.
		return false
	}
	return l.Term > rv.lastLogTerm || l.Term == rv.lastLogTerm && idx > rv.lastLogIndex
}

// stand makes this follower a candidate at once: the leader gone is dead.
func (s *Store) stand(gone raft.ServerID, why string) {
	s.log.Info("leader's Raft port refuses connections; standing for election", "leader", gone, "why", why)
	if err := s.trans.startElection(raft.ServerID(s.cfg.ID), s.trans.LocalAddr()); err != nil {
		s.log.Warn("could not stand for election", "err", err)
	}
}
