package routing

import (
	"context"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/node/wire"
)

// TestStaleSuspicionAdoptsNoLiveSession: a node that could not reach
// another (it was down) suspects it for a while; once that node is back
// and says so (its pushes), a session it holds is forwarded to it, not
// adopted away from it, which would give the session two holders (the
// second answering transaction_lost for a transaction the first still
// has open).
func TestStaleSuspicionAdoptsNoLiveSession(t *testing.T) {
	n := newInmemSessionNet(t, "n1", "n2", "n3")
	n1, n3 := n.node("n1"), n.node("n3")
	ctx := context.Background()

	// n1 is down, and a forward from n3 to it fails.
	n1.down.Store(true)
	gone, err := n3.ids.Parse(n1.ids.New(wire.Q3, tokens.Admin))
	if err != nil {
		t.Fatal(err)
	}
	n3.exec.Locate(ctx, gone, 0, "n1")

	// n1 is back, and opens a session, which it tells the others of.
	n1.down.Store(false)
	conn, err := n1.db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	s := node.NewSession(n1.ids.New(wire.Q3, tokens.Admin), conn, tokens.Admin)
	defer conn.Close()
	n1.exec.SessionOpened(s)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, ok := n3.exec.mig.copyOf(s.ID()); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("n3 never got the state of n1's session")
		}
		time.Sleep(10 * time.Millisecond)
	}

	c, err := n3.ids.Parse(s.ID())
	if err != nil {
		t.Fatal(err)
	}
	loc, err := n3.exec.Locate(ctx, c, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if loc.Adopt || loc.Node != "n1" {
		t.Fatalf("a request for n1's session at n3 goes to %+v, not to n1, which holds it and is up", loc)
	}
}
