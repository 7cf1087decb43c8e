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

// TestSessionFloodLeavesOthersServed floods the leader of a real cluster
// with sessions, each asking for the largest lease DuckDB allows: from one
// client address (127.0.0.2, which no member uses) until the per-client
// cap, then from three more until the node's total. A client from yet
// another address is refused, but strong reads sent to the other nodes,
// which route them to the leader in sessions of their own there, are
// served: members' sessions carry the members' credential and are not
// counted with the clients'. Before, members were told apart by address
// only and counted in the total, and a flood of the total broke every
// other node's strong reads ("no node can serve a strong read"). The
// flood's sessions end once idle for the server's maximum lease: they are
// kept alive with heartbeats while the checks run, however long a loaded
// machine makes them, and then left idle.
func TestSessionFloodLeavesOthersServed(t *testing.T) {
	const maxLease = 10 * time.Second
	c := testcluster.Start(t, 3, testcluster.Options{Args: []string{
		"--max-sessions", "16", "--max-sessions-per-client", "4", "--max-lease", maxLease.String()}})
	leader := c.WaitForLeader(t, 20*time.Second)
	setup := leader.Client(t)
	if _, err := setup.Exec(t.Context(), "CREATE TABLE t(i INTEGER); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	setup.Close()
	body, err := wire.AppendMessage(nil, wire.Q3, wire.Header{Type: wire.MsgConnectionRequest},
		&wire.ConnectionRequest{AuthString: testcluster.Token, MinVersion: 3, MaxVersion: 3, HeartbeatTimeoutSeconds: (1<<63 - 1) / 1000})
	if err != nil {
		t.Fatal(err)
	}
	post := func(ip string, body []byte) (wire.Header, wire.Message, error) {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 30 * time.Second}
		resp, err := hc.Post("http://"+leader.QuackAddr+"/quack", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			return wire.Header{}, nil, err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return wire.Header{}, nil, err
		}
		return wire.DecodeMessage(data, wire.Q3, wire.Limits{})
	}
	handshake := func(ip string) (wire.Message, error) {
		_, msg, err := post(ip, body)
		return msg, err
	}
	var flood []string
	for range 17 {
		h, msg, err := post("127.0.0.2", body)
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := msg.(*wire.ErrorResponse); ok {
			if !strings.Contains(e.Message, "too many sessions from 127.0.0.2") {
				t.Fatalf("flood refused with %q", e.Message)
			}
			break
		}
		flood = append(flood, h.ConnectionID)
	}
	if len(flood) != 4 {
		t.Fatalf("one client address opened %d sessions, want its cap of 4", len(flood))
	}
	for _, ip := range []string{"127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		for range 4 {
			h, msg, err := post(ip, body)
			if err != nil || msg.Type() != wire.MsgConnectionResponse {
				t.Fatalf("client session from %s: %+v, %v", ip, msg, err)
			}
			flood = append(flood, h.ConnectionID)
		}
	}
	// Heartbeats keep the flood alive until the checks are done.
	beat, beating := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(beating)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			for _, id := range flood {
				hb, err := wire.AppendMessage(nil, wire.Q3, wire.Header{Type: wire.MsgHeartbeatRequest, ConnectionID: id}, &wire.HeartbeatRequest{})
				if err != nil {
					t.Error(err)
					return
				}
				if _, msg, err := post("127.0.0.2", hb); err != nil || msg.Type() == wire.MsgErrorResponse {
					t.Errorf("heartbeat of flood session %s: %+v, %v", id, msg, err)
					return
				}
			}
			select {
			case <-beat:
				return
			case <-tick.C:
			}
		}
	}()
	full := func(when string) {
		t.Helper()
		if msg, err := handshake("127.0.0.6"); err != nil || msg.Type() != wire.MsgErrorResponse ||
			!strings.Contains(msg.(*wire.ErrorResponse).Message, "too many sessions: the server allows 16") {
			t.Fatalf("a client past the total %s: %+v, %v; want it refused", when, msg, err)
		}
	}
	full("after the flood")
	// Strong reads from the other nodes are served by the leader, in
	// sessions the others open there.
	for _, n := range c.Others(leader) {
		for range 3 {
			conn := n.Client(t)
			if _, err := conn.Exec(t.Context(), "SET duckraft_consistency = 'strong'"); err != nil {
				t.Fatal(err)
			}
			rows, err := conn.Query(t.Context(), "SELECT count(*) FROM t")
			if err != nil {
				t.Fatalf("strong read through %s while the leader's client sessions are full: %v", n.ID, err)
			}
			if !rows.Next() {
				t.Fatalf("strong read through %s: no row (%v)", n.ID, rows.Err())
			}
			rows.Close()
		}
	}
	full("after the strong reads")
	close(beat)
	<-beating
	// Idle now, the flood's sessions expire after the maximum lease,
	// whatever they asked for; the reaper is generous.
	deadline := time.Now().Add(maxLease + time.Minute)
	for {
		msg, err := handshake("127.0.0.2")
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
