package testcluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/testcluster"
)

// balancer is a load balancer inside the client: every request goes to
// the node it is pointed at, or, when pointed at none, to the next node
// in turn, with no stickiness at all.
type balancer struct {
	base  http.RoundTripper
	mu    sync.Mutex
	addrs []string
	to    string
	next  int
}

func newBalancer(c *testcluster.Cluster) *balancer {
	b := &balancer{base: &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}}
	for _, n := range c.Nodes {
		b.addrs = append(b.addrs, n.QuackAddr)
	}
	return b
}

// point sends every request to addr; "" goes round robin.
func (b *balancer) point(addr string) {
	b.mu.Lock()
	b.to = addr
	b.mu.Unlock()
}

// roundRobin sends the requests to nodes in turn, as a balancer that
// checks the nodes' health would.
func (b *balancer) roundRobin(nodes ...*testcluster.Node) {
	b.mu.Lock()
	b.to, b.addrs = "", nil
	for _, n := range nodes {
		b.addrs = append(b.addrs, n.QuackAddr)
	}
	b.mu.Unlock()
}

func (b *balancer) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	host := b.to
	if host == "" {
		host = b.addrs[b.next%len(b.addrs)]
		b.next++
	}
	b.mu.Unlock()
	r := req.Clone(req.Context())
	r.URL.Host, r.Host = host, host
	return b.base.RoundTrip(r)
}

// connectThrough opens a session of generation g through b.
func connectThrough(t *testing.T, b *balancer, g wire.Generation) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	plain := false
	conn, err := client.Connect(ctx, "quack:"+b.addrs[0], client.Options{Token: testcluster.Token, Generation: g, TLS: &plain,
		HTTPClient: &http.Client{Transport: b}})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// wantCode runs sql and wants it to fail with an error of code.
func wantCode(t *testing.T, conn *client.Conn, sql, code string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := conn.Exec(ctx, sql)
	if got := errorCode(err); got != code {
		t.Fatalf("%s: %v (code %q), want code %q", sql, err, got, code)
	}
}

// errorCode is the code of a node's error, "" for none.
func errorCode(err error) string {
	var se *client.ServerError
	if errors.As(err, &se) {
		return se.Code
	}
	return ""
}

// rawQuack posts one Quack message for session id to addr and returns the
// answer and its decoded message.
func rawQuack(t *testing.T, addr string, g wire.Generation, id string, msg wire.Message, typ wire.MessageType, h http.Header) (*http.Response, wire.Message) {
	t.Helper()
	body, err := wire.AppendMessage(nil, g, wire.Header{Type: typ, ConnectionID: id}, msg)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/quack", bytes.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("post to %s: %v", addr, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	rh, rest, err := wire.DecodeHeader(data)
	if err != nil {
		t.Fatalf("answer of %s: %v", addr, err)
	}
	m, err := wire.DecodeBody(g, rh.Type, rest, wire.Limits{})
	if err != nil {
		t.Fatalf("answer of %s: %v", addr, err)
	}
	return resp, m
}

