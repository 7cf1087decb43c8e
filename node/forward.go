package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/node/wire"
)

// Any node of a cluster serves any session. A request whose session this
// server does not hold is forwarded, body and answer byte for byte, to the
// node that holds it, which its signed id names (SessionIDs) or the
// Migrator knows of; a session whose node failed is adopted here or on
// the one node the Migrator picks (adopt.go). A balancer in front of the
// nodes thus needs no stickiness, and may use the affinity cookie or
// DuckDB 2.0's X-Quack-Connection-Id header to save the hop.

// Headers and the cookie of the cluster's session routing.
const (
	// HopHeader marks a Quack request that a member forwarded to the
	// node it found holding the session (or chose to adopt it); its value
	// counts the members that forwarded it. It counts only on a member's
	// request (the node credential in wire.MemberHeader), and a request
	// that has made MaxHops hops is never forwarded again, so a request
	// cannot loop between members whose views differ.
	HopHeader = "Duckraft-Hop"
	// ConnectionIDHeader is the header with which DuckDB 2.0's client
	// names its session on every request after the handshake. A node
	// refuses a request whose header names another session than its
	// message, so a balancer may key on it.
	ConnectionIDHeader = "X-Quack-Connection-Id"
	// AffinityCookie is the cookie every answer sets to the node that
	// served it: the node holding the session. A balancer that sends a
	// request to the node its cookie names saves the forwarding hop.
	AffinityCookie = "duckraft_node"
	// MaxHops bounds the members a request passes through.
	MaxHops = 2
)

// ClusterSessions configures a server that is one of a cluster's nodes.
// Its forwarded requests carry Config.MemberCredential, which it needs.
type ClusterSessions struct {
	// IDs mints and checks the session ids every member signs.
	IDs *SessionIDs
	// HTTP sends forwarded requests; nil is a client of its own. TLS says
	// the nodes serve HTTPS.
	HTTP *http.Client
	TLS  bool
}

// hopDialTimeout bounds connecting to the node a request is forwarded to:
// a node that just died is given up quickly and the session adopted.
const hopDialTimeout = 2 * time.Second

var defaultHopClient = &http.Client{Transport: &http.Transport{
	DialContext:         (&net.Dialer{Timeout: hopDialTimeout}).DialContext,
	MaxIdleConnsPerHost: 64,
	IdleConnTimeout:     90 * time.Second,
	DisableCompression:  true,
}}

// migrator is the Executor as a Migrator when the server is a cluster's
// node; nil otherwise. Without the members' credential no hop could be
// told from a client's request, and none could be bounded.
func (s *Server) migrator() Migrator {
	if s.cfg.Cluster == nil || s.cfg.Cluster.IDs == nil || s.cfg.MemberCredential == "" {
		return nil
	}
	mig, _ := s.cfg.Executor.(Migrator)
	return mig
}

// sessionID is the id of a new session of role in generation g: one the
// cluster's members can route (SessionIDs), or random when the server is
// no cluster's.
func (s *Server) sessionID(random string, g wire.Generation, role tokens.Role) string {
	if s.migrator() != nil {
		return s.cfg.Cluster.IDs.New(g, role)
	}
	return random
}

// opened tells the Migrator of a session this server opened for a
// client. A member's sessions (a router's reads routed here) are not
// its: the member opens another when one is gone.
func (s *Server) opened(_ context.Context, sess *Session) {
	if mig := s.migrator(); mig != nil && !sess.member {
		mig.SessionOpened(sess)
	}
}

// routeQuack serves a Quack request, with the affinity cookie naming this
// node; a relayed answer carries the holder's instead.
func (s *Server) routeQuack(w http.ResponseWriter, r *http.Request) {
	if s.migrator() != nil {
		http.SetCookie(w, &http.Cookie{Name: AffinityCookie, Value: s.cfg.Cluster.IDs.Node(), Path: "/", HttpOnly: true})
	}
	s.serveQuack(w, r)
}

// away is where a request goes whose session another node holds.
type away struct {
	claims SessionClaims
	hops   int
	loc    Locus
}

