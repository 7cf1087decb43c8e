package nodeapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestSessionEndpoints: only the node credential pushes and looks up
// session states (a client token, which a session's credential may be,
// is refused); a state past the bounds is left out of a push and the
// others are kept; an unknown session is CodeNoSuchSession; the read
// index comes back.
func TestSessionEndpoints(t *testing.T) {
	const node = "node-credential"
	var mu sync.Mutex
	kept := map[string]SessionState{}
	mux := http.NewServeMux()
	mux.Handle(SessionsPath, SessionsHandler(node, func(p SessionPush) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range p.Sessions {
			kept[s.ID] = s
		}
	}, func(id string) (SessionState, bool) {
		mu.Lock()
		defer mu.Unlock()
		s, ok := kept[id]
		return s, ok
	}))
	mux.Handle(ReadIndexPath, ReadIndexHandler(node, func(context.Context) (uint64, error) { return 77, nil }))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()

	member := &Client{Node: node}
	stranger := &Client{Token: "a client token", Node: "a client token"}
	good := SessionState{ID: "n1.AB", Holder: "n1", Credential: "tok", Settings: []string{"SET TimeZone = 'UTC'"}}
	big := SessionState{ID: "n1.CD", Holder: "n1", Settings: []string{strings.Repeat("x", MaxSettingsBytes+1)}}
	if err := stranger.PushSessions(ctx, addr, SessionPush{From: "n1", Sessions: []SessionState{good}}); CodeOf(err) != CodeUnauthorized {
		t.Fatalf("push without the node credential: %v", err)
	}
	if _, _, err := stranger.LookupSession(ctx, addr, good.ID); CodeOf(err) != CodeUnauthorized {
		t.Fatalf("lookup without the node credential: %v", err)
	}
	if _, err := stranger.ReadIndex(ctx, addr); CodeOf(err) != CodeUnauthorized {
		t.Fatalf("read index without the node credential: %v", err)
	}
	if err := member.PushSessions(ctx, addr, SessionPush{From: "n1", Sessions: []SessionState{good, big}}); err != nil {
		t.Fatal(err)
	}
	got, ok, err := member.LookupSession(ctx, addr, good.ID)
	if err != nil || !ok || got.Credential != "tok" || len(got.Settings) != 1 {
		t.Fatalf("lookup of a pushed session: %+v %v %v", got, ok, err)
	}
	if _, ok, err := member.LookupSession(ctx, addr, big.ID); ok || err != nil {
		t.Fatalf("a state past the bounds was kept: %v %v", ok, err)
	}
	if idx, err := member.ReadIndex(ctx, addr); err != nil || idx != 77 {
		t.Fatalf("read index: %d %v", idx, err)
	}
}

// TestSessionStateOrder: a later adoption wins over any change before
// it, a later change over an earlier one, and two adoptions at once are
// ordered alike everywhere.
func TestSessionStateOrder(t *testing.T) {
	for _, tc := range []struct {
		a, b SessionState
	}{
		{SessionState{Moves: 1, Seq: 0, Holder: "n2"}, SessionState{Moves: 0, Seq: 99, Holder: "n1"}},
		{SessionState{Moves: 0, Seq: 5, Holder: "n1"}, SessionState{Moves: 0, Seq: 4, Holder: "n1"}},
		{SessionState{Moves: 2, Seq: 1, Holder: "n3"}, SessionState{Moves: 2, Seq: 1, Holder: "n2"}},
	} {
		if !tc.a.Newer(tc.b) || tc.b.Newer(tc.a) {
			t.Errorf("%+v should be newer than %+v", tc.a, tc.b)
		}
	}
	if s := (SessionState{Moves: 1, Seq: 1, Holder: "n1"}); s.Newer(s) {
		t.Error("a state is newer than itself")
	}
}
