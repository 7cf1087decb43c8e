package node_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/wire"
)

// answer is one HTTP answer read off a raw connection.
type answer struct {
	code string
	msg  wire.Message
	err  error
}

// startRequest opens a connection to addr, sends a POST /quack with the
// given framing and the first bytes of its body, and returns the connection
// and a channel that receives the answer whenever it comes. contentLength
// < 0 sends a chunked body (head as its first chunk).
func startRequest(t *testing.T, addr string, contentLength int64, head []byte) (net.Conn, <-chan answer) {
	t.Helper()
	host := strings.TrimPrefix(addr, "quack:")
	conn := dialRaw(t, addr)
	var req bytes.Buffer
	fmt.Fprintf(&req, "POST /quack HTTP/1.1\r\nHost: %s\r\nContent-Type: application/vnd.duckdb\r\n", host)
	if contentLength >= 0 {
		fmt.Fprintf(&req, "Content-Length: %d\r\n\r\n", contentLength)
		req.Write(head)
	} else {
		fmt.Fprintf(&req, "Transfer-Encoding: chunked\r\n\r\n%x\r\n", len(head))
		req.Write(head)
		req.WriteString("\r\n")
	}
	if _, err := conn.Write(req.Bytes()); err != nil {
		t.Fatal(err)
	}
	ch := make(chan answer, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			ch <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			ch <- answer{err: err}
			return
		}
		_, msg, err := wire.DecodeMessage(data, wire.Q1, wire.Limits{})
		ch <- answer{code: resp.Header.Get(wire.ErrorCodeHeader), msg: msg, err: err}
	}()
	return conn, ch
}

// wantAnswer waits for an ERROR_RESPONSE that says want; within is far
// beyond what the server needs, and far below what the request's body
// would take to arrive.
func wantAnswer(t *testing.T, ch <-chan answer, within time.Duration, want string) answer {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("no answer: %v", a.err)
		}
		e, ok := a.msg.(*wire.ErrorResponse)
		if !ok || !strings.Contains(e.Message, want) {
			t.Fatalf("answered %T %+v, want an error that says %q", a.msg, a.msg, want)
		}
		return a
	case <-time.After(within):
		t.Fatalf("no answer within %v: the server is still reading a body it should have refused", within)
	}
	return answer{}
}

// TestUnauthenticatedBodiesAreNotBuffered sends, without a session, 8
// requests at once that each declare a 250 MB body and send only its first
// 16 KiB. Before, the server read every body whole before it looked at the
// header (8 such bodies took a node to 4.8 GB): these got no answer until
// the bodies arrived. Now each is refused after its header, and what the
// server buffered stays a few kilobytes.
func TestUnauthenticatedBodiesAreNotBuffered(t *testing.T) {
	addr, srv := startServer(t, func(c *node.Config) { c.BodyTimeout = 10 * time.Minute })
	const declared = 250_000_000
	pad := make([]byte, 16<<10)
	withPad := func(b []byte) []byte { return append(b, pad...) }
	const nobody = "0123456789ABCDEF0123456789ABCDEF"
	for _, c := range []struct {
		name          string
		contentLength int64
		head          []byte
		want          string
	}{
		{"unknown session", declared, withPad(wire.AppendHeader(nil, wire.Header{Type: wire.MsgPrepareRequest, ConnectionID: nobody})), "Invalid connection id"},
		{"no session", declared, withPad(wire.AppendHeader(nil, wire.Header{Type: wire.MsgAppendRequest})), "Invalid connection id"},
		{"unknown session, chunked", -1, withPad(wire.AppendHeader(nil, wire.Header{Type: wire.MsgPrepareRequest, ConnectionID: nobody})), "Invalid connection id"},
		{"connection request", declared, withPad(wire.AppendHeader(nil, wire.Header{Type: wire.MsgConnectionRequest})), "exceeds the server's limit"},
		{"unknown type", declared, withPad(wire.AppendHeader(nil, wire.Header{Type: 42, ConnectionID: nobody})), "Unsupported message type"},
		{"garbage", declared, bytes.Repeat([]byte{0xFF}, 16<<10), "malformed message header"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var waits []<-chan answer
			for range 8 {
				_, ch := startRequest(t, addr, c.contentLength, c.head)
				waits = append(waits, ch)
			}
			for _, ch := range waits {
				wantAnswer(t, ch, 30*time.Second, c.want)
			}
		})
	}
	st := srv.IngressStats()
	if st.BodyPeak > 1<<20 {
		t.Fatalf("refusing bodies before authentication buffered up to %d bytes at once", st.BodyPeak)
	}
	if st.BodyBytes != 0 {
		t.Fatalf("%d bytes still counted as in flight after every request was answered", st.BodyBytes)
	}
	c := connect(t, addr, wire.Q1)
	exec(t, c, "SELECT 1")
}

