package testcluster

import (
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/duckraft/duckraft/clusterkey"
)

// network routes every Raft connection between a cluster's nodes through an
// in-process TCP proxy per destination node, so that a partition can cut
// links between groups of nodes. Each node advertises its proxy's address
// as its Raft address (duckraftd --raft-advertise), so every peer that dials
// it goes through the proxy.
//
// Raft speaks mutual TLS, so a proxy is a member in the middle: it holds a
// certificate of the cluster's CA (derived from the cluster's key, once the
// first node has made it: setKey), ends each dialer's TLS, learns who is
// dialing from the dialer's certificate, whose common name is its node ID,
// and dials the destination with TLS of its own.
type network struct {
	mu     sync.Mutex
	tls    *tls.Config    // nil until setKey
	group  map[string]int // node ID → partition group; empty when healed
	silent bool           // the partition stalls links instead of closing them
	// changed is closed, and replaced, whenever the partition changes, to
	// wake links stalled by a silent one.
	changed chan struct{}
	proxies []*raftProxy
	stats   LinkStats
}

// LinkStats counts what the Raft proxies did to connections.
type LinkStats struct {
	// Proxied connections were let through; Refused ones were closed at
	// connect because they crossed a partition; Cut ones were open when a
	// partition began and were closed; Stalled ones crossed a silent
	// partition (IsolateSilently) and were held without a byte passing.
	Proxied, Refused, Cut, Stalled int
}

func newNetwork(t testing.TB) *network {
	t.Helper()
	return &network{group: map[string]int{}, changed: make(chan struct{})}
}

// setKey gives the proxies a member's certificate of the cluster key's CA.
func (nw *network) setKey(t testing.TB, key []byte) {
	t.Helper()
	conf, err := clusterkey.RaftTLS(key, "raft-proxy")
	if err != nil {
		t.Fatalf("raft proxy TLS: %v", err)
	}
	nw.mu.Lock()
	nw.tls = conf
	nw.mu.Unlock()
}

// conf is the proxies' TLS, nil before setKey: no node dials another before
// the first node made the key.
func (nw *network) conf() *tls.Config {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.tls
}

func (nw *network) count(f func(*LinkStats)) {
	nw.mu.Lock()
	f(&nw.stats)
	nw.mu.Unlock()
}

// handshakeTimeout bounds the proxy's TLS handshake with a dialer.
const handshakeTimeout = 5 * time.Second

// add starts the proxy in front of n's Raft listener and sets
// n.RaftAdvertise to its address.
func (nw *network) add(t testing.TB, n *Node) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("raft proxy for %s: %v", n.ID, err)
	}
	p := &raftProxy{nw: nw, dst: n.ID, target: n.RaftAddr, l: l, done: make(chan struct{}), links: map[*link]struct{}{}}
	n.RaftAdvertise = l.Addr().String()
	nw.mu.Lock()
	nw.proxies = append(nw.proxies, p)
	nw.mu.Unlock()
	go p.serve()
}

// allowed reports whether src may reach dst under the current partition.
// An unidentified source is let through only while the network is whole.
func (nw *network) allowed(src, dst string) bool {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.permits(src, dst)
}

// permits is allowed with nw.mu held.
func (nw *network) permits(src, dst string) bool {
	if len(nw.group) == 0 {
		return true
	}
	return src != "" && nw.group[src] == nw.group[dst]
}

// severed reports whether a partition that closes links separates src
// and dst.
func (nw *network) severed(src, dst string) bool {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return !nw.permits(src, dst) && !nw.silent
}

// partition puts each listed group of node IDs in a group of its own;
// every node not listed is alone. It closes the links that now cross
// groups, or, if silent, leaves them to stall.
func (nw *network) partition(groups [][]string, all []string, silent bool) {
	nw.mu.Lock()
	nw.group = map[string]int{}
	nw.silent = silent
	nw.notify()
	for i, g := range groups {
		for _, id := range g {
			nw.group[id] = i + 1
		}
	}
	next := len(groups) + 1
	for _, id := range all {
		if _, ok := nw.group[id]; !ok {
			nw.group[id] = next
			next++
		}
	}
	proxies := append([]*raftProxy(nil), nw.proxies...)
	nw.mu.Unlock()
	if silent {
		return
	}
	for _, p := range proxies {
		p.cut()
	}
}

// heal lets every node reach every other again; stalled links resume.
func (nw *network) heal() {
	nw.mu.Lock()
	nw.group = map[string]int{}
	nw.silent = false
	nw.notify()
	nw.mu.Unlock()
}

