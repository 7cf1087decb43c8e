package routing

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/wal"
)

// Remote is how an Executor reaches the other nodes: sessions on them for
// reads, and the leader's write endpoint. QuackRemote is the real one; the
// tests' in-memory network connects Executors in one process.
type Remote interface {
	// Connect opens a session on the node at addr. g is the generation of
	// the client whose reads it carries, which a Remote should speak if it
	// can, so that the answers' chunks pass through unchanged.
	Connect(ctx context.Context, addr string, g wire.Generation) (RemoteSession, error)
	// Write forwards cmd to the leader at addr (see nodeapi.Client.Write).
	Write(ctx context.Context, addr string, cmd wal.Command) (*wal.Result, error)
}

// RemoteSession is a session on another node. Its errors are the node's
// answers (a *client.ServerError, possibly with a nodeapi code) or, for
// anything else, a failure to reach it.
type RemoteSession interface {
	// Query runs a read there under requirement req; the rows stream from
	// that node as they are read.
	Query(ctx context.Context, sql string, req nodeapi.Read) (node.Rows, error)
	// Exec runs a statement whose result is not needed (a session setting).
	Exec(ctx context.Context, sql string) error
	Close() error
}

// QuackRemote reaches other nodes over Quack (with parallel FETCH) and
// their nodeapi write endpoint: sessions with an admin token, writes
// with the node credential. A session speaks Q3 for a Q3 client and Q1
// otherwise, and keeps result chunks encoded (client.Options.Encoded), so
// a client of that generation gets them forwarded as they came. Its
// requests carry the node credential in wire.MemberHeader, so the other
// node counts them as a member's, outside the caps and budgets it keeps
// for clients (node.Config.MemberCredential).
type QuackRemote struct {
	token  string
	tls    *tls.Config
	api    *nodeapi.Client
	member http.Header
}

