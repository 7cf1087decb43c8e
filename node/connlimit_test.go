package node_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node"
)

// records is a slog.Handler that keeps what is logged.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *records) WithGroup(string) slog.Handler            { return h }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r.Clone())
	h.mu.Unlock()
	return nil
}

// matching returns the records with message msg whose attribute key is
// value.
func (h *records) matching(msg, key, value string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range h.recs {
		if r.Message != msg {
			continue
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == key && a.Value.String() == value {
				out = append(out, r)
				return false
			}
			return true
		})
	}
	return out
}

// dialFrom opens a TCP connection to addr from the loopback address ip.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(addr, "quack:"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// refusedFrom checks that a connection to addr from ip is refused: reset
// as it opens, or closed at once.
func refusedFrom(t *testing.T, ip, addr, what string) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(addr, "quack:"))
	if err != nil {
		return
	}
	defer conn.Close()
	waitDropped(t, conn, 10*time.Second, what)
}

// served checks that conn is served: a GET / on it gets the banner.
func served(t *testing.T, conn net.Conn, addr string) {
	t.Helper()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	defer conn.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", strings.TrimPrefix(addr, "quack:")); err != nil {
		t.Fatalf("connection from %v: %v", conn.LocalAddr(), err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("connection from %v not served: %v", conn.LocalAddr(), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("connection from %v: HTTP %d", conn.LocalAddr(), resp.StatusCode)
	}
}

// TestConnectionCaps opens idle TCP connections, sending nothing. Before,
// every one was held (21,000 of them exhausted a node's file descriptors,
// and its gossip flapped); now one address holds at most its share and
// all clients together at most the total, each connection past them is
// closed as soon as it is accepted and logged once a minute per address,
// and a member's address is exempt.
func TestConnectionCaps(t *testing.T) {
	logs := &records{}
	addr, _ := startServer(t, func(c *node.Config) {
		c.MaxConns, c.MaxConnsPerClient = 6, 2
		c.MemberHost = func(host string) bool { return host == "127.0.0.3" }
		// Idle connections are held until the caps drop them.
		c.ReadHeaderTimeout = 5 * time.Minute
		c.Logger = slog.New(logs)
	})
	held := []net.Conn{dialFrom(t, "127.0.0.2", addr), dialFrom(t, "127.0.0.2", addr)}
	for range 20 {
		refusedFrom(t, "127.0.0.2", addr, "a third connection from one address")
	}
	held = append(held, dialFrom(t, "127.0.0.4", addr), dialFrom(t, "127.0.0.4", addr), dialFrom(t, "127.0.0.5", addr))
	last := dialFrom(t, "127.0.0.5", addr)
	refusedFrom(t, "127.0.0.6", addr, "a seventh connection in all")
	for range 10 {
		served(t, dialFrom(t, "127.0.0.3", addr), addr)
	}
	for _, c := range held {
		served(t, c, addr)
	}
	// Once one closes, another client gets its place.
	last.Close()
	deadline := time.Now().Add(30 * time.Second)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.6")}}
	for {
		c, err := d.Dial("tcp", strings.TrimPrefix(addr, "quack:"))
		if err == nil {
			t.Cleanup(func() { c.Close() })
			c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); err != nil && strings.Contains(err.Error(), "timeout") {
				served(t, c, addr)
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection admitted after one closed")
		}
	}
	if got := logs.matching("connection refused", "client", "127.0.0.2"); len(got) != 1 {
		t.Fatalf("20 refusals from one address logged %d times, want once a minute", len(got))
	}
	if got := logs.matching("connection refused", "client", "127.0.0.6"); len(got) != 1 {
		t.Fatalf("refusals past the total logged %d times for 127.0.0.6, want once", len(got))
	}
}
