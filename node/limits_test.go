package node_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/wire"
)

// maxLeaseSeconds is the largest heartbeat lease DuckDB's protocol allows.
const maxLeaseSeconds = (1<<63 - 1) / 1000

// fromAddr returns an HTTP client whose connections leave from the
// loopback address ip (all of 127.0.0.0/8 reaches the server), so a test
// can play a second client machine.
func fromAddr(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 30 * time.Second}
}

// handshake opens a Q3 session asking for lease seconds through hc, and
// returns the answer.
func handshake(t *testing.T, hc *http.Client, addr string, lease uint64) (wire.Header, wire.Message) {
	t.Helper()
	body := encode(t, wire.Q3, wire.Header{Type: wire.MsgConnectionRequest},
		&wire.ConnectionRequest{AuthString: testToken, MinVersion: 3, MaxVersion: 3, HeartbeatTimeoutSeconds: lease})
	resp, err := hc.Post("http://"+strings.TrimPrefix(addr, "quack:")+"/quack", "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	h, msg, err := wire.DecodeMessage(data, wire.Q3, wire.Limits{})
	if err != nil {
		t.Fatalf("decode answer: %v", err)
	}
	return h, msg
}

// TestSessionFloodFromOneClient opens sessions from one client address
// until the server refuses, each asking for the largest lease. Before the
// per-client cap the flood took every session of the server and another
// client was locked out ("too many sessions"); now it gets its share and
// the other client connects.
func TestSessionFloodFromOneClient(t *testing.T) {
	addr, srv := startServer(t, func(c *node.Config) { c.MaxSessions = 8 })
	flood := fromAddr("127.0.0.2")
	opened := 0
	for range 9 {
		h, msg := handshake(t, flood, addr, maxLeaseSeconds)
		if _, ok := msg.(*wire.ConnectionResponse); !ok || h.ConnectionID == "" {
			if e, ok := msg.(*wire.ErrorResponse); !ok || !strings.Contains(e.Message, "too many sessions") {
				t.Fatalf("flood refused with %T %+v, want too many sessions", msg, msg)
			}
			break
		}
		opened++
	}
	if opened == 0 || opened >= 8 {
		t.Fatalf("one client opened %d of the server's 8 sessions", opened)
	}
	c := connect(t, addr, wire.Q3)
	exec(t, c, "SELECT 1")
	if n := srv.SessionCount(); n != opened+1 {
		t.Fatalf("%d sessions, want %d", n, opened+1)
	}
}

// handshakeWith is handshake with extra HTTP headers.
func handshakeWith(t *testing.T, hc *http.Client, addr string, header http.Header) (wire.Header, wire.Message) {
	t.Helper()
	body := encode(t, wire.Q3, wire.Header{Type: wire.MsgConnectionRequest},
		&wire.ConnectionRequest{AuthString: testToken, MinVersion: 3, MaxVersion: 3, HeartbeatTimeoutSeconds: 60})
	req, err := http.NewRequest(http.MethodPost, "http://"+strings.TrimPrefix(addr, "quack:")+"/quack", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	h, msg, err := wire.DecodeMessage(data, wire.Q3, wire.Limits{})
	if err != nil {
		t.Fatalf("decode answer: %v", err)
	}
	return h, msg
}

// TestMemberSessionsOutsideTheCaps fills the server's client sessions
// from two addresses, then opens the sessions a cluster's members open to
// route their clients' reads. Before, members were told apart by address
// only and counted in the total: clients that filled it (a read token
// held 1,024 sessions on a leader) refused the members too, and every
// other node's strong reads failed. Now a session that carries the
// members' credential is a member's, whatever its address, and outside
// both caps; one with a wrong credential is a client's.
func TestMemberSessionsOutsideTheCaps(t *testing.T) {
	const cred = "member-credential-0123"
	addr, srv := startServer(t, func(c *node.Config) {
		c.MaxSessions, c.MaxSessionsPerClient = 4, 2
		c.MemberCredential = cred
	})
	opens := func(hc *http.Client, header http.Header) (string, string) {
		t.Helper()
		h, msg := handshakeWith(t, hc, addr, header)
		if e, ok := msg.(*wire.ErrorResponse); ok {
			return "", e.Message
		}
		return h.ConnectionID, ""
	}
	member := http.Header{wire.MemberHeader: {cred}}
	var clients []string
	for _, ip := range []string{"127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"} {
		id, refused := opens(fromAddr(ip), nil)
		if refused != "" {
			t.Fatalf("client session from %s refused: %s", ip, refused)
		}
		clients = append(clients, id)
	}
	if _, refused := opens(fromAddr("127.0.0.4"), nil); !strings.Contains(refused, "too many sessions") {
		t.Fatalf("a fifth client session: %q, want too many sessions", refused)
	}
	if _, refused := opens(fromAddr("127.0.0.2"), http.Header{wire.MemberHeader: {"not-the-credential"}}); !strings.Contains(refused, "too many sessions") {
		t.Fatalf("a session with a wrong member credential: %q, want too many sessions", refused)
	}
	// Members' sessions, from a client's address and from another, are
	// outside both caps.
	for i, ip := range []string{"127.0.0.2", "127.0.0.2", "127.0.0.2", "127.0.0.5", "127.0.0.5", "127.0.0.5"} {
		if _, refused := opens(fromAddr(ip), member); refused != "" {
			t.Fatalf("member session %d from %s refused: %s", i, ip, refused)
		}
	}
	if n := srv.SessionCount(); n != 10 {
		t.Fatalf("%d sessions, want 4 of clients and 6 of members", n)
	}
	// Members' sessions do not count toward the clients' total: once a
	// client leaves, another client gets its place.
	if _, _, msg := post(t, addr, encode(t, wire.Q3, wire.Header{Type: wire.MsgDisconnect, ConnectionID: clients[0]}, &wire.DisconnectMessage{})); msg == nil {
		t.Fatal("disconnect not answered")
	}
	if _, refused := opens(fromAddr("127.0.0.4"), nil); refused != "" {
		t.Fatalf("a client after one left: %s", refused)
	}
}

// TestLargestLeaseStillExpires asks for the largest lease DuckDB allows
// and goes idle. Before the server capped leases the session never
// expired; now it ends after the server's maximum, and the handshake
// says which lease was granted.
func TestLargestLeaseStillExpires(t *testing.T) {
	addr, srv := startServer(t, func(c *node.Config) { c.MaxLease = time.Second })
	_, msg := handshake(t, http.DefaultClient, addr, maxLeaseSeconds)
	resp, ok := msg.(*wire.ConnectionResponse)
	if !ok {
		t.Fatalf("handshake: %T %+v", msg, msg)
	}
	if resp.HeartbeatTimeoutSeconds != 1 {
		t.Errorf("granted lease %d s, want the server's maximum of 1 s", resp.HeartbeatTimeoutSeconds)
	}
	// The reaper runs every second: generous.
	deadline := time.Now().Add(30 * time.Second)
	for srv.SessionCount() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a session with the largest lease never expired")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClientKeepsAShorterLeaseAlive checks that the Go client heartbeats
// within the lease the server granted, not the one it asked for (60 s):
// idle for more than two granted leases, its session is still there.
func TestClientKeepsAShorterLeaseAlive(t *testing.T) {
	const lease = 3 * time.Second
	addr, _ := startServer(t, func(c *node.Config) { c.MaxLease = lease })
	c := connect(t, addr, wire.Q3)
	time.Sleep(2*lease + time.Second)
	exec(t, c, "SELECT 1")
}

// dialRaw opens a TCP connection to the server.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(addr, "quack:"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// waitDropped waits until the server closes conn, at most within.
func waitDropped(t *testing.T, conn net.Conn, within time.Duration, what string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, bufio.NewReader(conn))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%s: the server still held the connection after %v", what, within)
	}
}

// TestSlowRequestsAreDropped holds connections open by sending the
// headers, or the body, a byte at a time (slowloris). The server drops
// each after its timeout, and serves another client meanwhile. Before the
// timeouts were configurable and the body had a deadline, headers were
// dropped only after 30 s and a trickled body held its handler for as long
// as the client kept sending.
func TestSlowRequestsAreDropped(t *testing.T) {
	addr, _ := startServer(t, func(c *node.Config) {
		c.ReadHeaderTimeout = 500 * time.Millisecond
		c.BodyTimeout = 500 * time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
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
	host := strings.TrimPrefix(addr, "quack:")
	headers := dialRaw(t, addr)
	go trickle(headers, []byte("POST /quack HTTP/1.1\r\nHost: "+host+"\r\nContent-Type: application/octet-stream\r\n"+strings.Repeat("X-Pad: 1\r\n", 100)))
	body := dialRaw(t, addr)
	if _, err := fmt.Fprintf(body, "POST /quack HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000\r\n\r\n", host); err != nil {
		t.Fatal(err)
	}
	go trickle(body, bytes.Repeat([]byte{0}, 100000))

	c := connect(t, addr, wire.Q3)
	exec(t, c, "SELECT 1")
	// Each timeout is 500 ms; the bound is loose for a loaded machine,
	// and far below what the trickles would take (seconds of headers,
	// hours of body).
	waitDropped(t, headers, 15*time.Second, "slow headers")
	waitDropped(t, body, 15*time.Second, "slow body")
	exec(t, c, "SELECT 2")
}

// TestCompressedRequestOfASessionStaysWithinTheLimit sends, from an open
// (authenticated) session, a small compressed request that declares far
// more than the message limit: it is refused within the limit, not
// decompressed in full.
func TestCompressedRequestOfASessionStaysWithinTheLimit(t *testing.T) {
	addr, srv := startServer(t, func(c *node.Config) { c.MaxMessageBytes = 1 << 20 })
	c := connect(t, addr, wire.Q1)
	msg := wire.AppendHeader(nil, wire.Header{Type: wire.MsgPrepareRequest, ConnectionID: c.ID()})
	bomb := compressed(t, append(msg, make([]byte, 200<<20)...), false)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/quack", bytes.NewReader(bomb)))
	runtime.ReadMemStats(&after)
	h, rest, err := wire.DecodeHeader(rec.Body.Bytes())
	if err != nil || h.Type != wire.MsgErrorResponse {
		t.Fatalf("answer %v, %v; want an ERROR_RESPONSE", h.Type, err)
	}
	answer, err := wire.DecodeBody(wire.Q1, h.Type, rest, wire.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("answer: %s", answer.(*wire.ErrorResponse).Message)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
		t.Fatalf("refusing the bomb allocated %d MiB; the limit is 1 MiB", alloc>>20)
	}
	exec(t, c, "SELECT 1")
}
