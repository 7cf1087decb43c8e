package routing

import (
	"errors"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/outcome"
)

// TestUnservedReadSaysWhy: a read that every node refuses fails, once the
// router gives up, with the last node's refusal and its code, so a client
// refused busy (or behind) everywhere can tell from a bare failure. Before,
// it failed with "no node can serve a session read" alone, with no code:
// issue 31's flood made heavy reads fail so once every node was busy.
func TestUnservedReadSaysWhy(t *testing.T) {
	net := newInmemNet(t, "n1", "n2")
	router := net.router(t)
	s := router.session(t)
	for _, id := range []string{"n1", "n2"} {
		net.node(id).held.Store(true)
	}
	mustRun(t, router, s, "INSERT INTO t VALUES (1)")
	_, err := run(t, router, s, "SELECT count(*) FROM t")
	if err == nil || !strings.Contains(err.Error(), "no node can serve") || !errors.Is(err, outcome.ErrBehind) {
		t.Fatalf("a session read every node is behind for: %v; want it unserved, with the refusal behind", err)
	}
}
