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

// TestConcurrentRequestFindsTheSessionAdoptedHere: a session's requests
// arrive at once (a Q1 client's parallel FETCHes), and each that found the
// session held nowhere here asks Locate. Once one of them adopted the
// session, the node keeps no copy of it, and the other nodes' copies name
// this node as its holder: Locate must send the others to the session
// held here, not answer them as if it had ended ("Invalid connection
// id"), which cut the client's result short with the wrong code.
func TestConcurrentRequestFindsTheSessionAdoptedHere(t *testing.T) {
	n := newInmemSessionNet(t, "n1", "n2", "n3")
	n1 := n.node("n1")
	ctx := context.Background()

	conn, err := n1.db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s := node.NewSession(n1.ids.New(wire.Q1, tokens.Admin), conn, tokens.Admin)
	n1.exec.SessionOpened(s)
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range []string{"n2", "n3"} {
		for {
			if _, ok := n.node(id).exec.mig.copyOf(s.ID()); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never got the state of n1's session", id)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// n1 dies; the node the session's id hashes to adopts it for the
	// first request.
	n1.down.Store(true)
	var adopter *inmemNode
	var loc node.Locus
	for _, id := range []string{"n2", "n3"} {
		nd := n.node(id)
		c, err := nd.ids.Parse(s.ID())
		if err != nil {
			t.Fatal(err)
		}
		l, err := nd.exec.Locate(ctx, c, 1, "n1")
		if err != nil {
			t.Fatalf("first request at %s: %v", id, err)
		}
		if l.Adopt {
			adopter, loc = nd, l
		}
	}
	if adopter == nil {
		t.Fatal("no node adopts the session of the dead n1")
	}
	aconn, err := adopter.db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer aconn.Close()
	adopted := node.NewSession(s.ID(), aconn, tokens.Admin)
	if err := adopter.exec.Adopt(ctx, adopted, loc.State); err != nil {
		t.Fatal(err)
	}

	// A request that looked for the session before the adoption asks
	// where it is now.
	c, err := adopter.ids.Parse(s.ID())
	if err != nil {
		t.Fatal(err)
	}
	here := func(what string) {
		t.Helper()
		for _, unreachable := range []string{"", "n1"} {
			l, err := adopter.exec.Locate(ctx, c, 1, unreachable)
			if err != nil {
				t.Fatalf("a concurrent request at %s, which adopted the session, %s: %v", adopter.id, what, err)
			}
			if !l.Here {
				t.Fatalf("a concurrent request at %s, which adopted the session, %s, goes to %+v, not to the session held there",
					adopter.id, what, l)
			}
		}
	}
	here("while the other node's copy names it")
	// The other living node has not heard of the adoption (it restarted
	// and keeps no copy, or does not answer): the request still finds the
	// session here, not lost or moving.
	for _, nd := range n.nodes {
		if nd != n1 && nd != adopter {
			nd.down.Store(true)
		}
	}
	here("while the other node does not answer")
}
