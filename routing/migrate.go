package routing

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/routing/classify"
	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/wal"
)

// Sessions that outlive their node. The node holding a session pushes its
// state (nodeapi.SessionState: the routing state a session carries, its
// credential, whether a transaction or temporary objects are open) to the
// other data nodes whenever it changes, and drops it when the session ends;
// each keeps the copies, bounded. Any node that gets a request for a
// session it does not hold asks Locate where it goes: to the holder while
// that lives (node/forward.go relays it), else to the one live data node
// the session's id hashes to, which adopts it from the newest copy
// (Adopt). What cannot move is answered as lost (node.LostError); the
// adopted session's reads wait for the leader's commit index at the time
// of its first read (docs/consistency.md, *Sessions that outlive their
// node*).

// SessionAPI reaches the other members' session endpoints (nodeapi's
// SessionsPath and ReadIndexPath); QuackRemote is one.
type SessionAPI interface {
	PushSessions(ctx context.Context, addr string, p nodeapi.SessionPush) error
	LookupSession(ctx context.Context, addr, id string) (nodeapi.SessionState, bool, error)
	ReadIndex(ctx context.Context, addr string) (uint64, error)
}

// Timing and bounds of the session copies.
const (
	// pushWait bounds how long a statement that changed its session's
	// state (a SET, BEGIN, COMMIT) waits for the other nodes to take the
	// new state before it is answered.
	pushWait = 2 * time.Second
	// pushTimeout bounds one push to one node.
	pushTimeout = 5 * time.Second
	// lookupTimeout bounds asking the nodes for a session's state.
	lookupTimeout = time.Second
	// fullSyncEvery is how often a node sends every node the state of
	// every session it holds, so that a node that restarted or missed a
	// push catches up; a copy its holder did not refresh for
	// copyRefreshes of these, nor within the session's lease, is dropped.
	fullSyncEvery = 30 * time.Second
	copyRefreshes = 3
	// maxCopies and maxCopyBytes bound the copies a node keeps; past
	// either the oldest go.
	maxCopies    = 1 << 16
	maxCopyBytes = 64 << 20
	// suspectFor is how long a node a forward could not reach counts as
	// gone before gossip says so.
	suspectFor = 5 * time.Second
	// pushBatch and pushBytes bound the sessions of one push.
	pushBatch = 1000
	pushBytes = 4 << 20
)

// migrator is an Executor's part in sessions that outlive their node.
type migrator struct {
	e   *Executor
	ids *node.SessionIDs
	api SessionAPI
	log *slog.Logger

	mu sync.Mutex
	// held are the client sessions this node holds, by id.
	held map[string]*sessionState
	// copies are other nodes' sessions' states.
	copies map[string]*sessionCopy
	// copyBytes is the size of the copies (nodeapi.SessionState.Size).
	copyBytes int
	// suspect are nodes a forward could not reach, since when.
	suspect map[string]time.Time
	// boots are the other nodes' runs, as their pushes said.
	boots   map[string]uint64
	pushers map[string]*pusher
	closed  bool

	stop chan struct{}
	done chan struct{}
}

type sessionCopy struct {
	state    nodeapi.SessionState
	received time.Time
}

func newMigrator(e *Executor, ids *node.SessionIDs, api SessionAPI) *migrator {
	m := &migrator{e: e, ids: ids, api: api, log: e.log, held: map[string]*sessionState{}, copies: map[string]*sessionCopy{},
		suspect: map[string]time.Time{}, boots: map[string]uint64{}, pushers: map[string]*pusher{}, stop: make(chan struct{}), done: make(chan struct{})}
	go m.loop()
	return m
}

// close stops the pushes.
func (m *migrator) close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	for _, p := range m.pushers {
		close(p.stop)
	}
	m.pushers = nil
	m.mu.Unlock()
	close(m.stop)
	<-m.done
}

