package replication

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// ErrAbsurdTerm is the error of a Raft RPC, or of a peer's answer to one,
// whose term is too far beyond this node's to be real: adopting it would
// let one peer push every term toward the top of uint64, where it wraps
// and elections fail for good.
var ErrAbsurdTerm = errors.New("replication: absurd raft term")

const (
	// maxTermJump is how far beyond this node's current term a peer's term
	// may be. Each election raises the term by one; a node that missed a
	// million elections is not a real peer.
	maxTermJump = 1 << 20
	// maxTerm is the highest term accepted at all.
	maxTerm = 1 << 62
)

// ErrStaleSnapshot answers an InstallSnapshot that is older than this
// node's own state while the node's log no longer holds the entries after
// it. hashicorp/raft would install it, roll the database back to the
// snapshot and then panic reading the compacted entries ("log not found";
// hashicorp/raft#697). A leader's replication of a server it removed can
// send one: it keeps the server's old position while it waits to retry,
// and the server may be back, caught up, at the same address.
var ErrStaleSnapshot = errors.New("replication: snapshot older than this node's state")

// rpcGuard wraps raft's network transport and refuses, before raft sees
// them, the RPCs whose term is absurd (see ErrAbsurdTerm) and the
// snapshots raft would install wrongly (see ErrStaleSnapshot), and the
// answers that carry an absurd term. It embeds the transport itself, so
// raft finds the optional interfaces (WithClose, WithPreVote) the
// transport has.
type rpcGuard struct {
	*raft.NetworkTransport
	// current is this node's current term.
	current func() uint64
	// logs is this node's log store.
	logs raft.LogStore
	// refusals logs the refused RPCs, by the address the sender claims.
	refusals *refusalLog

	// lastVote is the last RequestVote raft was handed (watchLeaderDeath
	// reads it).
	lastVote atomic.Pointer[voteRequest]
	// standing is when this node last stood for election through
	// startElection, in Unix nanoseconds, and standFor how long after it
	// this node refuses pre-votes itself (see startElection).
	standing atomic.Int64
	standFor time.Duration

	consumer chan raft.RPC
	done     chan struct{}
	once     sync.Once
	closeErr error
}

// newRPCGuard wraps t; current reports this node's current term and logs
// is its log store (nil skips the snapshot check).
func newRPCGuard(t *raft.NetworkTransport, current func() uint64, logs raft.LogStore, log *slog.Logger) *rpcGuard {
	g := &rpcGuard{NetworkTransport: t, current: current, logs: logs, refusals: newRefusalLog(log, time.Minute),
		consumer: make(chan raft.RPC), done: make(chan struct{})}
	go g.filter()
	return g
}

// absurd returns an ErrAbsurdTerm error if term is absurd.
func (g *rpcGuard) absurd(term uint64) error {
	cur := g.current()
	if term >= maxTerm || term > cur+maxTermJump {
		return fmt.Errorf("%w: %d, current term %d", ErrAbsurdTerm, term, cur)
	}
	return nil
}

// refuse answers rpc with the error check finds, if any, and logs it.
// TimeoutNow carries no term: the election it starts is at this node's
// term plus one.
func (g *rpcGuard) refuse(rpc raft.RPC) bool {
	err := g.check(rpc.Command)
	if err == nil {
		return false
	}
	from := "unknown"
	if h, ok := rpc.Command.(raft.WithRPCHeader); ok {
		from = string(h.GetRPCHeader().Addr)
	}
	g.refusals.refuse(from, err)
	if rpc.Reader == nil {
		rpc.Respond(nil, err)
		return true
	}
	// The sender writes the whole snapshot before it reads the answer.
	// Reading it here would hold up the RPCs behind it.
	go func() {
		_, _ = io.Copy(io.Discard, rpc.Reader)
		rpc.Respond(nil, err)
	}()
	return true
}

// check returns an ErrAbsurdTerm error if the RPC cmd carries an absurd
// term, and an ErrStaleSnapshot error for a snapshot raft must not install.
func (g *rpcGuard) check(cmd any) error {
	switch c := cmd.(type) {
	case *raft.AppendEntriesRequest:
		return g.absurd(c.Term)
	case *raft.RequestVoteRequest:
		return g.absurd(c.Term)
	case *raft.RequestPreVoteRequest:
		return g.absurd(c.Term)
	case *raft.InstallSnapshotRequest:
		if err := g.absurd(c.Term); err != nil {
			return err
		}
		return g.stale(c.LastLogIndex)
	}
	return nil
}

// stale returns an ErrStaleSnapshot error if a snapshot up to index would
// leave raft reading entries its log no longer has: the log goes on past
// the snapshot but starts after the entry that follows it. Raft keeps its
// last log index across an install, so it would take that tail as its log
// and apply from index+1. Such a node compacted past index+1, so it
// applied more than the snapshot holds and loses nothing by refusing; the
// leader's live replication never sends one, as it tracks the node's
// answers.
func (g *rpcGuard) stale(index uint64) error {
	if g.logs == nil {
		return nil
	}
	first, err := g.logs.FirstIndex()
	if err != nil {
		return fmt.Errorf("%w: read first log index: %v", ErrStaleSnapshot, err)
	}
	last, err := g.logs.LastIndex()
	if err != nil {
		return fmt.Errorf("%w: read last log index: %v", ErrStaleSnapshot, err)
	}
	if last > index && first > index+1 {
		return fmt.Errorf("%w: snapshot up to %d, log holds %d..%d", ErrStaleSnapshot, index, first, last)
	}
	return nil
}