// checkConnectionID refuses a request whose X-Quack-Connection-Id header
// names another session than its message, so that a balancer may trust
// the header.
func checkConnectionID(ctx context.Context, h wire.Header) *response {
	named := RequestHeader(ctx).Get(ConnectionIDHeader)
	if named == "" || h.ConnectionID == "" || named == h.ConnectionID {
		return nil
	}
	resp := errorResponse(fmt.Sprintf("the %s header names another session than the message: %q, not %q",
		ConnectionIDHeader, named, h.ConnectionID))
	return &resp
}

// moved drops sess if another node adopted it while this one was
// unreachable (Migrator.Moved): its requests go where it is now.
func (s *Server) moved(sess *Session) bool {
	mig := s.migrator()
	if mig == nil || !mig.Moved(sess) {
		return false
	}
	s.log.Info("session dropped: another node adopted it while this one was unreachable", "session", sess.id)
	s.removeSession(sess)
	return true
}

// elsewhere admits a request of a session this server does not hold: it
// adopts the session here and returns it, or answers where the request
// goes (response.away), or refuses it. A member's request in its own
// session (no HopHeader) is unknown, as before: the member opens another.
func (s *Server) elsewhere(ctx context.Context, h wire.Header) (*Session, *response) {
	mig := s.migrator()
	if mig == nil {
		resp := unknownSession()
		return nil, &resp
	}
	c, err := s.cfg.Cluster.IDs.Parse(h.ConnectionID)
	if err != nil {
		resp := unknownSession()
		return nil, &resp
	}
	hops := 0
	if member, _ := ctx.Value(memberKey{}).(bool); member {
		v := RequestHeader(ctx).Get(HopHeader)
		if v == "" {
			resp := unknownSession()
			return nil, &resp
		}
		if hops, err = strconv.Atoi(v); err != nil || hops < 1 {
			hops = MaxHops
		}
	}
	mctx, cancel := moveContext(ctx)
	defer cancel()
	loc, err := mig.Locate(mctx, c, hops, "")
	if err != nil {
		s.noteLost(c.ID, err)
		resp := failureIn(c.Gen, err)
		return nil, &resp
	}
	if loc.Here {
		if sess := s.session(c.ID); sess != nil {
			return sess, nil
		}
		resp := unknownSession()
		return nil, &resp
	}
	if loc.Adopt {
		client, _ := ctx.Value(clientKey{}).(string)
		if err := s.adopt(mctx, mig, c, loc, client); err != nil {
			resp := failureIn(c.Gen, err)
			return nil, &resp
		}
		if sess := s.session(c.ID); sess != nil {
			return sess, nil
		}
		resp := unknownSession()
		return nil, &resp
	}
	return nil, &response{gen: c.Gen, away: &away{claims: c, hops: hops, loc: loc}}
}

// moveTimeout bounds locating a session and adopting it.
const moveTimeout = 30 * time.Second

// moveContext is the context in which a session is located and adopted:
// the request's values, but not its end. A client that drops the request
// meanwhile (a FETCH read ahead that is no longer wanted) must not leave
// the session half adopted, or adopted from an older copy because the
// nodes were not asked for a newer one.
func moveContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), moveTimeout)
}

// failureIn is the ERROR_RESPONSE for err in generation g.
func failureIn(g wire.Generation, err error) response {
	resp := failure(err)
	resp.gen = g
	return resp
}

// errNotReached marks a forward that never reached its node: the
// connection could not be made, so the node saw nothing of the request.
var errNotReached = errors.New("node not reached")

