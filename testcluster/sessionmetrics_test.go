package testcluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/testcluster"
)

// TestSessionMovesCounted follows the metrics of sessions served away from
// their node, on an in-process cluster: requests through a node that does
// not hold their session are counted there as forwarded and relayed; once
// the holder is killed, the session is adopted once, by one of the others;
// and when no live node holds its state any more (every node killed, one
// restarted alone), the node that answers is counted one lost session,
// however often the client sends again under its id.
func TestSessionMovesCounted(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{InProcess: true})
	c.WaitForLeader(t, 20*time.Second)
	first, owner, third := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	b := newBalancer(c)
	b.point(owner.QuackAddr)
	conn := connectThrough(t, b, wire.Q1)

	relayed := counter(t, first, "duckraft_forwarded_requests_total", "relayed")
	b.point(first.QuackAddr)
	for range 3 {
		exec(t, conn, "SELECT 42")
	}
	if got := counter(t, first, "duckraft_forwarded_requests_total", "relayed") - relayed; got < 3 {
		t.Errorf("%s relayed %v requests of %s's session, want at least the 3 statements sent through it", first.ID, got, owner.ID)
	}

	owner.Kill()
	untilServed(t, conn, "SELECT 42")
	adopted := counter(t, first, "duckraft_sessions_adopted_total", "ok") + counter(t, third, "duckraft_sessions_adopted_total", "ok")
	if adopted != 1 {
		t.Errorf("sessions adopted by %s and %s after %s died: %v, want 1", first.ID, third.ID, owner.ID, adopted)
	}

	first.Kill()
	third.Kill()
	first.Restart(t)
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := conn.Exec(ctx, "SELECT 42")
		cancel()
		if code := errorCode(err); code != string(node.CodeSessionLost) {
			t.Fatalf("request %d with no node holding the session's state: %v (code %q), want %s", i+1, err, code, node.CodeSessionLost)
		}
	}
	if got := counter(t, first, "duckraft_sessions_lost_total", ""); got != 1 {
		t.Errorf("%s counted %v lost sessions after answering one session session_lost twice, want 1", first.ID, got)
	}
}

// counter is the value of counter name on n, for the outcome label when
// one is given.
func counter(t *testing.T, n *testcluster.Node, name, outcome string) float64 {
	t.Helper()
	series := fmt.Sprintf(`%s{node=%q}`, name, n.ID)
	if outcome != "" {
		series = fmt.Sprintf(`%s{node=%q,outcome=%q}`, name, n.ID, outcome)
	}
	v, err := n.Metric(series)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// untilServed runs sql until it succeeds, through the answers of a session
// whose node just died and which is being located: session_moving and
// request_lost say to send again.
func untilServed(t *testing.T, conn *client.Conn, sql string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := conn.Exec(ctx, sql)
		cancel()
		code := errorCode(err)
		switch {
		case err == nil:
			return
		case code != string(node.CodeSessionMoving) && code != string(node.CodeRequestLost):
			t.Fatalf("%s after the session's node died: %v (code %q)", sql, err, code)
		case time.Now().After(deadline):
			t.Fatalf("%s not served within 60s: %v", sql, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