// filter passes the transport's RPCs on to raft, answering those check
// refuses itself.
func (g *rpcGuard) filter() {
	in := g.NetworkTransport.Consumer()
	for {
		select {
		case rpc := <-in:
			if g.refuse(rpc) {
				continue
			}
			if _, ok := rpc.Command.(*raft.RequestPreVoteRequest); ok && g.refusingPreVotes() {
				rpc.Respond(&raft.RequestPreVoteResponse{Term: g.current(),
					RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, Addr: g.EncodePeer("", g.LocalAddr())}}, nil)
				continue
			}
			if rv, ok := rpc.Command.(*raft.RequestVoteRequest); ok {
				g.lastVote.Store(&voteRequest{at: time.Now(), term: rv.Term,
					lastLogTerm: rv.LastLogTerm, lastLogIndex: rv.LastLogIndex})
			}
			select {
			case g.consumer <- rpc:
			case <-g.done:
				return
			}
		case <-g.done:
			return
		}
	}
}

// voteRequest is what a candidate's RequestVote said of it.
type voteRequest struct {
	at                        time.Time
	term                      uint64
	lastLogTerm, lastLogIndex uint64
}

// errGuardClosed is startElection's error once the transport is closed.
var errGuardClosed = errors.New("replication: raft transport closed")

// startElection hands raft a TimeoutNow, as a leader transferring its
// leadership sends one: raft becomes a candidate at once, without a
// pre-vote, and its RequestVote asks the voters to vote even though they
// still know a leader. Voting stays raft's (one vote per term, for a log
// at least as up to date as the voter's), so this changes when an
// election starts, never who may win it. id and addr are this node's.
//
// For standFor after it, this node refuses pre-votes itself: raft grants
// them while it is a candidate without a leader, and a survivor whose
// heartbeat timeout fires before this node's RequestVote reaches it would
// pass its pre-vote, ask for votes in the same term and split the vote.
// Refused, it waits as a candidate without a leader, and votes for this
// node when its RequestVote comes. A pre-vote decides nothing; refusing
// one only delays that candidate.
func (g *rpcGuard) startElection(id raft.ServerID, addr raft.ServerAddress) error {
	g.standing.Store(time.Now().UnixNano())
	resp := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: g.EncodePeer(id, addr)}},
		RespChan: resp}
	select {
	case g.consumer <- rpc:
	case <-g.done:
		return errGuardClosed
	}
	select {
	case r := <-resp:
		return r.Error
	case <-g.done:
		return errGuardClosed
	}
}

// refusingPreVotes reports whether this node stood for election less than
// standFor ago.
func (g *rpcGuard) refusingPreVotes() bool {
	at := g.standing.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < g.standFor
}

// Consumer implements raft.Transport: the RPCs that passed the check.
func (g *rpcGuard) Consumer() <-chan raft.RPC { return g.consumer }

// SetHeartbeatHandler implements raft.Transport: heartbeats take a fast
// path past Consumer, so they are checked here.
func (g *rpcGuard) SetHeartbeatHandler(cb func(raft.RPC)) {
	if cb == nil {
		g.NetworkTransport.SetHeartbeatHandler(nil)
		return
	}
	g.NetworkTransport.SetHeartbeatHandler(func(rpc raft.RPC) {
		if !g.refuse(rpc) {
			cb(rpc)
		}
	})
}

// AppendEntries implements raft.Transport, refusing an absurd answer.
func (g *rpcGuard) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if err := g.NetworkTransport.AppendEntries(id, target, args, resp); err != nil {
		return err
	}
	return g.absurd(resp.Term)
}

// RequestVote implements raft.Transport, refusing an absurd answer.
func (g *rpcGuard) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if err := g.NetworkTransport.RequestVote(id, target, args, resp); err != nil {
		return err
	}
	return g.absurd(resp.Term)
}

// RequestPreVote implements raft.WithPreVote, refusing an absurd answer.
func (g *rpcGuard) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if err := g.NetworkTransport.RequestPreVote(id, target, args, resp); err != nil {
		return err
	}
	return g.absurd(resp.Term)
}

// InstallSnapshot implements raft.Transport, refusing an absurd answer.
func (g *rpcGuard) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if err := g.NetworkTransport.InstallSnapshot(id, target, args, resp, data); err != nil {
		return err
	}
	return g.absurd(resp.Term)
}

// Close implements raft.WithClose. Both raft's shutdown and Store.Close
// call it.
func (g *rpcGuard) Close() error {
	g.once.Do(func() {
		close(g.done)
		g.closeErr = g.NetworkTransport.Close()
	})
	return g.closeErr
}

// raftTerm reports the current term of a raft node once it exists, and
// before that the term kept in the stable store.
type raftTerm struct {
	r      atomic.Pointer[raft.Raft]
	stable raft.StableStore
}

// keyCurrentTerm is where raft keeps its current term in the stable store.
var keyCurrentTerm = []byte("CurrentTerm")

func (t *raftTerm) current() uint64 {
	if r := t.r.Load(); r != nil {
		return r.CurrentTerm()
	}
	v, _ := t.stable.GetUint64(keyCurrentTerm)
	return v
}
