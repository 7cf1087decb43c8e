package replication

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestSilentPeerDropped: a peer that connects and sends nothing is dropped
// when the handshake deadline passes, and logged.
func TestSilentPeerDropped(t *testing.T) {
	var logs syncBuffer
	l, err := newTLSStreamLayer("127.0.0.1:0", nil, memberTLS(t, "n1"), 200*time.Millisecond, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The layer closes the connection; the read then ends. The bound is
	// generous: only "it ends" is promised, not when on a loaded machine.
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read data from the layer without a handshake")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the silent connection stayed open")
	}
	waitFor(t, 10*time.Second, "the refusal logged", func() bool { return strings.Contains(logs.String(), "raft peer refused") })
}

// TestRefusalLogRateLimited: refusals of one host are logged once per
// interval, each host on its own.
func TestRefusalLogRateLimited(t *testing.T) {
	var logs syncBuffer
	r := newRefusalLog(slog.New(slog.NewTextHandler(&logs, nil)), time.Hour)
	for i := range 100 {
		r.refuse(fmt.Sprintf("10.0.0.1:%d", 1000+i), errTest)
	}
	r.refuse("10.0.0.2:1", errTest)
	if n := strings.Count(logs.String(), "raft peer refused"); n != 2 {
		t.Fatalf("%d lines logged, want 2 (one per host):\n%s", n, logs.String())
	}
}

var errTest = errors.New("test refusal")

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// freeAddr is a loopback address nothing listens on: a port the kernel
// chose, closed again.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestDialWaitsForRestartingPeer: a peer whose port refuses connections
// (its process is restarting) is dialled again until it listens, so raft
// reaches it as soon as it is back instead of after its replication
// backoff, which doubles with every refusal up to 10 s.
func TestDialWaitsForRestartingPeer(t *testing.T) {
	dialer, err := newTLSStreamLayer("127.0.0.1:0", nil, memberTLS(t, "n1"), handshakeTimeout, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer dialer.Close()
	addr := freeAddr(t)
	type dialed struct {
		c   net.Conn
		err error
	}
	done := make(chan dialed, 1)
	go func() {
		c, err := dialer.Dial(raft.ServerAddress(addr), time.Minute)
		done <- dialed{c, err}
	}()
	time.Sleep(300 * time.Millisecond)
	peer, err := newTLSStreamLayer(addr, nil, memberTLS(t, "n2"), handshakeTimeout, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	go func() {
		if c, err := peer.Accept(); err == nil {
			c.Close()
		}
	}()
	d := <-done
	if d.err != nil {
		t.Fatalf("dial of a peer that came back after 300 ms: %v", d.err)
	}
	d.c.Close()
}

// TestDialRefusedEnds: the retries of a refused dial end when raft's
// timeout passes, and at once when the store stops dialing (Close: raft's
// shutdown waits for its replication goroutines, which wait in Dial); the
// error names the refusal.
func TestDialRefusedEnds(t *testing.T) {
	cases := []struct {
		name    string
		timeout time.Duration
		stop    bool
	}{
		{name: "timeout", timeout: 300 * time.Millisecond},
		{name: "stopped", timeout: time.Hour, stop: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := newTLSStreamLayer("127.0.0.1:0", nil, memberTLS(t, "n1"), handshakeTimeout, testLogger())
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			done := make(chan error, 1)
			start := time.Now()
			go func() {
				c, err := l.Dial(raft.ServerAddress(freeAddr(t)), tc.timeout)
				if c != nil {
					c.Close()
				}
				done <- err
			}()
			if tc.stop {
				time.Sleep(100 * time.Millisecond)
				l.stopDialing()
			}
			// Generous: only that it ends is promised, well before the
			// hour of the stopped case.
			select {
			case err := <-done:
				if !errors.Is(err, syscall.ECONNREFUSED) {
					t.Fatalf("dial error %v, want one wrapping ECONNREFUSED", err)
				}
				if el := time.Since(start); el < min(tc.timeout, 100*time.Millisecond) {
					t.Fatalf("dial gave up after %v, before the timeout or the stop", el)
				}
			case <-time.After(time.Minute):
				t.Fatal("dial of a refusing peer did not end")
			}
		})
	}
}
