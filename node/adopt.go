package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/wire"
)

// A Migrator is an Executor that lets a session outlive the node it was
// opened on, and any node serve any session: routing's. The server asks it
// where a request goes whose session it does not hold (forward.go), and
// hands it the state of a session it adopts.
type Migrator interface {
	// SessionOpened is told of every session the server opens, before
	// the client learns its id.
	SessionOpened(s *Session)
	// Locate says where a request for session c goes when this server
	// did not hold it: to the node at Locus.Addr, or here (Locus.Adopt,
	// or Locus.Here when a concurrent request adopted it meanwhile).
	// hops counts the members that forwarded the request already (0 from
	// a client); unreachable names a node a forward just failed to
	// reach. An error is the request's answer.
	Locate(ctx context.Context, c SessionClaims, hops int, unreachable string) (Locus, error)
	// Adopt installs Locus.State in s, a session this server has just
	// adopted, before the request that found it is served. An error is
	// that request's answer, and the server drops s.
	Adopt(ctx context.Context, s *Session, state any) error
	// Alive reports whether gossip lists node as a live member: a forward
	// to a node that stops being one is given up.
	Alive(node string) bool
	// Moved reports whether s, held here, was adopted by another node
	// meanwhile (this one was frozen or cut off): the server drops it,
	// and its requests go where it is now.
	Moved(s *Session) bool
}

// Locus is where a request for a session this server does not hold goes.
type Locus struct {
	// Node and Addr name the node that holds the session (or is to adopt
	// it), and its Quack address, to forward the request to.
	Node, Addr string
	// Adopt says to adopt the session here: Credential is what it opened
	// with, which is checked again on every request; Lease its heartbeat
	// lease (0: the server's default); From the node it was lost with;
	// State what Migrator.Adopt installs.
	Adopt      bool
	Credential string
	// Here says the session is held here after all: a concurrent request
	// of it (a parallel FETCH) adopted it since the server looked.
	Here  bool
	Lease time.Duration
	From  string
	State any
}

// Codes of what a session loses when the node that held it fails
// (LostError), and of a request that could not follow its session; outcome
// documents each.
const (
	CodeSessionLost     = outcome.SessionLost
	CodeResultLost      = outcome.ResultLost
	CodeStreamLost      = outcome.StreamLost
	CodeTemporaryLost   = outcome.TemporaryLost
	CodeTransactionLost = outcome.TransactionLost
	CodeRequestLost     = outcome.RequestLost
	CodeSessionMoving   = outcome.SessionMoving
)

// LostError answers a request of a session that moved to this node when
// the node that held it failed, for what could not move with it: the code
// says what (CodeResultLost, …), the message what to do. Its text is in
// DuckDB's "<Type> Error: …" form, and it unwraps to the code's sentinel
// (outcome.ErrSessionLost, …), whose code it is answered with.
type LostError struct {
	Code outcome.Code
	// Node is the node the session was lost with or moved from.
	Node string
	// Name is what was lost, where the code does not say it all: the
	// insert stream's id; for a transaction, the idempotency key its
	// COMMIT carries (hex), if it had one.
	Name string
}

func (e *LostError) Error() string {
	switch e.Code {
	case CodeSessionLost:
		return fmt.Sprintf("Connection Error: session lost with node %s, which failed before any other node learned its "+
			"state: connect again", e.Node)
	case CodeResultLost:
		return fmt.Sprintf("Connection Error: result lost with node %s, which held this session and failed; the session "+
			"goes on on another node: run the query again", e.Node)
	case CodeStreamLost:
		return fmt.Sprintf("Connection Error: insert stream '%s' lost with node %s, which held this session and failed; "+
			"nothing of it was applied: run the INSERT again", e.Name, e.Node)
	case CodeTemporaryLost:
		return fmt.Sprintf("Connection Error: the temporary objects of this session (prepared statements, secrets) were "+
			"lost with node %s, which held it and failed; the session goes on on another node without them: create them "+
			"again", e.Node)
	case CodeTransactionLost:
		msg := fmt.Sprintf("TransactionContext Error: transaction lost with node %s, which held this session and failed: "+
			"it is rolled back, and nothing of it applied unless its COMMIT had already been sent", e.Node)
		if e.Name != "" {
			msg += fmt.Sprintf("; to apply it at most once whatever happened, run SET duckraft_write_key = '%s' "+
				"and send the whole transaction again", e.Name)
		}
		return msg + ". ROLLBACK (or COMMIT) ends it here"
	case CodeRequestLost:
		return fmt.Sprintf("Connection Error: node %s, which held this session, failed while it handled this request: "+
			"whether it took effect is unknown; the session goes on on another node", e.Node)
	case CodeSessionMoving:
		return fmt.Sprintf("Connection Error: this session is moving between nodes (last seen on %s) and the request "+
			"was not run: send it again", e.Node)
	}
	return fmt.Sprintf("Connection Error: %s with node %s", e.Code, e.Node)
}

// Unwrap returns the sentinel of e's code.
func (e *LostError) Unwrap() error { return e.Code.Err() }

// movedKey is the Session value naming the node an adopted session was
// lost with.
type movedKey struct{}

// MovedFrom returns the node the session was lost with when this server
// adopted it; "" for a session opened here.
func (s *Session) MovedFrom() string {
	from, _ := s.Value(movedKey{}).(string)
	return from
}

// Credential returns what the session opened with (its token), which a
// Migrator hands the nodes that may adopt it.
func (s *Session) Credential() string { return s.auth }