// TestBodyBudgetBoundsBytesInFlight holds four 6 MiB bodies of an open
// session in flight against a node-wide budget of 16 MiB. Before, all four
// were read (there was no budget: a client could send as many
// message-limit bodies at once as it had connections); now two fit, the
// other two are refused with code busy after a short wait without being
// read, and the two in flight are served when they end.
func TestBodyBudgetBoundsBytesInFlight(t *testing.T) {
	const budget = 16 << 20
	addr, srv := startServer(t, func(c *node.Config) {
		c.MaxMessageBytes = 8 << 20
		c.MaxBodyBytesInFlight = budget
		c.BudgetWait = 200 * time.Millisecond
		c.BodyTimeout = 10 * time.Minute
	})
	id := openSession(t, addr)
	msg := encode(t, wire.Q1, wire.Header{Type: wire.MsgPrepareRequest, ConnectionID: id},
		&wire.PrepareRequest{SQL: "SELECT 42 --" + strings.Repeat("x", 6<<20)})
	head, tail := msg[:64<<10], msg[64<<10:]

	t.Run("known length", func(t *testing.T) {
		conns := make([]net.Conn, 4)
		waits := make([]<-chan answer, 4)
		for i := range conns {
			conns[i], waits[i] = startRequest(t, addr, int64(len(msg)), head)
		}
		// Two fit the budget and wait for their bodies; the other two
		// are refused after the wait.
		refused := map[int]bool{}
		deadline := time.After(30 * time.Second)
		for len(refused) < 2 {
			select {
			case <-deadline:
				t.Fatalf("%d of 4 bodies refused within 30 s; want 2 (16 MiB budget, 6 MiB each)", len(refused))
			case <-time.After(10 * time.Millisecond):
			}
			for i, ch := range waits {
				if refused[i] {
					continue
				}
				select {
				case a := <-ch:
					e, ok := a.msg.(*wire.ErrorResponse)
					if a.err != nil || !ok || a.code != string(outcome.Busy) || !strings.Contains(e.Message, "retry") {
						t.Fatalf("request %d answered %+v (%v), code %q; want a busy refusal", i, a.msg, a.err, a.code)
					}
					refused[i] = true
				default:
				}
			}
		}
		if st := srv.IngressStats(); st.BodyBytes > budget {
			t.Fatalf("%d bytes of bodies in flight, over the budget of %d", st.BodyBytes, budget)
		}
		for i := range conns {
			if refused[i] {
				continue
			}
			if _, err := conns[i].Write(tail); err != nil {
				t.Fatal(err)
			}
			select {
			case a := <-waits[i]:
				if _, ok := a.msg.(*wire.PrepareResponse); a.err != nil || !ok {
					t.Fatalf("request %d, once whole, answered %+v (%v)", i, a.msg, a.err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("request %d not answered once whole", i)
			}
		}
	})

	t.Run("chunked", func(t *testing.T) {
		// A body of unknown length takes budget as it arrives: two such
		// bodies of 6 MiB fit the 16 MiB budget, a third does not.
		var conns []net.Conn
		var waits []<-chan answer
		for i := range 3 {
			conn, ch := startRequest(t, addr, -1, head)
			if _, err := fmt.Fprintf(conn, "%x\r\n%s\r\n", len(tail)-(64<<10), tail[:len(tail)-(64<<10)]); err != nil {
				t.Fatal(err)
			}
			conns, waits = append(conns, conn), append(waits, ch)
			if i == 2 {
				break
			}
			// Each body is in before the next starts, so the third is
			// the one that does not fit.
			deadline := time.Now().Add(30 * time.Second)
			for srv.IngressStats().BodyBytes < int64(i+1)*int64(len(msg)-(64<<10)) {
				if time.Now().After(deadline) {
					t.Fatalf("body %d never arrived: %+v", i, srv.IngressStats())
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		if a := wantAnswer(t, waits[2], 30*time.Second, "retry"); a.code != string(outcome.Busy) {
			t.Fatalf("code %q, want %q", a.code, string(outcome.Busy))
		}
		if st := srv.IngressStats(); st.BodyBytes > budget {
			t.Fatalf("%d bytes of bodies in flight, over the budget of %d", st.BodyBytes, budget)
		}
		for i := range 2 {
			if _, err := fmt.Fprintf(conns[i], "%x\r\n%s\r\n0\r\n\r\n", 64<<10, tail[len(tail)-(64<<10):]); err != nil {
				t.Fatal(err)
			}
			select {
			case a := <-waits[i]:
				if _, ok := a.msg.(*wire.PrepareResponse); a.err != nil || !ok {
					t.Fatalf("request %d, once whole, answered %+v (%v)", i, a.msg, a.err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("request %d not answered once whole", i)
			}
		}
	})
	if st := srv.IngressStats(); st.BodyPeak > budget {
		t.Fatalf("bodies in flight peaked at %d bytes, over the budget of %d", st.BodyPeak, budget)
	}
}

// TestDecompressionBudget holds a compressed request of 32 MiB (a
// PREPARE of a long query with a long comment) in flight and sends a second
// one. Before there was no budget for decompressed bytes: four frames of
// 8 KB declaring 250 MB each took a node from 0.23 to 3.85 GB. Now the
// second waits briefly and is refused with code busy, both against the
// node's total and against one session's own budget, and is served once
// the first has ended.
func TestDecompressionBudget(t *testing.T) {
	comment := " --" + strings.Repeat("x", 32<<20)
	for _, c := range []struct {
		name        string
		mod         func(*node.Config)
		sameSession bool
		// total is the node-wide budget.
		total int64
	}{
		{"node-wide", func(c *node.Config) { c.MaxDecompressedBytes = 48 << 20 }, false, 48 << 20},
		{"per session", func(c *node.Config) { c.MaxSessionDecompressedBytes = 48 << 20 }, true, 64 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr, srv := startServer(t, func(cfg *node.Config) {
				cfg.MaxMessageBytes = 64 << 20
				cfg.BudgetWait = 200 * time.Millisecond
				c.mod(cfg)
			})
			prepare := func(id, sql string) []byte {
				return compressed(t, encode(t, wire.Q1, wire.Header{Type: wire.MsgPrepareRequest, ConnectionID: id},
					&wire.PrepareRequest{SQL: sql + comment}), false)
			}
			first := openSession(t, addr)
			msg := prepare(first, "SELECT max(hash(range)) FROM range(1000000000000)")
			_, long := startRequest(t, addr, int64(len(msg)), msg)
			deadline := time.Now().Add(30 * time.Second)
			for srv.IngressStats().DecompressedBytes < 32<<20 {
				if time.Now().After(deadline) {
					t.Fatalf("the first request never decompressed: %+v", srv.IngressStats())
				}
				time.Sleep(10 * time.Millisecond)
			}
			second := first
			if !c.sameSession {
				second = openSession(t, addr)
			}
			msg = prepare(second, "SELECT 42")
			_, quick := startRequest(t, addr, int64(len(msg)), msg)
			if a := wantAnswer(t, quick, 30*time.Second, "retry"); a.code != string(outcome.Busy) {
				t.Fatalf("code %q, want %q", a.code, string(outcome.Busy))
			}
			// Ending the first session interrupts its query and gives its
			// bytes back.
			if _, _, msg := post(t, addr, encode(t, wire.Q1, wire.Header{Type: wire.MsgDisconnect, ConnectionID: first}, &wire.DisconnectMessage{})); msg == nil {
				t.Fatal("disconnect not answered")
			}
			select {
			case <-long:
			case <-time.After(30 * time.Second):
				t.Fatal("the long query was not interrupted")
			}
			if c.sameSession {
				second = openSession(t, addr)
			}
			if _, h, msg := post(t, addr, prepare(second, "SELECT 42")); h.Type != wire.MsgPrepareResponse {
				t.Fatalf("the second request, sent again, answered %+v", msg)
			}
			if st := srv.IngressStats(); st.DecompressedPeak > c.total || st.DecompressedBytes != 0 {
				t.Fatalf("decompressed bytes peaked at %d (budget %d), %d still counted", st.DecompressedPeak, c.total, st.DecompressedBytes)
			}
		})
	}
}

// TestStalledHeadersLeaveTheBodyBudget stalls 40 compressed requests
// whose header lies in a first zstd block of 128 KiB, each after 100 KiB
// of it. The server must read that block to learn who sends the request,
// but what it reads there comes from a budget of its own: a session's
// request of half the node's budget of bodies is served meanwhile. Had
// those bytes come from the budget of bodies, 40 stalled senders without a
// session would have had it refused.
func TestStalledHeadersLeaveTheBodyBudget(t *testing.T) {
	addr, srv := startServer(t, func(c *node.Config) {
		c.MaxMessageBytes = 1 << 20
		c.MaxBodyBytesInFlight = 1 << 20
		c.BudgetWait = 200 * time.Millisecond
		c.BodyTimeout = 10 * time.Minute
	})
	noise := make([]byte, 200<<10)
	rand.Read(noise)
	msg := append(wire.AppendHeader(nil, wire.Header{Type: wire.MsgPrepareRequest, ConnectionID: "0123456789ABCDEF0123456789ABCDEF"}), noise...)
	frame := compressed(t, msg, false)
	// Each attempt to decode a header takes the node's whole decompression
	// budget while it runs, so the 40 take turns; one that waited past
	// BudgetWait (a slow machine, the race detector) is told the server is
	// busy and sent again, as the answer asks.
	answers := make([]<-chan answer, 40)
	for i := range answers {
		_, answers[i] = startRequest(t, addr, int64(len(frame)), frame[:100<<10])
	}
	deadline := time.Now().Add(2 * time.Minute)
	for srv.IngressStats().BodyBytes < 40*4096 {
		for i, ch := range answers {
			select {
			case a := <-ch:
				if a.code != string(outcome.Busy) {
					t.Fatalf("a stalled request was answered %q: %+v, %v", a.code, a.msg, a.err)
				}
				_, answers[i] = startRequest(t, addr, int64(len(frame)), frame[:100<<10])
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stalled requests never arrived: %+v", srv.IngressStats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	id := openSession(t, addr)
	big := encode(t, wire.Q1, wire.Header{Type: wire.MsgPrepareRequest, ConnectionID: id},
		&wire.PrepareRequest{SQL: "SELECT 42 --" + strings.Repeat("x", 512<<10)})
	if _, h, msg := post(t, addr, big); h.Type != wire.MsgPrepareResponse {
		t.Fatalf("a session's request beside stalled headers answered %+v", msg)
	}
	if st := srv.IngressStats(); st.BodyPeak > 1<<20 {
		t.Fatalf("bodies in flight peaked at %d, over the budget", st.BodyPeak)
	}
}
