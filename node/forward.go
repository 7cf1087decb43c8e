package node

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
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
	// counts the members that forwarded it. It is taken as a member's only
	// with the node credential as its bearer token (Authorization), and a
	// request that has made MaxHops hops is never forwarded again, so a
	// request cannot loop between members whose views differ.
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
	// memberHop is the HopHeader value of a member's requests in its own
	// sessions (MemberHeader).
	memberHop = "member"
)

// ClusterSessions configures a server that is one of a cluster's nodes.
type ClusterSessions struct {
	// IDs mints and checks the session ids every member signs.
	IDs *SessionIDs
	// Credential is the node credential (clusterkey.NodeAPI): this node's
	// forwarded requests carry it, and a request carries it to count as a
	// member's hop.
	Credential string
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

// sessionID is the id of a new session of role in generation g: one the
// cluster's members can route (SessionIDs), or random when the server is
// no cluster's.
func (s *Server) sessionID(random string, g wire.Generation, role tokens.Role) string {
	if cl := s.cfg.Cluster; cl != nil && cl.IDs != nil {
		return cl.IDs.New(g, role)
	}
	return random
}

// opened tells the Migrator of a session this server opened for a
// client. A member's sessions (a router's reads routed here) are not
// its: the member opens another when one is gone.
func (s *Server) opened(ctx context.Context, sess *Session) {
	mig, ok := s.cfg.Executor.(Migrator)
	if !ok || s.cfg.Cluster == nil || s.member(RequestHeader(ctx)) {
		return
	}
	mig.SessionOpened(sess)
}

// MemberHeader returns the header with which a member opens a session on
// another node for itself (routed reads): such a session is not moved
// when that node fails, since the member opens another.
func MemberHeader(credential string) http.Header {
	return http.Header{HopHeader: {memberHop}, "Authorization": {"Bearer " + credential}}
}

// member reports whether h is a member's request: the hop header with the
// node credential.
func (s *Server) member(h http.Header) bool {
	cred := s.cfg.Cluster.Credential
	return h.Get(HopHeader) != "" && cred != "" &&
		subtle.ConstantTimeCompare([]byte(h.Get("Authorization")), []byte("Bearer "+cred)) == 1
}

// routeQuack serves a Quack request here, or where its session is.
func (s *Server) routeQuack(w http.ResponseWriter, r *http.Request) {
	cl := s.cfg.Cluster
	mig, ok := s.cfg.Executor.(Migrator)
	if cl == nil || cl.IDs == nil || !ok {
		s.serveQuack(w, r)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: AffinityCookie, Value: cl.IDs.Node(), Path: "/", HttpOnly: true})
	h, body, err := s.peekHeader(r)
	if err != nil {
		// serveQuack reads what is left and answers as it always has.
		s.serveQuack(w, r)
		return
	}
	if named := r.Header.Get(ConnectionIDHeader); named != "" && h.ConnectionID != "" && named != h.ConnectionID {
		s.write(w, errorResponse(fmt.Sprintf("the %s header names another session than the message: %q, not %q",
			ConnectionIDHeader, named, h.ConnectionID)))
		return
	}
	if sess := s.session(h.ConnectionID); sess != nil && mig.Moved(sess) {
		s.log.Info("session dropped: another node adopted it while this one was unreachable", "session", sess.id)
		s.removeSession(sess)
	}
	if h.Type == wire.MsgConnectionRequest || h.ConnectionID == "" || s.session(h.ConnectionID) != nil ||
		r.Header.Get(HopHeader) == memberHop && s.member(r.Header) {
		// A member's own session that is gone here is unknown, as
		// before: the member opens another.
		s.serveQuack(w, r)
		return
	}
	c, err := cl.IDs.Parse(h.ConnectionID)
	if err != nil {
		// Not one of this cluster's: unknown here, as anywhere.
		s.serveQuack(w, r)
		return
	}
	s.serveElsewhere(w, r, mig, c, h.Type, body)
}