// loop keeps a pusher for every live data node (a new one, or one back,
// gets every held session at once), sends full syncs and drops stale
// copies.
func (m *migrator) loop() {
	defer close(m.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			m.ensurePushers()
			m.sweep(now)
		}
	}
}

// ensurePushers starts a pusher for every live data node that has none
// and stops those of nodes gone; it returns the live ones.
func (m *migrator) ensurePushers() []*pusher {
	live := map[string]bool{}
	for _, p := range m.e.members.peers() {
		if p.ID != m.ids.Node() {
			live[p.ID] = true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	var out []*pusher
	for id, p := range m.pushers {
		if !live[id] {
			close(p.stop)
			delete(m.pushers, id)
			continue
		}
		out = append(out, p)
	}
	for id := range live {
		if m.pushers[id] == nil {
			p := &pusher{m: m, peer: id, pending: map[string]*queued{}, full: true, wake: make(chan struct{}, 1), stop: make(chan struct{})}
			m.pushers[id] = p
			go p.run()
			p.poke()
			out = append(out, p)
		}
	}
	return out
}

// sweep drops copies that are stale: a copy lives as long as the
// session's lease and at least copyRefreshes full syncs since its holder
// last sent it.
func (m *migrator) sweep(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, c := range m.copies {
		if now.Sub(time.Unix(c.state.At, 0)) > max(c.state.LeaseDuration(), copyRefreshes*fullSyncEvery)+fullSyncEvery {
			m.dropCopy(id)
		}
	}
	for id, at := range m.suspect {
		if now.Sub(at) > suspectFor {
			delete(m.suspect, id)
		}
	}
}

// stateOf is st as the other nodes keep it.
func (m *migrator) stateOf(st *sessionState) nodeapi.SessionState {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := nodeapi.SessionState{ID: st.sess.ID(), Holder: m.ids.Node(), HolderBoot: m.ids.Boot(), Moves: st.moves, Seq: st.seq,
		At: time.Now().Unix(), Credential: st.sess.Credential(), Lease: uint64(st.sess.Lease() / time.Second), Consistency: string(st.consistency),
		Split: st.split, Settings: slices.Clone(st.settings), Temporary: st.temporary || st.lostTemp != nil,
		SettingsLost: st.lostSetting != nil, WriteKey: hex.EncodeToString(st.writeKey)}
	if st.timeout != nil {
		ms := st.timeout.Milliseconds()
		s.StatementTimeoutMS = &ms
	}
	if nodeapi.SettingsBytes(s.Settings) > nodeapi.MaxSettingsBytes || len(s.Settings) > nodeapi.MaxSessionSettings {
		// Too large to carry: the session moves without them, and says so.
		s.Settings, s.SettingsLost = nil, true
	}
	switch {
	case st.txn != nil && !st.txnStream:
		s.Transaction, s.CommitKey = true, hex.EncodeToString(st.txnKey)
	case st.lostTxn != nil:
		s.Transaction, s.CommitKey = true, st.lostTxn.Name
	}
	return s
}

// hold makes st one of the sessions this node holds.
func (m *migrator) hold(st *sessionState) {
	m.mu.Lock()
	m.held[st.sess.ID()] = st
	m.dropCopy(st.sess.ID())
	m.mu.Unlock()
}

// changed publishes st's new state; with wait, it returns once every live
// data node took it, or after pushWait.
func (m *migrator) changed(st *sessionState, wait bool) {
	st.mu.Lock()
	st.seq++
	st.mu.Unlock()
	m.publish(m.stateOf(st), wait)
}

// release publishes that st ended.
func (m *migrator) release(st *sessionState) {
	m.mu.Lock()
	held := m.held[st.sess.ID()] == st && !m.closed
	if held {
		delete(m.held, st.sess.ID())
	}
	m.mu.Unlock()
	if !held {
		return
	}
	st.mu.Lock()
	st.seq++
	s := nodeapi.SessionState{ID: st.sess.ID(), Holder: m.ids.Node(), HolderBoot: m.ids.Boot(), Moves: st.moves, Seq: st.seq, Ended: true}
	st.mu.Unlock()
	m.publish(s, false)
}

// publish queues s for every live data node.
func (m *migrator) publish(s nodeapi.SessionState, wait bool) {
	var dones []chan error
	for _, p := range m.ensurePushers() {
		var done chan error
		if wait {
			done = make(chan error, 1)
			dones = append(dones, done)
		}
		p.enqueue(s, done)
	}
	if len(dones) == 0 {
		return
	}
	timer := time.NewTimer(pushWait)
	defer timer.Stop()
	for _, d := range dones {
		select {
		case err := <-d:
			if err != nil {
				m.log.Warn("session state not pushed to a node; it could not adopt the session as it is now", "session", s.ID, "err", err)
			}
		case <-timer.C:
			m.log.Warn("session state push still under way after the wait", "session", s.ID, "wait", pushWait)
			return
		}
	}
}

// syncStates are what a full sync sends: the states of every session this
// node holds, and the copies of sessions whose holder is gone (dead, or
// running anew), which no holder sends any more: passed on, they outlive
// the nodes that kept them, as nodes restart one after another.
func (m *migrator) syncStates() []nodeapi.SessionState {
	m.mu.Lock()
	sts := make([]*sessionState, 0, len(m.held))
	for _, st := range m.held {
		sts = append(sts, st)
	}
	var out []nodeapi.SessionState
	for _, c := range m.copies {
		if m.orphanLocked(c.state) {
			out = append(out, c.state)
		}
	}
	m.mu.Unlock()
	for _, st := range sts {
		out = append(out, m.stateOf(st))
	}
	return out
}

// orphanLocked reports whether s's holder no longer holds it: gossip says
// it is gone, or it runs anew; m.mu is held.
func (m *migrator) orphanLocked(s nodeapi.SessionState) bool {
	if s.Holder == m.ids.Node() {
		return s.HolderBoot != m.ids.Boot()
	}
	if boot, ok := m.boots[s.Holder]; ok && boot != s.HolderBoot {
		return true
	}
	if m.e.cfg.Directory == nil {
		return true
	}
	_, live := m.e.cfg.Directory.QuackAddr(s.Holder)
	return !live
}

// receive keeps the states another node pushed.
func (m *migrator) receive(p nodeapi.SessionPush) {
	now := time.Now()
	type takeover struct {
		st *sessionState
		to string
	}
	var superseded []takeover
	m.mu.Lock()
	// It is up: a forward to it that failed before (it was down, or
	// restarting) says nothing any more. Suspected still, its sessions
	// would be adopted away from it while it holds them.
	delete(m.suspect, p.From)
	if p.From != "" && p.FromBoot != 0 && m.boots[p.From] != p.FromBoot {
		// A node new, or running anew: the copies of its earlier run's
		// sessions, and those of every other gone holder, go to it now,
		// so that they outlive this node too.
		m.boots[p.From] = p.FromBoot
		if pu := m.pushers[p.From]; pu != nil {
			defer pu.syncSoon(0)
		}
	}
	for _, s := range p.Sessions {
		if st := m.held[s.ID]; st != nil {
			if s.Ended || s.Holder == m.ids.Node() || !s.Newer(m.stateOf(st)) {
				continue
			}
			// Another node adopted it while this one could not be
			// reached (frozen, cut off): the newer holder has it.
			delete(m.held, s.ID)
			superseded = append(superseded, takeover{st, s.Holder})
		}
		old, has := m.copies[s.ID]
		switch {
		case s.Ended:
			if has && !old.state.Newer(s) {
				m.dropCopy(s.ID)
			}
		case has && old.state.Newer(s):
		case has && !s.Newer(old.state):
			old.received = now
			old.state.At = max(old.state.At, s.At)
		default:
			m.dropCopy(s.ID)
			m.copies[s.ID] = &sessionCopy{state: s, received: now}
			m.copyBytes += s.Size()
		}
	}
	if len(m.copies) > maxCopies || m.copyBytes > maxCopyBytes {
		m.evictOldest()
	}
	m.mu.Unlock()
	for _, t := range superseded {
		t.st.mu.Lock()
		t.st.movedTo = t.to
		t.st.mu.Unlock()
		m.log.Warn("session taken over by another node while this one was unreachable", "session", t.st.sess.ID(), "by", t.to)
	}
}

// dropCopy forgets the copy of session id; m.mu is held.
func (m *migrator) dropCopy(id string) {
	if c, ok := m.copies[id]; ok {
		m.copyBytes -= c.state.Size()
		delete(m.copies, id)
	}
}

// evictOldest drops the copies received longest ago until an eighth of
// each bound is free; m.mu is held.
func (m *migrator) evictOldest() {
	type aged struct {
		id string
		at time.Time
	}
	all := make([]aged, 0, len(m.copies))
	for id, c := range m.copies {
		all = append(all, aged{id, c.received})
	}
	slices.SortFunc(all, func(a, b aged) int { return a.at.Compare(b.at) })
	dropped := 0
	for _, a := range all {
		if len(m.copies) <= maxCopies-maxCopies/8 && m.copyBytes <= maxCopyBytes-maxCopyBytes/8 {
			break
		}
		m.dropCopy(a.id)
		dropped++
	}
	m.log.Warn("session copies past their bounds; the oldest dropped", "dropped", dropped, "copies", maxCopies, "bytes", maxCopyBytes)
}

// local answers a lookup: the state of a session held here, or the copy
// kept here.
func (m *migrator) local(id string) (nodeapi.SessionState, bool) {
	m.mu.Lock()
	st := m.held[id]
	c := m.copies[id]
	m.mu.Unlock()
	switch {
	case st != nil:
		return m.stateOf(st), true
	case c != nil:
		return c.state, true
	}
	return nodeapi.SessionState{}, false
}

// holds reports whether this node holds session id.
func (m *migrator) holds(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held[id] != nil
}

// copyOf is the copy of session id kept here.
func (m *migrator) copyOf(id string) (nodeapi.SessionState, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.copies[id]; c != nil {
		return c.state, true
	}
	return nodeapi.SessionState{}, false
}

// keep stores s as a copy if it is newer than the one kept.
func (m *migrator) keep(s nodeapi.SessionState) {
	m.receive(nodeapi.SessionPush{Sessions: []nodeapi.SessionState{s}})
}

// lookup asks every other live data node for session id's state and
// returns the newest; complete is set when every node asked answered
// (with a state or without).
func (m *migrator) lookup(ctx context.Context, id string) (best nodeapi.SessionState, found, complete bool) {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	type answer struct {
		s      nodeapi.SessionState
		ok     bool
		failed bool
	}
	var asked int
	answers := make(chan answer, 16)
	for _, p := range m.e.members.peers() {
		if p.ID == m.ids.Node() || m.suspected(p.ID) {
			continue
		}
		asked++
		go func() {
			s, ok, err := m.api.LookupSession(ctx, p.QuackAddr, id)
			if err != nil {
				m.log.Debug("session lookup failed", "session", id, "node", p.ID, "err", err)
			}
			answers <- answer{s, ok, err != nil}
		}()
	}
	complete = true
	for range asked {
		a := <-answers
		if a.failed {
			complete = false
		}
		if a.ok && (!found || a.s.Newer(best)) {
			best, found = a.s, true
		}
	}
	return best, found, complete
}

func (m *migrator) suspected(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.suspect[id]
	return ok && time.Since(at) < suspectFor
}

// runsAnew reports whether node id is known to run another run than boot.
func (m *migrator) runsAnew(id string, boot uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.boots[id]
	return ok && b != boot
}

// reachable reports whether node id is a live member to forward to.
func (m *migrator) reachable(id string) (string, bool) {
	if m.e.cfg.Directory == nil || m.suspected(id) {
		return "", false
	}
	return m.e.cfg.Directory.QuackAddr(id)
}

// adopter is the live data node that adopts session id when its holder
// gone failed: the highest of a hash of the id and each node's id
// (rendezvous hashing), so every node that sees the same members picks the
// same one, and no two adopt the session at once. Which nodes this one
// suspects does not count: the others may not, and would pick another.
// An adopter that is down too is found unreachable when the request is
// forwarded to it, and the request is answered session_moving until
// gossip agrees.
func (m *migrator) adopter(id, gone string) (string, string) {
	var best, addr string
	var top uint64
	for _, p := range m.e.members.peers() {
		if p.ID == gone {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(id))
		h.Write([]byte{0})
		h.Write([]byte(p.ID))
		if v := h.Sum64(); best == "" || v > top {
			best, addr, top = p.ID, p.QuackAddr, v
		}
	}
	return best, addr
}

// Locate implements node.Migrator.
func (m *migrator) Locate(ctx context.Context, c node.SessionClaims, hops int, unreachable string) (node.Locus, error) {
	if unreachable != "" {
		m.mu.Lock()
		m.suspect[unreachable] = time.Now()
		m.mu.Unlock()
		m.e.members.bal.Suspect(unreachable)
	}
	self := m.ids.Node()
	best, ok := m.copyOf(c.ID)
	looked, complete := false, false
	for {
		holder, boot := c.Owner, c.Boot
		if ok {
			holder, boot = best.Holder, best.HolderBoot
		}
		addr, live := m.reachable(holder)
		if live && m.runsAnew(holder, boot) {
			// It restarted since, and lost the session with its run.
			live = false
		}
		if m.holds(c.ID) {
			// A concurrent request of the session (a parallel FETCH)
			// adopted it here since the server looked. This node
			// keeps no copy of a session it holds, and the other
			// nodes' copies name this node or have not heard of the
			// adoption: read as below, that would be a session that
			// ended here, or one lost or moving.
			return node.Locus{Here: true}, nil
		}
		switch {
		case holder == self && boot == m.ids.Boot():
			// Held here in this run, and no more: it ended, unless
			// another node took it over since.
			if !looked {
				break
			}
			return node.Locus{}, nodeapi.Errorf(nodeapi.CodeUnknownSession, "Invalid connection id")
		case holder != self && live:
			if hops >= node.MaxHops {
				return node.Locus{}, &node.LostError{Code: node.CodeSessionMoving, Node: holder}
			}
			return node.Locus{Node: holder, Addr: addr}, nil
		case looked:
			// Its holder failed, or is this node in an earlier run.
			adopter, addr := m.adopter(c.ID, holder)
			if adopter != "" && adopter != self && hops == 0 {
				return node.Locus{Node: adopter, Addr: addr}, nil
			}
			if !complete {
				// A node that did not answer may hold a newer state (an
				// open transaction): adopting an older one could apply
				// on their own statements the client meant to be in it.
				return node.Locus{}, &node.LostError{Code: node.CodeSessionMoving, Node: holder}
			}
			if !ok {
				m.log.Info("session lost: no node holds its state", "session", c.ID, "holder", holder)
				return node.Locus{}, &node.LostError{Code: node.CodeSessionLost, Node: holder}
			}
			return node.Locus{Adopt: true, Credential: best.Credential, Lease: best.LeaseDuration(), From: holder, State: best}, nil
		}
		looked = true
		s, found, all := m.lookup(ctx, c.ID)
		complete = all
		if found && (!ok || s.Newer(best)) {
			best, ok = s, true
			m.keep(s)
		}
	}
}

// Adopt implements node.Migrator: s takes the state its holder pushed
// last. Its settings run again in its connection here; its read floor is
// set at its first read (restoreFloor); a transaction and temporary
// objects it had are answered as lost.
func (m *migrator) Adopt(ctx context.Context, s *node.Session, state any) error {
	ns, ok := state.(nodeapi.SessionState)
	if !ok {
		return fmt.Errorf("duckraft: adopt session %s: no state", s.ID())
	}
	e := m.e
	st := &sessionState{gen: s.Generation(), consistency: e.cfg.Consistency, lastIndex: e.cfg.Store.CommitIndex(), sess: s,
		split: ns.Split, moves: ns.Moves + 1, needFloor: true}
	if l, err := ParseLevel(ns.Consistency); err == nil {
		st.consistency = l
	}
	if ns.StatementTimeoutMS != nil && *ns.StatementTimeoutMS >= 0 {
		d := time.Duration(*ns.StatementTimeoutMS) * time.Millisecond
		st.timeout = &d
	}
	if key, err := hex.DecodeString(ns.WriteKey); err == nil && len(key) == writeKeyBytes {
		st.writeKey = key
	}
	for _, stmt := range ns.Settings {
		rows, err := node.LocalExecutor{}.Query(ctx, s, stmt)
		if err != nil {
			// Valid where the session ran it; here it may name what is
			// gone since (USE of a dropped schema). The session goes on
			// without it, and its next statement says so.
			m.log.Warn("session setting not restored", "session", s.ID(), "setting", stmt, "err", err)
			st.lostSetting = settingLost(fmt.Sprintf("Connection Error: the session setting %q could not be restored on node %s "+
				"after the session moved from %s (%v); the session goes on without it: set it again", stmt, m.ids.Node(), ns.Holder, err))
			continue
		}
		rows.Close()
		st.settings = append(st.settings, stmt)
	}
	if len(st.settings) > 0 {
		st.settingsVersion = 1
	}
	if ns.SettingsLost && st.lostSetting == nil {
		st.lostSetting = settingLost(fmt.Sprintf("Connection Error: the session's settings were too large to follow it from node %s "+
			"(more than %d bytes of SET statements); the session goes on on node %s without them: set them again",
			ns.Holder, nodeapi.MaxSettingsBytes, m.ids.Node()))
	}
	if ns.Transaction {
		st.lostTxn = &node.LostError{Code: node.CodeTransactionLost, Node: ns.Holder, Name: ns.CommitKey}
	}
	if ns.Temporary {
		st.lostTemp = &node.LostError{Code: node.CodeTemporaryLost, Node: ns.Holder}
	}
	s.SetValue(stateKey{}, st)
	m.hold(st)
	m.changed(st, true)
	return nil
}

// SessionOpened implements node.Migrator: the other nodes learn of a new
// session at once, so that it can move before its first change.
func (m *migrator) SessionOpened(s *node.Session) {
	st := m.e.state(s)
	m.hold(st)
	m.changed(st, false)
}

// Alive implements node.Migrator.
func (m *migrator) Alive(id string) bool {
	if m.e.cfg.Directory == nil {
		return false
	}
	_, ok := m.e.cfg.Directory.QuackAddr(id)
	return ok
}

// SessionsHandler serves nodeapi.SessionsPath to members.
func (e *Executor) SessionsHandler() http.Handler {
	return nodeapi.SessionsHandler(e.cfg.NodeCredential, func(p nodeapi.SessionPush) {
		if e.mig != nil {
			e.mig.receive(p)
		}
	}, func(id string) (nodeapi.SessionState, bool) {
		if e.mig == nil {
			return nodeapi.SessionState{}, false
		}
		return e.mig.local(id)
	})
}

// ReadIndexHandler serves nodeapi.ReadIndexPath to members: the leader's
// read index, which a session that moved here reads after.
func (e *Executor) ReadIndexHandler() http.Handler {
	return nodeapi.ReadIndexHandler(e.cfg.NodeCredential, func(ctx context.Context) (uint64, error) {
		idx, err := e.cfg.Store.ReadIndex(ctx)
		return idx, APIError(err)
	})
}

// leaderReadIndex is the leader's commit index, confirmed by a quorum:
// every write acknowledged to anyone before the call is at or below it.
// It waits up to LeaderWait for a leader.
func (e *Executor) leaderReadIndex(ctx context.Context) (uint64, error) {
	deadline := time.Now().Add(e.cfg.LeaderWait)
	for {
		var idx uint64
		var err error
		leader := e.cfg.Store.LeaderID()
		if e.cfg.Store.IsLeader() {
			idx, err = e.cfg.Store.ReadIndex(ctx)
		} else if addr, ok := e.writes.leaderAddr(); ok && e.mig != nil {
			idx, err = e.mig.api.ReadIndex(ctx, addr)
		} else {
			err = errors.New("no leader known")
		}
		if err == nil {
			return idx, nil
		}
		if time.Now().After(deadline) {
			return 0, err
		}
		if err := awaitLeaderChange(ctx, e.cfg.Store, leader); err != nil {
			return 0, err
		}
	}
}

// restoreFloor gives a session that moved here its read floor before its
// first session read: the leader's commit index, at or above every write
// it saw acknowledged on the node it was lost with.
func (e *Executor) restoreFloor(ctx context.Context, st *sessionState) error {
	st.mu.Lock()
	need := st.needFloor
	st.mu.Unlock()
	if !need {
		return nil
	}
	idx, err := e.leaderReadIndex(ctx)
	if err != nil {
		return fmt.Errorf("duckraft: this session moved here from a node that failed, and no leader could confirm "+
			"what it has read (%w); its reads wait for one: send the read again", err)
	}
	st.mu.Lock()
	st.lastIndex = max(st.lastIndex, idx)
	st.needFloor = false
	st.mu.Unlock()
	return nil
}

// sessionChanged publishes a change of st's state that a node adopting it
// must know, and waits for the other nodes to take it.
func (e *Executor) sessionChanged(st *sessionState) {
	if e.mig != nil && st.sess != nil {
		e.mig.changed(st, true)
	}
}

// sessionLosses answers, before anything else, the statements of a session
// that lost part of its state when it moved here: once for its temporary
// objects and a setting that could not be restored, and first, for its
// transaction, every statement until ROLLBACK (which succeeds) or COMMIT
// (which fails), so that nothing the client meant to be in it applies on
// its own. handled is false when nothing is lost.
func (e *Executor) sessionLosses(st *sessionState, stmts []classify.Statement) (rows node.Rows, handled bool, err error) {
	st.mu.Lock()
	defer func() {
		st.mu.Unlock()
		if handled && e.mig != nil {
			go e.mig.changed(st, false)
		}
	}()
	switch {
	case st.movedTo != "":
		return nil, true, &node.LostError{Code: node.CodeSessionMoving, Node: st.movedTo}
	case st.lostTxn != nil:
		err = st.lostTxn
		if len(stmts) == 1 {
			switch stmts[0].Class {
			case classify.Rollback:
				st.lostTxn = nil
				return successRows(), true, nil
			case classify.Commit:
				st.lostTxn = nil
			}
		}
		return nil, true, err
	case st.lostTemp != nil:
		err, st.lostTemp = st.lostTemp, nil
		return nil, true, err
	case st.lostSetting != nil:
		err, st.lostSetting = st.lostSetting, nil
		return nil, true, err
	}
	return nil, false, nil
}

// appendLoss is the error of an append in a session that lost its
// transaction or moved away, nil otherwise: the append must not apply on
// its own.
func (st *sessionState) appendLoss() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case st.movedTo != "":
		return &node.LostError{Code: node.CodeSessionMoving, Node: st.movedTo}
	case st.lostTxn != nil:
		return st.lostTxn
	}
	return nil
}

