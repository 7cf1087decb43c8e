package replication

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/internal/hostlog"
)

// errLayerClosed is what Accept returns once the stream layer is closed.
var errLayerClosed = errors.New("replication: raft stream layer closed")

const (
	// handshakeTimeout bounds an inbound TLS handshake, so a silent peer
	// cannot hold a goroutine or a handshake slot. (Dial is bounded by
	// the timeout raft passes it.)
	handshakeTimeout = 10 * time.Second
	// maxHandshakes bounds the inbound handshakes in progress; a
	// connection beyond it is closed at once.
	maxHandshakes = 64
	// dialRetry is how often Dial tries again a peer that refuses the
	// connection.
	dialRetry = 50 * time.Millisecond
)

// tlsStreamLayer is the raft.StreamLayer of the Raft transport: TCP with
// mutual TLS, so only peers holding a certificate of the cluster's CA
// exchange a byte with raft. Inbound handshakes complete here, before the
// connection is handed to raft; a refused peer is dropped and logged,
// once a minute per remote host.
type tlsStreamLayer struct {
	ln        net.Listener
	advertise net.Addr
	conf      *tls.Config
	refusals  *refusalLog
	// timeout bounds an inbound handshake: handshakeTimeout, shorter in
	// tests.
	timeout time.Duration

	accepted chan net.Conn
	slots    chan struct{}
	// ended is signalled when an inbound connection handed to raft fails
	// a read: its peer closed it, or died (see watchLeaderDeath).
	ended chan struct{}
	// ctx ends handshakes in progress when the layer closes.
	ctx    context.Context
	cancel context.CancelFunc
	// dialing ends the retries of refused dials (stopDialing, Close).
	dialing    context.Context
	stopDialer context.CancelFunc
	closing    chan struct{}
	once       sync.Once
	wg         sync.WaitGroup
}

// newTLSStreamLayer listens on bind. advertise, if not nil, is the address
// the layer reports to raft (and so to the other members); timeout bounds
// each inbound handshake.
func newTLSStreamLayer(bind string, advertise net.Addr, conf *tls.Config, timeout time.Duration, log *slog.Logger) (*tlsStreamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raft listen: %w", err)
	}
	l := &tlsStreamLayer{ln: ln, advertise: advertise, conf: conf, refusals: newRefusalLog(log, time.Minute),
		timeout:  timeout,
		accepted: make(chan net.Conn), slots: make(chan struct{}, maxHandshakes), ended: make(chan struct{}, 1),
		closing: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.dialing, l.stopDialer = context.WithCancel(context.Background())
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok || addr.IP == nil || addr.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raft address %v is not one peers can dial; give an advertise address", l.Addr())
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// acceptLoop accepts TCP connections and handshakes each in its own
// goroutine, at most maxHandshakes at a time. Accept errors other than the
// listener's close (out of file descriptors, say) are retried with a
// backoff, as raft's own transport does.
func (l *tlsStreamLayer) acceptLoop() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			l.refusals.log.Error("raft accept failed", "err", err, "retry_in", backoff)
			select {
			case <-l.closing:
				return
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		select {
		case l.slots <- struct{}{}:
		default:
			l.refusals.refuse(c.RemoteAddr().String(), errors.New("too many handshakes in progress"))
			c.Close()
			continue
		}
		l.wg.Add(1)
		go l.handshake(c)
	}
}

// handshake completes the TLS handshake of an inbound connection within
// l.timeout and hands it to Accept, or drops it.
func (l *tlsStreamLayer) handshake(raw net.Conn) {
	defer l.wg.Done()
	tc := tls.Server(raw, l.conf)
	ctx, cancel := context.WithTimeout(l.ctx, l.timeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	<-l.slots
	if err != nil {
		l.refusals.refuse(raw.RemoteAddr().String(), err)
		raw.Close()
		return
	}
	select {
	case l.accepted <- &watchedConn{Conn: tc, ended: l.ended}:
	case <-l.closing:
		tc.Close()
	}
}

// watchedConn is an inbound connection that signals ended when a read
// fails. The connections a leader opens to a follower end this way when
// its process dies: the kernel closes them.
type watchedConn struct {
	net.Conn
	ended chan<- struct{}
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		select {
		case c.ended <- struct{}{}:
		default:
		}
	}
	return n, err
}

