package node

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/duckraft/duckraft/internal/hostlog"
)

// DefaultMaxConnsPerClient is the most TCP connections one address may hold
// open by default: four for each of a client's share of sessions at the
// default caps.
const DefaultMaxConnsPerClient = 1024

// DefaultMaxConns is the most TCP connections a server holds open by
// default: half the process's file descriptors, so that a flood of idle
// connections leaves descriptors for the database, Raft, gossip and the
// connections this node opens itself, and at most 65,536.
func DefaultMaxConns() int {
	n, ok := fileLimit()
	if !ok {
		return 4096
	}
	return int(min(max(n/2, 64), 1<<16))
}

// LimitListener returns l with the server's connection caps: a connection
// past MaxConns, or past MaxConnsPerClient from its address, is closed as
// soon as it is accepted, before anything is read from it, and logged at
// most once a minute per address with the count of those not logged.
// Members' addresses (MemberHost) are exempt. Serve applies it; a caller
// serving the Handler on its own listener wraps it, under any TLS, so that
// a refused connection costs no handshake.
func (s *Server) LimitListener(l net.Listener) net.Listener {
	return &limitListener{Listener: l, max: s.cfg.MaxConns, perClient: s.cfg.MaxConnsPerClient,
		member: s.cfg.MemberHost, refusals: newRefusalLog(s.log, time.Minute), perHost: make(map[string]int)}
}

type limitListener struct {
	net.Listener
	max, perClient int
	member         func(host string) bool
	refusals       *refusalLog

	mu      sync.Mutex
	total   int
	perHost map[string]int
}

// Accept returns the next connection within the caps, closing those past
// them.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := c.RemoteAddr().String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if l.member(host) {
			return c, nil
		}
		l.mu.Lock()
		var refused string
		limit := 0
		switch {
		case l.total >= l.max:
			refused, limit = "the server holds as many connections as it allows", l.max
		case l.perHost[host] >= l.perClient:
			refused, limit = "this address holds as many connections as the server allows one address", l.perClient
		default:
			l.total++
			l.perHost[host]++
		}
		l.mu.Unlock()
		if refused == "" {
			return &limitedConn{Conn: c, l: l, host: host}, nil
		}
		// Reset rather than close: a flood leaves no sockets in TIME_WAIT.
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
		l.refusals.refuse(host, refused, limit)
	}
}

func (l *limitListener) release(host string) {
	l.mu.Lock()
	l.total--
	if l.perHost[host]--; l.perHost[host] <= 0 {
		delete(l.perHost, host)
	}
	l.mu.Unlock()
}

// limitedConn is a connection counted by its limitListener until it is
// closed.
type limitedConn struct {
	net.Conn
	l    *limitListener
	host string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.host) })
	return err
}

// CloseWrite passes on to a TCP connection: net/http half-closes a
// connection before it closes it, so that a client still sending reads
// the answer before the reset.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// refusalLog logs refused connections at most once a minute per address,
// with the count of refusals it did not log, so that a client that keeps
// trying cannot flood the log.
type refusalLog struct {
	log      *slog.Logger
	throttle *hostlog.Throttle
}

func newRefusalLog(log *slog.Logger, interval time.Duration) *refusalLog {
	return &refusalLog{log: log, throttle: hostlog.New(interval)}
}

// refuse records that a connection from host was refused, and logs it
// unless host was logged within the interval.
func (r *refusalLog) refuse(host, reason string, limit int) {
	if suppressed, ok := r.throttle.Allow(host); ok {
		r.log.Warn("connection refused", "client", host, "reason", reason, "limit", limit, "refused_unlogged", suppressed)
	}
}
