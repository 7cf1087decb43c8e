package replication

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
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