// serveElsewhere serves a request, read whole into in.buf as it came,
// whose session another node holds: forwarded there, the answer relayed
// to w as it comes (relayed is set: the answer is written), or, if that
// node cannot be reached, wherever the Migrator says next, possibly here
// once adopted (the answer is returned).
func (s *Server) serveElsewhere(ctx context.Context, w http.ResponseWriter, in *inbound, h wire.Header, a *away) (resp response, relayed bool) {
	mig := s.migrator()
	loc := a.loc
	unreachable := ""
	for range MaxHops + 1 {
		if loc.Here {
			if s.session(a.claims.ID) == nil {
				resp = unknownSession()
				resp.gen = a.claims.Gen
				return resp, false
			}
			return s.serveAdopted(ctx, in, h), false
		}
		if loc.Adopt {
			client, _ := ctx.Value(clientKey{}).(string)
			mctx, cancel := moveContext(ctx)
			err := s.adopt(mctx, mig, a.claims, loc, client)
			cancel()
			if err != nil {
				return failureIn(a.claims.Gen, err), false
			}
			return s.serveAdopted(ctx, in, h), false
		}
		err := s.relay(w, in.r, mig, a.claims.ID, loc, a.hops+1, in.buf)
		switch {
		case err == nil:
			s.observeForward(ForwardRelayed)
			return resp, true
		case ctx.Err() != nil:
			// The client went away (a FETCH read ahead and no longer
			// wanted): nothing to answer, and nothing learned of the
			// node.
			s.observeForward(ForwardCanceled)
			return resp, true
		case errors.Is(err, errNotReached) || movable(h.Type):
			// The node never saw it, or the request is one the
			// session answers alike anywhere: find the session anew.
			s.log.Info("forward failed, locating the session again", "session", a.claims.ID, "node", loc.Node, "err", err)
			s.observeForward(ForwardRetried)
			unreachable = loc.Node
		default:
			s.log.Warn("forward failed after the request reached the node", "session", a.claims.ID, "node", loc.Node, "err", err)
			s.observeForward(ForwardLost)
			return failureIn(a.claims.Gen, &LostError{Code: CodeRequestLost, Node: loc.Node}), false
		}
		mctx, cancel := moveContext(ctx)
		loc, err = mig.Locate(mctx, a.claims, a.hops, unreachable)
		cancel()
		if err != nil {
			s.noteLost(a.claims.ID, err)
			return failureIn(a.claims.Gen, err), false
		}
	}
	return failureIn(a.claims.Gen, &LostError{Code: CodeSessionMoving, Node: unreachable}), false
}

// ForwardOutcome is how a request forwarded to the node holding its
// session ended (Config.ObserveForward).
type ForwardOutcome string

const (
	// ForwardRelayed: the node answered, and its answer was relayed.
	ForwardRelayed ForwardOutcome = "relayed"
	// ForwardRetried: the node could not be reached, or failed before
	// answering a request that may be sent again; the session was
	// located anew, and the request went there or the session was
	// adopted here.
	ForwardRetried ForwardOutcome = "retried"
	// ForwardLost: the node failed after it had the request, which was
	// answered request_lost.
	ForwardLost ForwardOutcome = "lost"
	// ForwardCanceled: the client went away before the answer came.
	ForwardCanceled ForwardOutcome = "canceled"
)

func (s *Server) observeForward(o ForwardOutcome) {
	if s.cfg.ObserveForward != nil {
		s.cfg.ObserveForward(o)
	}
}

// maxLostSessions bounds the sessions a server remembers it found lost.
const maxLostSessions = 4096

// lostSessions are the sessions a server found lost, so that each is told
// ObserveSessionLost once however often its client sends again under its
// id. Past maxLostSessions it forgets them all: a client that keeps
// sending for a lost session is rare, and counting one twice harmless.
type lostSessions struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

// first records id and reports whether it is new.
func (l *lostSessions) first(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.ids[id]; ok {
		return false
	}
	if l.ids == nil || len(l.ids) >= maxLostSessions {
		l.ids = make(map[string]struct{})
	}
	l.ids[id] = struct{}{}
	return true
}

// noteLost tells ObserveSessionLost of session id when err, the answer to
// one of its requests, says no live node held its state, the first time
// this server answers so.
func (s *Server) noteLost(id string, err error) {
	var le *LostError
	if s.cfg.ObserveSessionLost == nil || !errors.As(err, &le) || le.Code != CodeSessionLost {
		return
	}
	if s.lost.first(id) {
		s.cfg.ObserveSessionLost()
	}
}