// TestSessionsFollowAndOutliveTheirNode runs a session of each generation
// through a balancer with no stickiness over an in-process cluster. Its
// requests to other nodes and to a router are forwarded to the node
// holding it, with its settings; once that node is killed, another adopts the session under
// the same id: its settings and its read-your-writes hold, and what
// could not move answers with its code: the result being streamed
// (result_lost), the open transaction until COMMIT (transaction_lost,
// and nothing of it applied), the prepared statement (temporary_lost).
// The killed node, restarted, forwards the session to its new holder.
func TestSessionsFollowAndOutliveTheirNode(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{InProcess: true})
	c.WaitForLeader(t, 20*time.Second)
	setup := c.Nodes[0].Client(t)
	exec(t, setup, "CREATE TABLE moved(g INTEGER, v INTEGER)")
	router := c.StartRouter(t)

	for i, g := range []wire.Generation{wire.Q1, wire.Q3} {
		owner, other := c.Nodes[i], c.Nodes[(i+1)%3]
		t.Run(fmt.Sprintf("Q%d", g), func(t *testing.T) {
			b := newBalancer(c)
			b.point(owner.QuackAddr)
			conn := connectThrough(t, b, g)
			if !strings.HasPrefix(conn.ID(), owner.ID+".") {
				t.Fatalf("session id %q does not name its node %s", conn.ID(), owner.ID)
			}
			exec(t, conn, "SET TimeZone = 'America/New_York'")
			exec(t, conn, "PREPARE p AS SELECT 42")

			// Forwarded to the owner, which holds the settings.
			b.point(other.QuackAddr)
			if got := scalar(t, conn, "SELECT current_setting('TimeZone')"); got != "America/New_York" {
				t.Fatalf("TimeZone through %s = %s", other.ID, got)
			}
			exec(t, conn, fmt.Sprintf("INSERT INTO moved VALUES (%d, 1)", g))
			// A router serves it too.
			b.point(router.QuackAddr)
			if got := scalar(t, conn, fmt.Sprintf("SELECT count(*) FROM moved WHERE g = %d", g)); got != "1" {
				t.Fatalf("rows of the session through the router = %s, want 1", got)
			}
			if !strings.Contains(owner.Log(), conn.ID()) {
				t.Fatalf("%s never saw session %s", owner.ID, conn.ID())
			}

			// The answer names the holder in its affinity cookie, even
			// when another node relayed it; a header naming another
			// session than the message is refused.
			resp, m := rawQuack(t, other.QuackAddr, g, conn.ID(), &wire.PrepareRequest{SQL: "SELECT 1", HasQueryUUID: true,
				QueryUUID: wire.RandomUUID()}, wire.MsgPrepareRequest, http.Header{node.HopHeader: {"2"}})
			if _, ok := m.(*wire.PrepareResponse); !ok {
				t.Fatalf("raw PREPARE through %s: %#v", other.ID, m)
			}
			if ck := cookie(resp, node.AffinityCookie); ck != owner.ID {
				t.Fatalf("affinity cookie through %s = %q, want %s", other.ID, ck, owner.ID)
			}
			_, m = rawQuack(t, other.QuackAddr, g, conn.ID(), &wire.PrepareRequest{SQL: "SELECT 1", HasQueryUUID: true,
				QueryUUID: wire.RandomUUID()}, wire.MsgPrepareRequest, http.Header{node.ConnectionIDHeader: {"n9.00"}})
			if e, ok := m.(*wire.ErrorResponse); !ok || !strings.Contains(e.Message, node.ConnectionIDHeader) {
				t.Fatalf("mismatched %s: %#v", node.ConnectionIDHeader, m)
			}
			// An id altered by one digit names no session.
			forged := []byte(conn.ID())
			forged[len(forged)-40] ^= 1
			_, m = rawQuack(t, other.QuackAddr, g, string(forged), &wire.PrepareRequest{SQL: "SELECT 1", HasQueryUUID: true,
				QueryUUID: wire.RandomUUID()}, wire.MsgPrepareRequest, nil)
			if e, ok := m.(*wire.ErrorResponse); !ok || e.Message != "Invalid connection id" {
				t.Fatalf("forged id: %#v", m)
			}

			// A transaction, and a result being streamed, on the owner.
			b.point(owner.QuackAddr)
			exec(t, conn, "BEGIN")
			exec(t, conn, fmt.Sprintf("INSERT INTO moved VALUES (%d, 2)", g))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rows, err := conn.Query(ctx, "SELECT range FROM range(5000000)")
			if err != nil {
				t.Fatal(err)
			}
			if !rows.Next() {
				t.Fatalf("no first row: %v", rows.Err())
			}

			owner.Kill()
			b.point(other.QuackAddr)
			for rows.Next() {
			}
			if code := errorCode(rows.Err()); code != string(node.CodeResultLost) {
				t.Fatalf("streamed result after its node died: %v (code %q), want %s", rows.Err(), code, node.CodeResultLost)
			}
			rows.Close()
			wantCode(t, conn, fmt.Sprintf("INSERT INTO moved VALUES (%d, 3)", g), string(node.CodeTransactionLost))
			wantCode(t, conn, "COMMIT", string(node.CodeTransactionLost))
			wantCode(t, conn, "EXECUTE p", string(node.CodeTemporaryLost))
			if got := scalar(t, conn, "SELECT current_setting('TimeZone')"); got != "America/New_York" {
				t.Fatalf("TimeZone after the move = %s", got)
			}
			// Read your writes: the row acknowledged on the dead node.
			if got := scalar(t, conn, fmt.Sprintf("SELECT count(*) FROM moved WHERE g = %d", g)); got != "1" {
				t.Fatalf("rows of the session after the move = %s, want 1 (the acknowledged one, not the lost transaction's)", got)
			}
			b.roundRobin(c.Others(owner)...)
			for range 6 {
				exec(t, conn, "SELECT 1")
			}

			owner.Restart(t)
			c.WaitForVoters(t, 3, 30*time.Second)
			b.point(owner.QuackAddr)
			deadline := time.Now().Add(30 * time.Second)
			for {
				got, err := queryString(context.Background(), conn, "SELECT current_setting('TimeZone')")
				if err == nil && got == "America/New_York" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("through the restarted %s: %q, %v", owner.ID, got, err)
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}

// cookie is the value of the cookie name that resp sets.
func cookie(resp *http.Response, name string) string {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// TestFrozenHolderGivesUpItsSessions freezes (SIGSTOP) the duckraftd
// holding a session. The session's next request, through another node,
// waits only until gossip declares the frozen node dead, and is answered
// request_lost: the frozen node may still run it when it thaws. The
// session is then adopted with its settings, and changed there; thawed,
// the old holder learns of the adoption and hands the session's requests
// to the new holder rather than answering from its stale copy.
func TestFrozenHolderGivesUpItsSessions(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	c.WaitForLeader(t, 30*time.Second)
	owner, other := c.Nodes[0], c.Nodes[1]
	b := newBalancer(c)
	b.point(owner.QuackAddr)
	conn := connectThrough(t, b, wire.Q1)
	exec(t, conn, "SET TimeZone = 'America/New_York'")

	owner.Pause()
	b.point(other.QuackAddr)
	start := time.Now()
	wantCode(t, conn, "SELECT 42", string(node.CodeRequestLost))
	t.Logf("the request to the frozen holder was given up after %v", time.Since(start).Round(time.Millisecond))
	if got := scalar(t, conn, "SELECT current_setting('TimeZone')"); got != "America/New_York" {
		t.Fatalf("TimeZone after the move = %s", got)
	}
	exec(t, conn, "SET TimeZone = 'Europe/Paris'")

	owner.Resume()
	b.point(owner.QuackAddr)
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := queryString(context.Background(), conn, "SELECT current_setting('TimeZone')")
		if err == nil && got == "Europe/Paris" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("through the thawed holder: %q, %v; want the new holder's Europe/Paris", got, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(owner.Log(), "session dropped: another node adopted it") {
		t.Errorf("%s did not drop the session it held before it froze", owner.ID)
	}
}

// TestRouterSettingsOutliveTheirNode: the settings the router keeps for a
// session itself, not DuckDB (SET duckraft_statement_timeout and SET
// duckraft_write_key), move with the session when its node dies. The key
// is still the next write's on the node that adopted the session: that
// write takes it, so the same key sent again with another write applies
// nothing. The timeout still ends a read that would run for hours.
func TestRouterSettingsOutliveTheirNode(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{InProcess: true})
	c.WaitForLeader(t, 20*time.Second)
	exec(t, c.Nodes[0].Client(t), "CREATE TABLE keyed(v INTEGER)")
	owner := c.Nodes[1]
	b := newBalancer(c)
	b.point(owner.QuackAddr)
	conn := connectThrough(t, b, wire.Q3)
	const key = "00112233445566778899aabbccddeeff"
	exec(t, conn, "SET duckraft_statement_timeout = '1s'")
	exec(t, conn, "SET duckraft_write_key = '"+key+"'")

	owner.Kill()
	b.roundRobin(c.Others(owner)...)
	exec(t, conn, "INSERT INTO keyed VALUES (1)")
	exec(t, conn, "SET duckraft_write_key = '"+key+"'")
	exec(t, conn, "INSERT INTO keyed VALUES (2)")
	exec(t, conn, "SET duckraft_consistency = 'strong'")
	if got := scalar(t, conn, "SELECT string_agg(v::VARCHAR, ',' ORDER BY v) FROM keyed"); got != "1" {
		t.Fatalf("rows after two writes under one key, the first on the node that adopted the session: %s, want 1", got)
	}
	wantCode(t, conn, "SELECT count(*) FROM range(100000000) a, range(100000000) b", string(outcome.StatementTimeout))
}
