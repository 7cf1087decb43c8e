package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// Server is one entry of the Raft configuration.
type Server struct {
	ID      string
	Address string
	Voter   bool
}

// Raft is what the Reconciler needs from this node's Raft instance. Membership changes
// only succeed on the leader; the wiring code adapts replication's Store to it.
type Raft interface {
	IsLeader() bool
	Servers() ([]Server, error) // the latest Raft configuration
	AddVoter(id, addr string) error
	AddNonvoter(id, addr string) error
	DemoteVoter(id string) error
	RemoveServer(id string) error
	AppliedIndex() uint64 // this node's applied index, to judge whether others caught up
}

// Handoff is what a Reconciler needs to move leadership off a leader whose DuckDB lags.
type Handoff interface {
	LastIndex() uint64 // the last index in this node's Raft log
	TransferLeadership(to string) error
}

// Membership lists the members gossip knows, dead ones included; *Gossip implements it.
type Membership interface {
	Members() []Member
}

// ReconcilerConfig configures a Reconciler. Zero durations and counts take the defaults
// given per field.
type ReconcilerConfig struct {
	ID         string // this node's ID
	Raft       Raft
	Membership Membership
	// Events, if set, triggers a pass on every membership event (as from Gossip.Subscribe).
	Events <-chan Event
	// Voters is the number of voters the cluster keeps when enough nodes are healthy (3).
	Voters int
	// ReapAfter is how long a member stays dead before it leaves the Raft configuration (30 s).
	ReapAfter time.Duration
	// MaxLag is how many entries behind the leader a node may be to count as caught up (256).
	// Applied indexes arrive by gossip up to ~0.5 s late, so under heavy writes this must
	// cover about a second of the write rate.
	MaxLag uint64
	// CatchUpFor is how long a non-voter must stay caught up before it is promoted (3 s).
	CatchUpFor time.Duration
	// Interval is the time between passes when nothing happens (1 s).
	Interval time.Duration
	// Handoff, if set, lets a leader whose applied index trails its own log by more than
	// HandOffLag entries (128) hand leadership to a live voter that has applied at least
	// HandOffLag more. Raft elects by log, not by applied state, so a voter that has just restarted
	// can win an election and then answer nothing until its DuckDB has caught up.
	Handoff    Handoff
	HandOffLag uint64
	// Elected, if set, starts a pass when this node becomes leader (as raft's LeaderCh).
	Elected <-chan bool
	Logger  *slog.Logger
	// Now returns the current time; tests replace it.
	Now func() time.Time
}

// Reconciler keeps the Raft configuration in line with the live gossip members. It runs
// on every node and acts only while its node is the Raft leader, because only the leader
// can change the configuration and one writer avoids conflicting decisions.
type Reconciler struct {
	cfg ReconcilerConfig
	log *slog.Logger

	mu sync.Mutex // serializes passes
	// Tracking below is only meaningful while this node leads; it restarts from scratch
	// when leadership is regained, which can only delay promotions and reaping.
	caughtUp map[string]time.Time // non-voter → when it was first seen caught up
	missing  map[string]time.Time // server unknown to gossip → when first noticed
	refused  map[string]bool      // refusals logged in the last pass, to log each once
}

// NewReconciler returns a Reconciler; call Run to start it.
func NewReconciler(cfg ReconcilerConfig) (*Reconciler, error) {
	if cfg.ID == "" || cfg.Raft == nil || cfg.Membership == nil {
		return nil, errors.New("cluster: reconciler needs ID, Raft and Membership")
	}
	setDefault(&cfg.Voters, 3)
	setDefault(&cfg.ReapAfter, 30*time.Second)
	setDefault(&cfg.MaxLag, 256)
	setDefault(&cfg.CatchUpFor, 3*time.Second)
	setDefault(&cfg.Interval, time.Second)
	setDefault(&cfg.HandOffLag, 128)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Reconciler{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "reconciler"),
		caughtUp: make(map[string]time.Time),
		missing:  make(map[string]time.Time),
		refused:  make(map[string]bool),
	}, nil
}

// Run reconciles on every tick and membership event until ctx is done.
func (r *Reconciler) Run(ctx context.Context) {
	tick := time.NewTicker(r.cfg.Interval)
	defer tick.Stop()
	events, elected := r.cfg.Events, r.cfg.Elected
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case leader, ok := <-elected:
			if !ok {
				elected = nil
				continue
			}
			if !leader {
				continue
			}
		case _, ok := <-events:
			if !ok {
				events = nil // gossip shut down; keep ticking until ctx is done
				continue
			}
			drain(events)
		}
		if err := r.Reconcile(); err != nil {
			r.log.Warn("reconcile pass failed", "err", err)
		}
	}
}