// Accept implements net.Listener: the next connection whose handshake
// succeeded.
func (l *tlsStreamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.accepted:
		return c, nil
	case <-l.closing:
		return nil, errLayerClosed
	}
}

// Close implements net.Listener. Connections already handed to raft stay
// open; raft closes them.
func (l *tlsStreamLayer) Close() error {
	var err error
	l.once.Do(func() {
		close(l.closing)
		l.cancel()
		l.stopDialer()
		err = l.ln.Close()
		l.wg.Wait()
	})
	return err
}

// Addr implements net.Listener: the advertised address if set, else the
// bound one.
func (l *tlsStreamLayer) Addr() net.Addr {
	if l.advertise != nil {
		return l.advertise
	}
	return l.ln.Addr()
}

// Dial implements raft.StreamLayer: a TCP connection to address with the
// TLS handshake done, both within timeout.
//
// A refused connection (the peer's host answers and nothing listens on
// the port: its process is down, restarting) is tried again every
// dialRetry until timeout passes, as an unanswered one waits until then,
// or until the layer stops dialing. Raft's replication to a peer sleeps
// after each failed RPC, doubling the sleep up to 10.24 s (replication.go,
// backoff): failed at once, a peer down for a few seconds would be sent
// its log only seconds after it is back, holding the leader's heartbeats
// (so refusing to vote for another) but not its entries (so not electable
// either). Waiting in Dial fails an RPC once per timeout instead, and the
// peer gets its log as soon as it listens.
func (l *tlsStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(l.dialing, timeout)
	defer cancel()
	d := tls.Dialer{Config: l.conf}
	var refused error
	for {
		c, err := d.DialContext(ctx, "tcp", string(address))
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			if refused != nil && ctx.Err() != nil {
				// The retries ended: the refusal says why.
				err = refused
			}
			return nil, fmt.Errorf("raft dial %s: %w", address, err)
		}
		refused = err
		t := time.NewTimer(dialRetry)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("raft dial %s: %w", address, err)
		}
	}
}

// probeResult is what a probe of a peer's Raft port found.
type probeResult int

const (
	// probeUnknown: the probe neither completed nor was refused (a
	// timeout, a reset): the peer may be slow, or dying.
	probeUnknown probeResult = iota
	// probeRefused: the peer's host answered and nothing listens on the
	// port; its process is gone.
	probeRefused
	// probeAnswered: the peer completed a TLS handshake.
	probeAnswered
)

// probe dials address once, within timeout, without retrying a refusal,
// and closes the connection: whether the peer's Raft port listens. The
// handshake completes, so a live peer's transport sees a connection close
// and logs nothing.
func (l *tlsStreamLayer) probe(address raft.ServerAddress, timeout time.Duration) probeResult {
	ctx, cancel := context.WithTimeout(l.dialing, timeout)
	defer cancel()
	d := tls.Dialer{Config: l.conf}
	c, err := d.DialContext(ctx, "tcp", string(address))
	switch {
	case err == nil:
		c.Close()
		return probeAnswered
	case errors.Is(err, syscall.ECONNREFUSED):
		return probeRefused
	}
	return probeUnknown
}

// stopDialing makes every dial fail at once from now on, ending those
// waiting on a refusal: raft's Shutdown waits for its replication
// goroutines, which may wait in Dial.
func (l *tlsStreamLayer) stopDialing() { l.stopDialer() }

// refusalLog logs refused peers at most once per interval per remote
// host, with the count of refusals it did not log, so a peer that keeps
// trying cannot flood the log.
type refusalLog struct {
	log      *slog.Logger
	throttle *hostlog.Throttle
}

func newRefusalLog(log *slog.Logger, interval time.Duration) *refusalLog {
	return &refusalLog{log: log, throttle: hostlog.New(interval)}
}

// refuse records that the peer at addr (host:port, or any name of the
// peer) was refused because of err, and logs it unless that host was
// logged within the interval.
func (r *refusalLog) refuse(addr string, err error) {
	host := addr
	if h, _, serr := net.SplitHostPort(addr); serr == nil {
		host = h
	}
	if suppressed, ok := r.throttle.Allow(host); ok {
		r.log.Warn("raft peer refused", "remote", addr, "err", err, "refused_since_last_logged", suppressed)
	}
}