// NewQuackRemote returns a QuackRemote that opens sessions with token and
// forwards writes with the node credential node. A tlsConfig means the
// nodes serve HTTPS, and says which certificates to trust; nil means plain
// HTTP.
func NewQuackRemote(token, node string, tlsConfig *tls.Config) *QuackRemote {
	q := &QuackRemote{token: token, tls: tlsConfig, api: &nodeapi.Client{Token: token, Node: node}}
	if node != "" {
		q.member = http.Header{wire.MemberHeader: {node}}
	}
	if tlsConfig != nil {
		q.api.TLS = true
		q.api.HTTP = &http.Client{Transport: &http.Transport{
			TLSClientConfig:     tlsConfig,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	return q
}

// Connect implements Remote.
func (q *QuackRemote) Connect(ctx context.Context, addr string, g wire.Generation) (RemoteSession, error) {
	useTLS := q.tls != nil
	if g != wire.Q3 {
		g = wire.Q1
	}
	c, err := client.Connect(ctx, "quack:"+addr, client.Options{Token: q.token, Generation: g, TLS: &useTLS, TLSConfig: q.tls, Encoded: true,
		Header: q.member})
	if err != nil {
		return nil, err
	}
	return quackSession{c}, nil
}

// PushSessions implements SessionAPI.
func (q *QuackRemote) PushSessions(ctx context.Context, addr string, p nodeapi.SessionPush) error {
	return q.api.PushSessions(ctx, addr, p)
}

// LookupSession implements SessionAPI.
func (q *QuackRemote) LookupSession(ctx context.Context, addr, id string) (nodeapi.SessionState, bool, error) {
	return q.api.LookupSession(ctx, addr, id)
}

// ReadIndex implements SessionAPI.
func (q *QuackRemote) ReadIndex(ctx context.Context, addr string) (uint64, error) {
	return q.api.ReadIndex(ctx, addr)
}

// Write implements Remote.
func (q *QuackRemote) Write(ctx context.Context, addr string, cmd wal.Command) (*wal.Result, error) {
	return q.api.Write(ctx, addr, cmd)
}

type quackSession struct{ c *client.Conn }

// Query implements RemoteSession. A ctx that ends before the answer makes
// the client send the node a CANCEL (client.Conn.Query); the rows it
// returns are a canceler, which a remote query cancels when the
// statement's context ends while they stream. The request names the
// client whose read it is (node.PrincipalHeader), so that the node counts
// the statement's turn for that client, not for this member.
func (s quackSession) Query(ctx context.Context, sql string, req nodeapi.Read) (node.Rows, error) {
	h := req.Header()
	if p := node.Principal(ctx); p != "" {
		h.Set(node.PrincipalHeader, p)
	}
	rows, err := s.c.Query(client.WithHeader(ctx, h), sql)
	if err != nil {
		return nil, err
	}
	return remoteRows{rows}, nil
}

// A canceler is remote rows that can tell their node to stop the query
// behind them (client.Rows.Cancel).
type canceler interface {
	Cancel(ctx context.Context) error
}

// cancelTimeout bounds the CANCEL a router sends to a node whose read was
// interrupted.
const cancelTimeout = 5 * time.Second

func (s quackSession) Exec(ctx context.Context, sql string) error {
	_, err := s.c.Exec(ctx, sql)
	return err
}

func (s quackSession) Close() error { return s.c.Close() }

// answered reports whether err is the remote node's own answer, as opposed
// to a failure to reach it.
func answered(err error) bool {
	if _, ok := errors.AsType[*client.ServerError](err); ok {
		return true
	}
	_, ok := errors.AsType[*nodeapi.Error](err)
	return ok
}

// remoteConn is a session's session on another node.
type remoteConn struct {
	sess RemoteSession
	addr string

	mu              sync.Mutex // held while settings replay
	settingsVersion uint64
}

// connectTimeout bounds opening a session on another node, so that a read
// moves on quickly from a node that just died.
const connectTimeout = 2 * time.Second

// sessionOpener opens sessions on other nodes (Remote.Connect).
type sessionOpener interface {
	Connect(ctx context.Context, addr string, g wire.Generation) (RemoteSession, error)
}

// remoteReads runs reads on other nodes, each in the client session's own
// session there, which it opens and replays the session's settings in,
// and leaves a node that does not answer out of the next choices.
type remoteReads struct {
	log     *slog.Logger
	open    sessionOpener
	members *members
}

// conn returns the session's connection to p, opening it if needed.
func (r *remoteReads) conn(ctx context.Context, st *sessionState, p Peer) (*remoteConn, error) {
	st.mu.Lock()
	rc := st.remotes[p.ID]
	if rc != nil && rc.addr != p.QuackAddr {
		delete(st.remotes, p.ID)
		go rc.sess.Close()
		rc = nil
	}
	st.mu.Unlock()
	if rc != nil {
		return rc, nil
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	sess, err := r.open.Connect(cctx, p.QuackAddr, st.gen)
	if err != nil {
		if ctx.Err() != nil {
			// The statement was cancelled: the node is not at fault.
			return nil, context.Cause(ctx)
		}
		r.members.bal.Suspect(p.ID)
		return nil, fmt.Errorf("%w: connect to %s at %s: %w", errRemote, p.ID, p.QuackAddr, err)
	}
	st.mu.Lock()
	if st.remotes == nil {
		st.remotes = map[string]*remoteConn{}
	}
	if old := st.remotes[p.ID]; old != nil {
		go old.sess.Close()
	}
	rc = &remoteConn{sess: sess, addr: p.QuackAddr}
	st.remotes[p.ID] = rc
	st.mu.Unlock()
	return rc, nil
}

func (st *sessionState) dropRemote(id string, rc *remoteConn) {
	st.mu.Lock()
	if st.remotes[id] == rc {
		delete(st.remotes, id)
	}
	st.mu.Unlock()
	go rc.sess.Close()
}

// query runs a routed read on p through the session's connection to p. Its
// rows stream from p as the client reads them.
func (r *remoteReads) query(ctx context.Context, st *sessionState, p Peer, req nodeapi.Read, sql string) (node.Rows, error) {
	rc, err := r.conn(ctx, st, p)
	if err != nil {
		return nil, err
	}
	if err := st.syncSettings(ctx, rc); err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case !answered(err):
			return nil, r.unreachable(st, p, rc, err)
		}
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		// The statement timeout goes with the read, so the node that
		// runs it ends it even if this one is gone.
		req.Timeout = max(time.Millisecond, time.Until(dl))
	}
	n := r.members.bal.Counter(p.ID)
	n.Add(1)
	rows, err := r.queryWhileAlive(ctx, rc.sess, p.ID, req, sql)
	if err != nil {
		n.Add(-1)
		switch {
		case ctx.Err() != nil && !answered(err):
			// Cancelled or timed out: the client sent the node a CANCEL
			// and the session there stays usable.
			return nil, context.Cause(ctx)
		case !answered(err):
			return nil, r.unreachable(st, p, rc, err)
		case errors.Is(err, outcome.ErrUnknownSession) || errors.Is(err, outcome.ErrSessionExpired) || errors.Is(err, outcome.ErrSessionLost):
			// The node restarted or forgot the session: open a new one.
			st.dropRemote(p.ID, rc)
		}
		return nil, err
	}
	// While the rows stream, the statement's context ending (a CANCEL,
	// its timeout, a replacing statement) must stop the node's query too;
	// closing the rows alone leaves it paused there.
	stop := func() bool { return false }
	if c, ok := rows.(canceler); ok {
		stop = context.AfterFunc(ctx, func() {
			cctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
			defer cancel()
			if err := c.Cancel(cctx); err != nil {
				r.log.Debug("cancel a read on another node", "node", p.ID, "err", err)
			}
		})
	}
	return newTrackedRows(rows, func() {
		stop()
		n.Add(-1)
	}), nil
}

// unreachable handles a request to p that got no answer: the node is
// gone, so it is left out for a while and the session reconnects next
// time; the error marks the read as one to run elsewhere.
func (r *remoteReads) unreachable(st *sessionState, p Peer, rc *remoteConn, err error) error {
	st.dropRemote(p.ID, rc)
	r.members.bal.Suspect(p.ID)
	return fmt.Errorf("%w: %s: %w", errRemote, p.ID, err)
}

// queryWhileAlive runs sql in sess and waits for its first answer only
// while gossip lists node id as alive. A node that is frozen (SIGSTOP, a
// hung disk) keeps its sockets open, so without this a read would wait for
// the client's deadline; once gossip declares it dead the read fails with
// errRemote and runs elsewhere. Nothing has reached the client by then.
func (r *remoteReads) queryWhileAlive(ctx context.Context, sess RemoteSession, id string, req nodeapi.Read, sql string) (node.Rows, error) {
	qctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	replied := make(chan struct{})
	defer close(replied)
	go func() {
		t := time.NewTicker(livenessPoll)
		defer t.Stop()
		for {
			select {
			case <-replied:
				return
			case <-t.C:
				if !r.members.alive(id) {
					cancel(fmt.Errorf("%w: %s stopped answering and gossip declared it dead", errRemote, id))
					return
				}
			}
		}
	}()
	rows, err := sess.Query(qctx, sql, req)
	if err != nil && context.Cause(qctx) != nil && ctx.Err() == nil {
		return nil, context.Cause(qctx)
	}
	return rows, err
}

// livenessPoll is how often a read waiting on another node checks that
// gossip still lists the node.
const livenessPoll = 250 * time.Millisecond

// trackedRows calls done once when the rows are closed.
type trackedRows struct {
	node.Rows
	once sync.Once
	done func()
}

// newTrackedRows wraps r; the wrapper hands out encoded chunks if r does.
func newTrackedRows(r node.Rows, done func()) node.Rows {
	t := &trackedRows{Rows: r, done: done}
	if er, ok := r.(node.EncodedRows); ok {
		return trackedEncodedRows{t, er}
	}
	return t
}

func (r *trackedRows) Close() {
	r.Rows.Close()
	r.once.Do(r.done)
}

type trackedEncodedRows struct {
	*trackedRows
	er node.EncodedRows
}

func (r trackedEncodedRows) NextEncoded(g wire.Generation) ([]byte, int, *wire.Buffer, error) {
	return r.er.NextEncoded(g)
}
