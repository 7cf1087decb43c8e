// Package bandwidth is a TCP proxy that caps the bytes per second through
// it: a node's network link of a given bandwidth, on loopback. testcluster
// puts one in front of each node's Quack port (Options.QuackCap), and
// `duckraft-bench reads --cap` does the same for its processes, so that a
// split scan's gain from several nodes' links shows on one host.
package bandwidth

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// bufSize is what one direction of one connection holds at most between
// reading and writing.
const bufSize = 32 << 10

// Proxy forwards every connection it accepts to one target address. Each
// direction is capped at the rate, shared by all connections as one
// full-duplex link's two directions are.
type Proxy struct {
	l      net.Listener
	target string
	// down carries target→client bytes (what a node sends), up the rest.
	down, up *bucket
	sent     atomic.Int64
	done     chan struct{}

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Listen starts a proxy on addr (host:port, port 0 for a free one) to
// target, at rate bytes per second in each direction.
func Listen(addr, target string, rate int64) (*Proxy, error) {
	if rate <= 0 {
		return nil, fmt.Errorf("bandwidth: rate %d bytes/s: must be positive", rate)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("bandwidth: listen on %s: %w", addr, err)
	}
	p := &Proxy{l: l, target: target, down: newBucket(rate), up: newBucket(rate),
		done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// SetRate changes the cap of both directions to rate bytes per second; 0
// lifts it.
func (p *Proxy) SetRate(rate int64) {
	p.down.set(rate)
	p.up.set(rate)
}

// Sent is how many bytes went from the target to clients.
func (p *Proxy) Sent() int64 { return p.sent.Load() }

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() error {
	err := p.l.Close()
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.done)
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

// track registers c so Close closes it; false once the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) handle(c net.Conn) {
	defer p.wg.Done()
	if !p.track(c) {
		c.Close()
		return
	}
	defer p.untrack(c)
	s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		// The target is down: the client sees the connection drop, as it
		// would see a refused dial.
		return
	}
	if !p.track(s) {
		s.Close()
		return
	}
	defer p.untrack(s)
	done := make(chan struct{}, 2)
	go func() { p.pump(s, c, p.up, nil); done <- struct{}{} }()
	go func() { p.pump(c, s, p.down, &p.sent); done <- struct{}{} }()
	// Once one direction ends (a close or an error), the deferred
	// untracks close both sockets, which ends the other.
	<-done
}

// pump copies from one socket to the other at b's rate.
func (p *Proxy) pump(to, from net.Conn, b *bucket, count *atomic.Int64) {
	buf := make([]byte, bufSize)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			if !b.wait(n, p.done) {
				return
			}
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
			if count != nil {
				count.Add(int64(n))
			}
		}
		if err != nil {
			return
		}
	}
}

// bucket is a token bucket of rate bytes per second holding at most burst.
// Takers may drive it below zero; each then waits until its debt is paid,
// so concurrent takers together get the rate, in turn.
type bucket struct {
	mu          sync.Mutex
	rate, burst float64
	tokens      float64
	last        time.Time
}

func newBucket(rate int64) *bucket {
	b := &bucket{}
	b.set(rate)
	return b
}

// set changes the rate (0: none) and fills the bucket.
func (b *bucket) set(rate int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// 50 ms worth of bytes, at least one buffer: smooth at the scale of a
	// result batch, without a burst that hides the cap.
	b.rate = float64(rate)
	b.burst = max(b.rate/20, bufSize)
	b.tokens, b.last = b.burst, time.Now()
}

// wait takes n bytes and sleeps until the bucket has paid for them; false
// if done closed first.
func (b *bucket) wait(n int, done <-chan struct{}) bool {
	b.mu.Lock()
	if b.rate == 0 {
		b.mu.Unlock()
		return true
	}
	now := time.Now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens -= float64(n)
	var d time.Duration
	if b.tokens < 0 {
		d = time.Duration(-b.tokens / b.rate * float64(time.Second))
	}
	b.mu.Unlock()
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}

// ParseRate reads a rate such as "50MB/s", "512KB/s" or "1GB/s" (decimal
// units, as network links are sold; "/s" may be left out) as bytes per
// second.
func ParseRate(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}} {
		if strings.HasSuffix(strings.ToUpper(t), u.suffix) {
			t, mult = t[:len(t)-len(u.suffix)], u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || v <= 0 || v*float64(mult) > 1e15 {
		return 0, fmt.Errorf("bandwidth: rate %q: want a positive number of B, KB, MB or GB per second, e.g. 50MB/s", s)
	}
	return int64(v * float64(mult)), nil
}