// peekHeader decodes the message header of r's body from its first bytes
// and puts them back in front of the rest, or, when the body is
// compressed, reads it whole (it is needed whole to decompress) and
// returns it. An error means the header could not be read; r's body is
// then left to serveQuack.
func (s *Server) peekHeader(r *http.Request) (wire.Header, []byte, error) {
	head := make([]byte, peekBytes)
	n, err := io.ReadFull(r.Body, head)
	head = head[:n]
	r.Body = readCloser{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return wire.Header{}, nil, err
	}
	var body []byte
	if wire.IsCompressed(head) {
		if body, err = io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxMessageBytes+1)); err != nil {
			return wire.Header{}, nil, err
		}
		r.Body = readCloser{bytes.NewReader(body), r.Body}
		if int64(len(body)) > s.cfg.MaxMessageBytes {
			return wire.Header{}, nil, errors.New("message too large")
		}
		if head, err = wire.DecompressPrefix(body, peekBytes); err != nil {
			return wire.Header{}, nil, err
		}
	}
	h, _, err := wire.DecodeHeader(head)
	return h, body, err
}

// readCloser reads from one reader and closes another: a request body
// whose first bytes were read ahead.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }

// hops is how many members forwarded r already: 0 unless r carries the
// node credential.
func (s *Server) hops(r *http.Request) int {
	if !s.member(r.Header) {
		return 0
	}
	n, err := strconv.Atoi(r.Header.Get(HopHeader))
	if err != nil || n < 1 {
		return MaxHops
	}
	return n
}

// errNotReached marks a forward that never reached its node: the
// connection could not be made, so the node saw nothing of the request.
var errNotReached = errors.New("node not reached")

// serveElsewhere serves a request of session c, which this server does not
// hold, where the Migrator says: forwarded to the node holding it, or here
// once adopted. body is the request body if it was read already.
func (s *Server) serveElsewhere(w http.ResponseWriter, r *http.Request, mig Migrator, c SessionClaims, typ wire.MessageType, body []byte) {
	ctx := r.Context()
	hops := s.hops(r)
	unreachable := ""
	for range MaxHops + 1 {
		loc, err := mig.Locate(ctx, c, hops, unreachable)
		if err != nil {
			s.writeFailure(w, c.Gen, err)
			return
		}
		if loc.Adopt {
			if err := s.adopt(ctx, mig, c, loc, clientHost(r)); err != nil {
				s.writeFailure(w, c.Gen, err)
				return
			}
			if body != nil {
				r.Body = readCloser{bytes.NewReader(body), r.Body}
			}
			s.serveQuack(w, r)
			return
		}
		if body == nil {
			if body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxMessageBytes)); err != nil {
				if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
					s.write(w, errorResponse(fmt.Sprintf("message exceeds the server's limit of %d bytes", s.cfg.MaxMessageBytes)))
				}
				return
			}
		}
		err = s.relay(w, r, mig, c.ID, loc, hops+1, body)
		switch {
		case err == nil:
			return
		case ctx.Err() != nil:
			// The client went away (a FETCH read ahead and no longer
			// wanted): nothing to answer, and nothing learned of the
			// node.
			return
		case errors.Is(err, errNotReached) || movable(typ):
			// The node never saw it, or the request is one the
			// session answers alike anywhere: find the session anew.
			s.log.Info("forward failed, locating the session again", "session", c.ID, "node", loc.Node, "err", err)
			unreachable = loc.Node
		default:
			s.log.Warn("forward failed after the request reached the node", "session", c.ID, "node", loc.Node, "err", err)
			s.writeFailure(w, c.Gen, &LostError{Code: CodeRequestLost, Node: loc.Node})
			return
		}
	}
	s.writeFailure(w, c.Gen, &LostError{Code: CodeSessionMoving, Node: unreachable})
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

// writeFailure answers err as an ERROR_RESPONSE of generation g.
func (s *Server) writeFailure(w http.ResponseWriter, g wire.Generation, err error) {
	resp := failure(err)
	resp.gen = g
	s.write(w, resp)
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
	req.Header.Set("Authorization", "Bearer "+cl.Credential)
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
		"Transfer-Encoding", "Upgrade", "Authorization", "Content-Length", HopHeader:
		return true
	}
	return false
}
