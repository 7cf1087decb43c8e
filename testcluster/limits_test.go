package testcluster_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/testcluster"
)

// TestSessionFloodLeavesOthersServed floods a real duckraftd with sessions
// from one client address (127.0.0.2, which no member uses), each asking
// for the largest lease DuckDB allows. The node caps the flood at its
// per-client share, so a client from another address still connects, the
// cluster's own members (on 127.0.0.1) are not capped, and the flood's
// sessions end once idle for the server's maximum lease.
func TestSessionFloodLeavesOthersServed(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Args: []string{
		"--max-sessions", "16", "--max-sessions-per-client", "4", "--max-lease", "2s"}})
	leader := c.WaitForLeader(t, 20*time.Second)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	flood := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 30 * time.Second}
	body, err := wire.AppendMessage(nil, wire.Q3, wire.Header{Type: wire.MsgConnectionRequest},
		&wire.ConnectionRequest{AuthString: testcluster.Token, MinVersion: 3, MaxVersion: 3, HeartbeatTimeoutSeconds: (1<<63 - 1) / 1000})
	if err != nil {
		t.Fatal(err)
	}
	handshake := func() (wire.Message, error) {
		resp, err := flood.Post("http://"+leader.QuackAddr+"/quack", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		_, msg, err := wire.DecodeMessage(data, wire.Q3, wire.Limits{})
		return msg, err
	}
	opened := 0
	for range 17 {
		msg, err := handshake()
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := msg.(*wire.ErrorResponse); ok {
			if !strings.Contains(e.Message, "too many sessions from 127.0.0.2") {
				t.Fatalf("flood refused with %q", e.Message)
			}
			break
		}
		opened++
	}
	if opened != 4 {
		t.Fatalf("one client address opened %d sessions, want its cap of 4", opened)
	}
	// Members are not capped: reads routed from the others open sessions
	// here from 127.0.0.1 beside any number of local clients.
	for range 6 {
		conn := leader.Client(t)
		if _, err := conn.Exec(t.Context(), "SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
	// The flood's sessions expire after the 2 s maximum lease, whatever
	// they asked for; the reaper is generous.
	deadline := time.Now().Add(30 * time.Second)
	for {
		msg, err := handshake()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := msg.(*wire.ConnectionResponse); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the flood's sessions never expired")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestSlowRequestsAreDroppedByANode sends a real duckraftd a request's
// headers, and another request's body, a byte every 100 ms (slowloris).
// The node drops each connection after its timeout and serves another
// client meanwhile. Before the flags, the daemon's server dropped slow
// headers only after 30 s and never a slow body.
func TestSlowRequestsAreDroppedByANode(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{Args: []string{"--read-header-timeout", "500ms", "--body-timeout", "500ms"}})
	n := c.WaitForLeader(t, 20*time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	trickle := func(conn net.Conn, b []byte) {
		for _, c := range b {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := conn.Write([]byte{c}); err != nil {
				return
			}
		}
	}
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", n.QuackAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	headers := dial()
	go trickle(headers, []byte("POST /quack HTTP/1.1\r\nHost: "+n.QuackAddr+"\r\n"+strings.Repeat("X-Pad: 1\r\n", 100)))
	body := dial()
	if _, err := fmt.Fprintf(body, "POST /quack HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000\r\n\r\n", n.QuackAddr); err != nil {
		t.Fatal(err)
	}
	go trickle(body, bytes.Repeat([]byte{0}, 100000))
	// The node API's endpoints are guarded too.
	api := dial()
	if _, err := fmt.Fprintf(api, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000\r\n\r\n", nodeapi.WritePath, n.QuackAddr); err != nil {
		t.Fatal(err)
	}
	go trickle(api, bytes.Repeat([]byte{0}, 100000))

	conn := n.Client(t)
	if _, err := conn.Exec(t.Context(), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	// Each timeout is 500 ms; the bound is loose for a loaded machine and
	// far below what the trickles take (seconds of headers, hours of body).
	for name, c := range map[string]net.Conn{"slow headers": headers, "slow body": body, "slow node API body": api} {
		c.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, err := io.Copy(io.Discard, c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s: the node still held the connection after 15 s", name)
		}
	}
	if _, err := conn.Exec(t.Context(), "SELECT 2"); err != nil {
		t.Fatal(err)
	}
}
