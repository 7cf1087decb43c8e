package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
)

// longScan computes for minutes on two threads before its first row, so a
// statement that answers soon after a cancel was interrupted, not finished.
const longScan = "SELECT sum(hash(i)) FROM range(100000000000) r(i)"

// cancelBound is how long a cancelled statement and the session's next
// statement may take: generous for a loaded machine, and still far below the
// minutes longScan needs.
const cancelBound = 15 * time.Second

// rawExchange posts one message of generation g and decodes the answer.
func rawExchange(t *testing.T, addr string, g wire.Generation, h wire.Header, m wire.Message) (wire.Header, wire.Message, error) {
	t.Helper()
	url := "http://" + strings.TrimPrefix(addr, "quack:") + "/quack"
	resp, err := http.Post(url, "application/vnd.duckdb", bytes.NewReader(encode(t, g, h, m)))
	if err != nil {
		return wire.Header{}, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return wire.Header{}, nil, err
	}
	rh, msg, err := wire.DecodeMessage(data, g, wire.Limits{})
	return rh, msg, err
}

// rawSession opens a session of generation g over raw HTTP.
func rawSession(t *testing.T, addr string, g wire.Generation) string {
	t.Helper()
	req := &wire.ConnectionRequest{AuthString: testToken, ClientDuckDBVersion: "v1.5.4", ClientPlatform: "linux_amd64",
		MinVersion: uint64(g), MaxVersion: uint64(g)}
	if g == wire.Q3 {
		req.HeartbeatTimeoutSeconds = 60
	}
	h, msg, err := rawExchange(t, addr, g, wire.Header{Type: wire.MsgConnectionRequest}, req)
	if _, ok := msg.(*wire.ConnectionResponse); err != nil || !ok || h.ConnectionID == "" {
		t.Fatalf("handshake: %T %+v %v", msg, msg, err)
	}
	return h.ConnectionID
}

// TestCancelWhilePreparing sends a CANCEL_REQUEST on a connection of its
// own while the session's PREPARE is still computing its first rows, as
// DuckDB's client does (QuackClientConnection::CancelQuery): with the
// query's uuid (Q3, and the 1.5-branch clients that send one in Q1) or the
// wildcard. Before, the server interrupted only a result that had already
// answered its PREPARE: the statement computed to its end and the session's
// next statement waited behind it.
func TestCancelWhilePreparing(t *testing.T) {
	addr, _ := startServer(t, nil)
	cases := []struct {
		name     string
		gen      wire.Generation
		uuid     bool // the PREPARE names its uuid
		wildcard bool // the CANCEL names uuid 0
	}{
		{"Q1 wildcard", wire.Q1, false, true},
		{"Q1 with query uuid", wire.Q1, true, false},
		{"Q3 query uuid", wire.Q3, true, false},
		{"Q3 wildcard", wire.Q3, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := rawSession(t, addr, tc.gen)
			uuid := wire.RandomUUID()
			prep := &wire.PrepareRequest{SQL: longScan}
			if tc.uuid {
				prep.QueryUUID, prep.HasQueryUUID = uuid, true
			}
			type answer struct {
				msg wire.Message
				err error
			}
			done := make(chan answer, 1)
			go func() {
				_, msg, err := rawExchange(t, addr, tc.gen, wire.Header{Type: wire.MsgPrepareRequest, ConnectionID: id}, prep)
				done <- answer{msg, err}
			}()
			select {
			case a := <-done:
				t.Fatalf("the scan answered before it was cancelled: %T %+v %v", a.msg, a.msg, a.err)
			case <-time.After(500 * time.Millisecond):
			}
			cancel := &wire.CancelRequest{}
			if !tc.wildcard {
				cancel.UUID = uuid
			}
			start := time.Now()
			_, msg, err := rawExchange(t, addr, tc.gen, wire.Header{Type: wire.MsgCancelRequest, ConnectionID: id}, cancel)
			if _, ok := msg.(*wire.SuccessResponse); err != nil || !ok {
				t.Fatalf("cancel: %T %+v %v", msg, msg, err)
			}
			select {
			case a := <-done:
				e, ok := a.msg.(*wire.ErrorResponse)
				if a.err != nil || !ok || !strings.Contains(e.Message, "nterrupted") {
					t.Fatalf("cancelled PREPARE answered %T %+v %v, want an interrupt error", a.msg, a.msg, a.err)
				}
			case <-time.After(cancelBound):
				t.Fatalf("the cancelled scan still runs %v after the CANCEL", cancelBound)
			}
			next := &wire.PrepareRequest{SQL: "SELECT 42"}
			if tc.uuid {
				next.QueryUUID, next.HasQueryUUID = wire.RandomUUID(), true
			}
			_, msg, err = rawExchange(t, addr, tc.gen, wire.Header{Type: wire.MsgPrepareRequest, ConnectionID: id}, next)
			if _, ok := msg.(*wire.PrepareResponse); err != nil || !ok {
				t.Fatalf("next statement: %T %+v %v", msg, msg, err)
			}
			if d := time.Since(start); d > cancelBound {
				t.Fatalf("cancel and next statement took %v", d)
			}
		})
	}
}