// notify wakes stalled links to look at the partition again; nw.mu is held.
func (nw *network) notify() {
	close(nw.changed)
	nw.changed = make(chan struct{})
}

// await blocks while a silent partition separates src and dst, and
// reports whether they may talk: false once the partition is one that
// closes links, or when done is closed.
func (nw *network) await(src, dst string, done <-chan struct{}) bool {
	stalled := false
	for {
		nw.mu.Lock()
		ok := nw.permits(src, dst)
		silent, changed := nw.silent, nw.changed
		nw.mu.Unlock()
		switch {
		case ok:
			return true
		case !silent:
			return false
		case !stalled:
			stalled = true
			nw.count(func(s *LinkStats) { s.Stalled++ })
		}
		select {
		case <-changed:
		case <-done:
			return false
		}
	}
}

// close stops every proxy and closes their links.
func (nw *network) close() {
	nw.mu.Lock()
	proxies := nw.proxies
	nw.proxies = nil
	nw.mu.Unlock()
	for _, p := range proxies {
		p.close()
	}
}

// raftProxy forwards connections to one node's Raft listener.
type raftProxy struct {
	nw     *network
	dst    string
	target string
	l      net.Listener

	done chan struct{} // closed when the proxy closes

	mu     sync.Mutex
	links  map[*link]struct{}
	closed bool
}

// link is one proxied connection from src to the proxy's node.
type link struct {
	src            string
	client, server net.Conn
	closeOnce      sync.Once
	done           chan struct{} // closed with the link
}

func (l *link) close() {
	l.closeOnce.Do(func() {
		close(l.done)
		l.client.Close()
		l.server.Close()
	})
}

func (p *raftProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *raftProxy) handle(raw net.Conn) {
	c, src, err := p.accept(raw)
	if err != nil {
		raw.Close()
		return
	}
	// Behind a silent partition the dialer's bytes wait unread, as they
	// would in a network that drops them and retransmits after it heals.
	if !p.nw.await(src, p.dst, p.done) {
		p.nw.count(func(s *LinkStats) { s.Refused++ })
		c.Close()
		return
	}
	s, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", p.target, p.nw.conf())
	if err != nil {
		// The node is down: the dialer sees the connection drop, as it would
		// see a refused dial.
		c.Close()
		return
	}
	l := &link{src: src, client: c, server: s, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.close()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	// A partition that closes links may have begun between the check
	// above and registering.
	if p.nw.severed(src, p.dst) {
		p.drop(l)
		return
	}
	p.nw.count(func(s *LinkStats) { s.Proxied++ })
	done := make(chan struct{}, 2)
	pump := func(to, from net.Conn) {
		p.pump(l, to, from)
		done <- struct{}{}
	}
	go pump(s, c)
	go pump(c, s)
	<-done
	p.drop(l)
}

// pump copies from one end of l to the other. Behind a silent partition it
// holds what it read and stops reading, so the sender's socket buffers fill
// and its writes block; after Heal the held bytes go on, none lost.
func (p *raftProxy) pump(l *link, to, from net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			if !p.nw.await(l.src, p.dst, l.done) {
				return
			}
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// accept ends the dialer's TLS on raw and returns the connection and the
// dialer's node ID, the common name of its certificate.
func (p *raftProxy) accept(raw net.Conn) (net.Conn, string, error) {
	conf := p.nw.conf()
	if conf == nil {
		return nil, "", fmt.Errorf("raft proxy to %s: no cluster key yet", p.dst)
	}
	c := tls.Server(raw, conf)
	raw.SetDeadline(time.Now().Add(handshakeTimeout))
	defer raw.SetDeadline(time.Time{})
	if err := c.Handshake(); err != nil {
		return nil, "", fmt.Errorf("raft proxy to %s: %w", p.dst, err)
	}
	return c, c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

// cut closes the links that the current partition forbids.
func (p *raftProxy) cut() {
	p.mu.Lock()
	var cut []*link
	for l := range p.links {
		if !p.nw.allowed(l.src, p.dst) {
			cut = append(cut, l)
		}
	}
	p.mu.Unlock()
	for _, l := range cut {
		p.drop(l)
	}
	p.nw.count(func(s *LinkStats) { s.Cut += len(cut) })
}

func (p *raftProxy) drop(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
	l.close()
}

func (p *raftProxy) close() {
	p.l.Close()
	p.mu.Lock()
	if !p.closed {
		close(p.done)
	}
	p.closed = true
	links := p.links
	p.links = map[*link]struct{}{}
	p.mu.Unlock()
	for l := range links {
		l.close()
	}
}
