package testcluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// network routes every Raft connection between a cluster's nodes through an
// in-process TCP proxy per destination node, so that a partition can cut
// links between groups of nodes. Each node advertises its proxy's address
// as its Raft address (duckraftd --raft-advertise), so every peer that dials
// it goes through the proxy.
//
// A proxy learns who is dialing from the first RPC on the connection:
// hashicorp/raft's RPC header carries the sender's advertised address, that
// is the sender's own proxy address, which names the sender uniquely.
type network struct {
	mu     sync.Mutex
	group  map[string]int // node ID → partition group; empty when healed
	silent bool           // the partition stalls links instead of closing them
	// changed is closed, and replaced, whenever the partition changes, to
	// wake links stalled by a silent one.
	changed chan struct{}
	byAddr  map[string]string // advertised Raft address → node ID
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

func newNetwork() *network {
	return &network{group: map[string]int{}, changed: make(chan struct{}), byAddr: map[string]string{}}
}

func (nw *network) count(f func(*LinkStats)) {
	nw.mu.Lock()
	f(&nw.stats)
	nw.mu.Unlock()
}

// identifyLimit bounds how much of a connection's first bytes a proxy reads
// to find the sender's address; the RPC header comes first, so a few
// hundred bytes suffice.
const identifyLimit = 64 << 10

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
	nw.byAddr[n.RaftAdvertise] = n.ID
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

// identify returns the node whose advertised address occurs first in b;
// of two addresses found at the same place ("…:4000" and "…:40001") the
// longer is the one.
func (nw *network) identify(b []byte) string {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	best, bestAddr, at := "", "", -1
	for addr, id := range nw.byAddr {
		i := bytes.Index(b, []byte(addr))
		if i >= 0 && (at < 0 || i < at || (i == at && len(addr) > len(bestAddr))) {
			best, bestAddr, at = id, addr, i
		}
	}
	return best
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

func (p *raftProxy) handle(c net.Conn) {
	src, head, err := p.readSource(c)
	if err != nil {
		c.Close()
		return
	}
	// Behind a silent partition the dialer's bytes wait unread, as they
	// would in a network that drops them and retransmits after it heals.
	if !p.nw.await(src, p.dst, p.done) {
		p.nw.count(func(s *LinkStats) { s.Refused++ })
		c.Close()
		return
	}
	s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
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
	if _, err := s.Write(head); err != nil {
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

// readSource reads the start of c until it names a known node, and returns
// that node (empty if none was found within identifyLimit bytes) and the
// bytes read.
func (p *raftProxy) readSource(c net.Conn) (string, []byte, error) {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	var head []byte
	buf := make([]byte, 4096)
	for len(head) < identifyLimit {
		n, err := c.Read(buf)
		head = append(head, buf[:n]...)
		if src := p.nw.identify(head); src != "" {
			return src, head, nil
		}
		if err != nil {
			if errors.Is(err, io.EOF) || len(head) == 0 {
				return "", nil, fmt.Errorf("raft proxy to %s: %w", p.dst, err)
			}
			return "", head, nil
		}
	}
	return "", head, nil
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