// serveAdopted handles a request read whole into in.buf, whose session
// this server has just adopted.
func (s *Server) serveAdopted(ctx context.Context, in *inbound, h wire.Header) response {
	sess, refused := s.admit(ctx, h)
	if refused != nil {
		return *refused
	}
	msg := in.buf
	if wire.IsCompressed(msg) {
		var resp *response
		if msg, resp = in.decompress(sess, s.cfg.MaxMessageBytes); resp != nil {
			return *resp
		}
	}
	h, body, err := wire.DecodeHeader(msg)
	if err != nil {
		return errorResponse(fmt.Sprintf("malformed message header: %v", err))
	}
	return s.handle(ctx, h, sess, body)
}

// movable reports whether a request of type t may be sent again elsewhere
// after it reached a node that failed before answering: it changes
// nothing a client relies on (a FETCH of a result the failed node held is
// answered as lost wherever it goes).
func movable(t wire.MessageType) bool {
	switch t {
	case wire.MsgFetchRequest, wire.MsgHeartbeatRequest, wire.MsgDisconnect, wire.MsgCancelRequest,
		wire.MsgAcknowledgement, wire.MsgProgressRequest:
		return true
	}
	return false
}

// hopWatch is how often a forwarded request waiting for its answer checks
// that gossip still lists the node it waits on.
const hopWatch = 250 * time.Millisecond

// relay forwards r, with body, to the node at loc and copies its answer to
// w as it came. An error before any of the answer was written is
// errNotReached when the node saw nothing of the request; once the answer
// has begun, a failure only cuts it short (the client sees a broken
// answer) and relay returns nil.
func (s *Server) relay(w http.ResponseWriter, r *http.Request, mig Migrator, id string, loc Locus, hops int, body []byte) error {
	cl := s.cfg.Cluster
	scheme := "http"
	if cl.TLS {
		scheme = "https"
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+"://"+loc.Addr+"/quack", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %w", errNotReached, err)
	}
	for k, v := range r.Header {
		if !hopByHop(k) {
			req.Header[k] = v
		}
	}
	req.Header.Set(HopHeader, strconv.Itoa(hops))
	req.Header.Set(wire.MemberHeader, s.cfg.MemberCredential)
	hc := cl.HTTP
	if hc == nil {
		hc = defaultHopClient
	}
	answered := make(chan struct{})
	go func() {
		t := time.NewTicker(hopWatch)
		defer t.Stop()
		for {
			select {
			case <-answered:
				return
			case <-t.C:
				if !mig.Alive(loc.Node) {
					cancel(fmt.Errorf("%s stopped answering and gossip declared it dead", loc.Node))
					return
				}
			}
		}
	}()
	resp, err := hc.Do(req)
	close(answered)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && r.Context().Err() == nil {
			err = cause
		}
		if notDialed(err) {
			return fmt.Errorf("%w: %s at %s: %w", errNotReached, loc.Node, loc.Addr, err)
		}
		return fmt.Errorf("forward to %s at %s: %w", loc.Node, loc.Addr, err)
	}
	defer resp.Body.Close()
	wh := w.Header()
	wh.Del("Set-Cookie")
	for k, v := range resp.Header {
		if !hopByHop(k) {
			wh[k] = v
		}
	}
	if resp.ContentLength >= 0 {
		wh.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(w, resp.Body); err != nil {
		s.log.Info("forwarded answer cut short", "node", loc.Node, "err", err)
	}
	s.log.Debug("quack request forwarded", "session", id, "node", loc.Node, "hops", hops)
	return nil
}

// notDialed reports whether err means no connection was made.
func notDialed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// hopByHop reports whether a header belongs to one connection and is not
// passed on by a proxy (RFC 9110 §7.6.1), or is the forwarder's own.
func hopByHop(k string) bool {
	switch http.CanonicalHeaderKey(k) {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer",
		"Transfer-Encoding", "Upgrade", "Content-Length", HopHeader, wire.MemberHeader:
		return true
	}
	return false
}