// drain discards queued events: one pass covers them all.
func drain(ch <-chan Event) {
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// maxActions bounds the changes of one pass, in case the configuration does not reflect a
// change that Raft reported as done.
const maxActions = 32

// Reconcile runs one pass: if this node leads, it makes Raft membership changes one at a
// time, re-reading the configuration after each, until none is needed.
func (r *Reconciler) Reconcile() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.cfg.Raft.IsLeader() {
		clear(r.caughtUp)
		clear(r.missing)
		clear(r.refused)
		return nil
	}
	members := make(map[string]Member)
	for _, m := range r.cfg.Membership.Members() {
		members[m.Meta.ID] = m
	}
	servers, err := r.cfg.Raft.Servers()
	if err != nil {
		return fmt.Errorf("cluster: read raft configuration: %w", err)
	}
	if r.handOff(servers, members) {
		return nil
	}
	now := r.cfg.Now()
	r.track(servers, members, now)

	refused := make(map[string]bool)
	defer func() { r.refused = refused }()
	for range maxActions {
		act, ok := r.next(servers, members, now, refused)
		if !ok {
			return nil
		}
		if err := r.apply(act); err != nil {
			return err
		}
		if servers, err = r.cfg.Raft.Servers(); err != nil {
			return fmt.Errorf("cluster: read raft configuration: %w", err)
		}
	}
	return nil
}

// handOff moves leadership to the live voter that has applied the most, if this leader
// trails its own log by more than HandOffLag and that voter has applied at least HandOffLag
// more than this one. Applied indexes arrive by gossip late, which only understates how far
// the others got. It reports whether leadership moved.
func (r *Reconciler) handOff(servers []Server, members map[string]Member) bool {
	h := r.cfg.Handoff
	if h == nil {
		return false
	}
	applied, last := r.cfg.Raft.AppliedIndex(), h.LastIndex()
	if last <= applied+r.cfg.HandOffLag {
		return false
	}
	var best Server
	var bestApplied uint64
	for _, s := range servers {
		m, ok := members[s.ID]
		if !s.Voter || s.ID == r.cfg.ID || !ok || !r.live(s, m) || m.Meta.AppliedIndex <= bestApplied {
			continue
		}
		best, bestApplied = s, m.Meta.AppliedIndex
	}
	if best.ID == "" || bestApplied < applied+r.cfg.HandOffLag {
		return false
	}
	r.log.Info("handing leadership on: this node's DuckDB lags its log", "to", best.ID,
		"applied", applied, "last_index", last, "their_applied", bestApplied)
	if err := h.TransferLeadership(best.ID); err != nil {
		r.log.Warn("leadership hand-off failed", "to", best.ID, "err", err)
		return false
	}
	return true
}

// track updates when non-voters became caught up and when servers went missing from gossip.
func (r *Reconciler) track(servers []Server, members map[string]Member, now time.Time) {
	leaderApplied := r.cfg.Raft.AppliedIndex()
	inConfig := make(map[string]bool)
	for _, s := range servers {
		inConfig[s.ID] = true
		m, known := members[s.ID]
		if !known {
			if r.missing[s.ID].IsZero() {
				r.missing[s.ID] = now
			}
			delete(r.caughtUp, s.ID)
			continue
		}
		delete(r.missing, s.ID)
		lag := leaderApplied - min(leaderApplied, m.Meta.AppliedIndex)
		if s.Voter || !r.live(s, m) || lag > r.cfg.MaxLag {
			delete(r.caughtUp, s.ID)
		} else if r.caughtUp[s.ID].IsZero() {
			r.caughtUp[s.ID] = now
		}
	}
	for id := range r.missing {
		if !inConfig[id] {
			delete(r.missing, id)
		}
	}
	for id := range r.caughtUp {
		if !inConfig[id] {
			delete(r.caughtUp, id)
		}
	}
}

// live reports whether server s is reachable where the configuration says it is.
func (r *Reconciler) live(s Server, m Member) bool {
	return s.ID == r.cfg.ID || (m.State == StateAlive && m.Meta.RaftAddr == s.Address)
}

type actionKind uint8

const (
	actAddNonvoter actionKind = iota
	actAddVoter
	actDemote
	actRemove
)

func (k actionKind) String() string {
	return [...]string{"add non-voter", "promote to voter", "demote voter", "remove server"}[k]
}

type action struct {
	kind   actionKind
	id     string
	addr   string
	reason string
}