// SessionOpened implements node.Migrator.
func (e *Executor) SessionOpened(s *node.Session) {
	if e.mig != nil {
		e.mig.SessionOpened(s)
	}
}

// Locate implements node.Migrator.
func (e *Executor) Locate(ctx context.Context, c node.SessionClaims, hops int, unreachable string) (node.Locus, error) {
	if e.mig == nil {
		return node.Locus{}, nodeapi.Errorf(nodeapi.CodeUnknownSession, "Invalid connection id")
	}
	return e.mig.Locate(ctx, c, hops, unreachable)
}

// Adopt implements node.Migrator.
func (e *Executor) Adopt(ctx context.Context, s *node.Session, state any) error {
	if e.mig == nil {
		return nodeapi.Errorf(nodeapi.CodeUnknownSession, "Invalid connection id")
	}
	return e.mig.Adopt(ctx, s, state)
}

// Leave stops publishing this node's sessions: the node is stopping, and
// the sessions its server ends now stay with the other nodes, which adopt
// them when their clients come back, as after a crash. Call it before the
// server closes.
func (e *Executor) Leave() {
	if e.mig != nil {
		e.mig.close()
	}
}

// Moved implements node.Migrator.
func (e *Executor) Moved(s *node.Session) bool {
	st, ok := s.Value(stateKey{}).(*sessionState)
	if !ok {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.movedTo != ""
}

// Alive implements node.Migrator.
func (e *Executor) Alive(id string) bool {
	if e.mig == nil {
		return false
	}
	return e.mig.Alive(id)
}

// sessionStatements records what session statements that ran in the
// client's own connection changed: settings the session's reads elsewhere
// replay, and temporary objects (PREPARE, CREATE SECRET) that cannot move
// with it; the other nodes learn of either.
func (e *Executor) sessionStatements(st *sessionState, stmts []classify.Statement) {
	settings := followingSettings(stmts)
	st.rememberSettings(settings)
	temporary := makesTemporary(stmts)
	if temporary {
		st.mu.Lock()
		temporary = !st.temporary
		st.temporary = true
		st.mu.Unlock()
	}
	if len(settings) > 0 || temporary {
		e.sessionChanged(st)
	}
}

// makesTemporary reports whether stmts create objects that live only in
// the session's connection: prepared statements and secrets (temporary
// tables and views are refused: node/sqltext's rules).
func makesTemporary(stmts []classify.Statement) bool {
	for _, st := range stmts {
		if st.Err() != nil {
			continue
		}
		switch verb, _ := st.Verb(); verb {
		case "prepare", "create":
			return true
		}
	}
	return false
}

// beginTxn records a transaction the session opened: the key its COMMIT
// will carry (the one SET duckraft_write_key named, else a new one; kept
// apart until COMMIT so that the rows it stages ahead do not take it),
// and whether an insert stream opened it. The other nodes learn of a
// client's transaction before BEGIN is answered: a node that adopts the
// session must not apply its later statements one by one.
func (e *Executor) beginTxn(ctx context.Context, st *sessionState) {
	st.mu.Lock()
	st.txnKey, st.writeKey = st.writeKey, nil
	if st.txnKey == nil {
		st.txnKey = newCommand(nil).Key
	}
	st.txnStream = node.IsStreamStatement(ctx)
	stream := st.txnStream
	st.mu.Unlock()
	if !stream {
		e.sessionChanged(st)
	}
}

// commitKey gives the transaction's COMMIT the key chosen at BEGIN,
// unless the client set one inside the transaction, which it uses.
func (st *sessionState) commitKey(cmd *wal.Command) {
	st.mu.Lock()
	cmd.Key = st.txnKey
	if st.writeKey != nil {
		cmd.Key, st.writeKey = st.writeKey, nil
	}
	st.mu.Unlock()
}

// endTxn records that the session's transaction ended; the other nodes
// learn of it before the COMMIT or ROLLBACK is answered.
func (e *Executor) endTxn(st *sessionState) {
	st.mu.Lock()
	stream := st.txnStream
	st.txnKey, st.txnStream = nil, false
	st.mu.Unlock()
	if !stream {
		e.sessionChanged(st)
	}
}

// settingLost is the error of a session setting that did not follow its
// session, answered with the code setting_lost.
type settingLost string

func (e settingLost) Error() string { return string(e) }
func (e settingLost) Unwrap() error { return outcome.ErrSettingLost }