// TestCancelNamesAnotherQuery: a CANCEL for a uuid that is not the running
// statement's leaves it running, as DuckDB's server does.
func TestCancelNamesAnotherQuery(t *testing.T) {
	addr, _ := startServer(t, nil)
	id := rawSession(t, addr, wire.Q3)
	done := make(chan wire.Message, 1)
	go func() {
		_, msg, _ := rawExchange(t, addr, wire.Q3, wire.Header{Type: wire.MsgPrepareRequest, ConnectionID: id},
			&wire.PrepareRequest{SQL: "SELECT sum(hash(i)) FROM range(300000000) r(i)", QueryUUID: wire.RandomUUID(), HasQueryUUID: true})
		done <- msg
	}()
	time.Sleep(200 * time.Millisecond)
	_, msg, err := rawExchange(t, addr, wire.Q3, wire.Header{Type: wire.MsgCancelRequest, ConnectionID: id},
		&wire.CancelRequest{UUID: wire.RandomUUID()})
	if e, ok := msg.(*wire.ErrorResponse); err != nil || !ok || !strings.Contains(e.Message, "different query") {
		t.Fatalf("cancel of another uuid: %T %+v %v", msg, msg, err)
	}
	if _, ok := (<-done).(*wire.PrepareResponse); !ok {
		t.Fatal("the statement a CANCEL did not name was interrupted")
	}
}

// TestClientContextCancels: cancelling the context of a running Query makes
// the Go client send a CANCEL_REQUEST on a request of its own; Query
// returns the context's error and the session's next statement runs at
// once, in both generations.
func TestClientContextCancels(t *testing.T) {
	addr, _ := startServer(t, nil)
	for _, g := range generations {
		t.Run(fmt.Sprintf("Q%d", g), func(t *testing.T) {
			c := connect(t, addr, g)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(500*time.Millisecond, cancel)
			start := time.Now()
			rows, err := c.Query(ctx, longScan)
			if err == nil {
				rows.Close()
				t.Fatal("the scan answered before it was cancelled")
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Query: %v, want context.Canceled", err)
			}
			answerWithin(t, c, start)
		})
	}
}

// TestRowsCancel: Rows.Cancel interrupts a result that is still streaming
// (the server's producer is mid-query) and fails the reader at once, even
// with batches fetched ahead; the session's next statement runs.
func TestRowsCancel(t *testing.T) {
	addr, _ := startServer(t, nil)
	for _, g := range generations {
		t.Run(fmt.Sprintf("Q%d", g), func(t *testing.T) {
			c := connect(t, addr, g)
			rows, err := c.Query(context.Background(), "SELECT i, hash(i) FROM range(100000000000) r(i)")
			if err != nil {
				t.Fatal(err)
			}
			if !rows.Next() {
				t.Fatalf("no first row: %v", rows.Err())
			}
			ctx, cancel := context.WithTimeout(context.Background(), cancelBound)
			defer cancel()
			if err := rows.Cancel(ctx); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
			if rows.Next() {
				t.Fatal("rows go on after Cancel")
			}
			if !errors.Is(rows.Err(), client.ErrCanceled) {
				t.Fatalf("rows.Err() = %v, want ErrCanceled", rows.Err())
			}
			answerWithin(t, c, time.Now())
		})
	}
}

// answerWithin checks that the session's next statement answers within
// cancelBound of start: the cancelled one no longer holds the session.
func answerWithin(t *testing.T, c *client.Conn, start time.Time) {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(cancelBound))
	defer cancel()
	rows, err := c.Query(ctx, "SELECT 42")
	if err != nil {
		t.Fatalf("next statement, %v after the cancel: %v", time.Since(start), err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("next statement: no row (%v)", rows.Err())
	}
	if v, _ := rows.Values(); v[0] != int32(42) {
		t.Fatalf("next statement: %v", v)
	}
}