// next picks the next change, in order: drop stale and dead entries (so a rejoining node
// and the voter count are right), demote voters that should not vote, add new members as
// non-voters, then promote caught-up non-voters up to the voter target. Changes that would
// break quorum safety are recorded in refused and skipped.
func (r *Reconciler) next(servers []Server, members map[string]Member, now time.Time, refused map[string]bool) (action, bool) {
	var voters []Server
	inConfig := make(map[string]Server)
	for _, s := range servers {
		inConfig[s.ID] = s
		if s.Voter {
			voters = append(voters, s)
		}
	}
	servers = slices.Clone(servers)
	slices.SortFunc(servers, func(a, b Server) int { return strings.Compare(a.ID, b.ID) })
	// refuse reports (and logs once) whether dropping voter s would break quorum safety.
	refuse := func(s Server, act action) bool {
		if !s.Voter || r.safeToDrop(voters, s.ID, members) {
			return false
		}
		key := act.kind.String() + " " + s.ID
		refused[key] = true
		if !r.refused[key] {
			r.log.Warn("membership change refused: remaining live voters would not be a majority",
				"action", act.kind.String(), "server", s.ID, "reason", act.reason, "voters", len(voters))
		}
		return true
	}

	// Stale entries: a node back on a new address, or dead past ReapAfter.
	for _, s := range servers {
		if s.ID == r.cfg.ID {
			continue
		}
		m, known := members[s.ID]
		var act action
		switch {
		case known && m.State == StateAlive && m.Meta.RaftAddr != "" && m.Meta.RaftAddr != s.Address:
			act = action{kind: actRemove, id: s.ID, reason: "rejoined on new address " + m.Meta.RaftAddr + ", dropping " + s.Address}
		case known && (m.State == StateDead || m.State == StateLeft) && now.Sub(m.LastChange) >= r.cfg.ReapAfter:
			act = action{kind: actRemove, id: s.ID, reason: fmt.Sprintf("%s for %s", m.State, now.Sub(m.LastChange).Round(time.Second))}
		case !known && now.Sub(r.missing[s.ID]) >= r.cfg.ReapAfter:
			act = action{kind: actRemove, id: s.ID, reason: fmt.Sprintf("unknown to gossip for %s", now.Sub(r.missing[s.ID]).Round(time.Second))}
		default:
			continue
		}
		if !refuse(s, act) {
			return act, true
		}
	}

	// Voters that should not vote: started as --replica, or more voters than the target
	// (another leader may have run with a larger target).
	excess := len(voters) - r.cfg.Voters
	for i := len(servers) - 1; i >= 0; i-- {
		s := servers[i]
		if !s.Voter || s.ID == r.cfg.ID {
			continue
		}
		m, known := members[s.ID]
		var act action
		switch {
		case known && m.Meta.Role == RoleReplica:
			act = action{kind: actDemote, id: s.ID, reason: "node asks to be a replica"}
		case excess > 0:
			act = action{kind: actDemote, id: s.ID, reason: fmt.Sprintf("%d voters, target %d", len(voters), r.cfg.Voters)}
		default:
			continue
		}
		if !refuse(s, act) {
			return act, true
		}
	}

	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	// New live members join as non-voters; they vote only once caught up.
	for _, id := range ids {
		m := members[id]
		if _, ok := inConfig[id]; ok || id == r.cfg.ID || m.State != StateAlive || m.Meta.RaftAddr == "" {
			continue
		}
		return action{kind: actAddNonvoter, id: id, addr: m.Meta.RaftAddr, reason: "new member as " + m.Meta.Role.String()}, true
	}

	// Promote caught-up non-voters that may vote while voters are below target.
	if len(voters) >= r.cfg.Voters {
		return action{}, false
	}
	for _, s := range servers {
		m := members[s.ID]
		since := r.caughtUp[s.ID]
		if s.Voter || m.Meta.Role != RoleVoter || since.IsZero() || now.Sub(since) < r.cfg.CatchUpFor {
			continue
		}
		return action{kind: actAddVoter, id: s.ID, addr: s.Address,
			reason: fmt.Sprintf("caught up for %s, %d voters, target %d", now.Sub(since).Round(time.Second), len(voters), r.cfg.Voters)}, true
	}
	return action{}, false
}

// safeToDrop reports whether voter id can leave the voter set: the voters that remain,
// counting only live ones, must be a majority of the new voter set; otherwise the new
// configuration could not commit anything, the change included, and the cluster stalls.
func (r *Reconciler) safeToDrop(voters []Server, id string, members map[string]Member) bool {
	remaining, live := 0, 0
	for _, v := range voters {
		if v.ID == id {
			continue
		}
		remaining++
		if r.live(v, members[v.ID]) {
			live++
		}
	}
	return remaining > 0 && live > remaining/2
}

func (r *Reconciler) apply(act action) error {
	var err error
	switch act.kind {
	case actAddNonvoter:
		err = r.cfg.Raft.AddNonvoter(act.id, act.addr)
	case actAddVoter:
		err = r.cfg.Raft.AddVoter(act.id, act.addr)
	case actDemote:
		err = r.cfg.Raft.DemoteVoter(act.id)
	case actRemove:
		err = r.cfg.Raft.RemoveServer(act.id)
	}
	if err != nil {
		return fmt.Errorf("cluster: %s %s: %w", act.kind, act.id, err)
	}
	delete(r.caughtUp, act.id)
	r.log.Info("membership changed", "action", act.kind.String(), "server", act.id, "addr", act.addr, "reason", act.reason)
	return nil
}