// Lease returns the session's heartbeat lease (for a Q1 session, its idle
// timeout).
func (s *Session) Lease() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease
}

// adoptions serialises the adoptions of one session on a server: requests
// of one session arrive at once (parallel FETCH), and only the first may
// adopt it.
type adoptions struct {
	mu       sync.Mutex
	inflight map[string]chan struct{}
}

// begin returns whether the caller adopts id; otherwise done is closed
// when the adoption under way ends.
func (a *adoptions) begin(id string) (done chan struct{}, first bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ch, ok := a.inflight[id]; ok {
		return ch, false
	}
	if a.inflight == nil {
		a.inflight = make(map[string]chan struct{})
	}
	ch := make(chan struct{})
	a.inflight[id] = ch
	return ch, true
}

// wait returns once no adoption of id is under way here, or ctx's error
// if it ends first.
func (a *adoptions) wait(ctx context.Context, id string) error {
	a.mu.Lock()
	ch, ok := a.inflight[id]
	a.mu.Unlock()
	if !ok {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *adoptions) end(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	close(a.inflight[id])
	delete(a.inflight, id)
}

// adopt opens session c here, as loc says, unless a concurrent request of
// it already has.
func (s *Server) adopt(ctx context.Context, mig Migrator, c SessionClaims, loc Locus, client string) (err error) {
	for {
		if s.session(c.ID) != nil {
			return nil
		}
		done, first := s.adopting.begin(c.ID)
		if first {
			break
		}
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer s.adopting.end(c.ID)
	if s.session(c.ID) != nil {
		return nil
	}
	if s.cfg.ObserveAdopt != nil {
		defer func() { s.cfg.ObserveAdopt(err) }()
	}
	lease := loc.Lease
	switch {
	case c.Gen != wire.Q3:
		lease = s.cfg.IdleTimeout
	case lease <= 0 || lease > s.cfg.MaxLease:
		lease = s.cfg.MaxLease
	}
	conn, err := s.cfg.DB.ConnectClient()
	if err != nil {
		return fmt.Errorf("adopt session: %w", err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	// An adopted session counts toward MaxSessions, but is not refused by
	// its address's cap: its client was admitted where it connected, and
	// the address it comes from here is a balancer's or a member's.
	sess := &Session{id: c.ID, gen: c.Gen, conn: conn, ctx: sctx, cancel: cancel, lastUsed: time.Now(),
		auth: loc.Credential, role: c.Role, lease: lease, client: client,
		principal: clientPrincipal(loc.Credential, client),
		inflate:   newByteBudget(s.cfg.MaxSessionDecompressedBytes)}
	sess.SetValue(movedKey{}, loc.From)
	// Registered before the Executor installs its state, so that the
	// other nodes, which learn from the Executor that it is held here,
	// find it here; requests of it wait until the adoption ends (admit),
	// since one served before would run without that state (outside the
	// transaction the session lost, at the default consistency).
	s.mu.Lock()
	if s.closed || s.clients >= s.cfg.MaxSessions {
		s.mu.Unlock()
		sess.close()
		return codedError{fmt.Sprintf("too many sessions: the server allows %d", s.cfg.MaxSessions), outcome.TooManySessions}
	}
	s.sessions[c.ID] = sess
	s.clients++
	s.perClient[sess.client]++
	s.mu.Unlock()
	if err := mig.Adopt(ctx, sess, loc.State); err != nil {
		// Not ended: the Executor undid what it installed, and the
		// session's state stays with the other nodes for a later try.
		s.mu.Lock()
		s.forgetLocked(sess)
		s.mu.Unlock()
		sess.close()
		return err
	}
	s.log.Info("session adopted", "session", c.ID, "from", loc.From, "generation", c.Gen, "role", c.Role)
	return nil
}

// codedError is an error with a code of the server's own and a message
// other than its sentinel's.
type codedError struct {
	msg  string
	code outcome.Code
}

func (e codedError) Error() string { return e.msg }
func (e codedError) Unwrap() error { return e.code.Err() }

// resultGone answers a FETCH whose result the session does not have: an
// adopted session that has run nothing here yet was streaming it on the
// node it was lost with.
func resultGone(sess *Session, res *result) response {
	if from := sess.MovedFrom(); from != "" && res == nil {
		return failure(&LostError{Code: CodeResultLost, Node: from})
	}
	return errorResponse(ErrResultClosed.Error())
}

// streamGone answers a SEND_DATA of an insert stream the session does not
// have: an adopted session that opened none here had it open on the node
// it was lost with.
func streamGone(sess *Session, id string) response {
	sess.mu.Lock()
	opened := len(sess.streams) > 0
	sess.mu.Unlock()
	if from := sess.MovedFrom(); from != "" && !opened {
		return failure(&LostError{Code: CodeStreamLost, Node: from, Name: id})
	}
	return errorResponse(fmt.Sprintf("No active data stream '%s'", id))
}

// streamStatementKey marks the context of the statements an insert stream
// runs itself (its own BEGIN and COMMIT).
type streamStatementKey struct{}

// streamStatement marks ctx as an insert stream's own statement.
func streamStatement(ctx context.Context) context.Context {
	return context.WithValue(ctx, streamStatementKey{}, true)
}

// IsStreamStatement reports whether the statement running under ctx is
// one an insert stream runs itself (the BEGIN and COMMIT of a stream that
// opened its own transaction), not the client's: a Migrator does not make
// the client answer for such a transaction when the session moves.
func IsStreamStatement(ctx context.Context) bool {
	v, _ := ctx.Value(streamStatementKey{}).(bool)
	return v
}
