package nodeapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/tokens"
)

// TestRemoveAndLeaveCredentials: removal takes an operator's credential
// (the client token or the node credential), leaving only the node
// credential; anything else is refused before the handler runs, and the
// handler's refusals reach the client with their codes.
func TestRemoveAndLeaveCredentials(t *testing.T) {
	const token, node = "client-token", "node-credential"
	var removed []string
	var left atomic.Int32
	leaving := make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.Handle(RemovePath, RemoveHandler(Credentials{Tokens: (&tokens.Set{}).Add(token, tokens.Admin), Node: node}, func(_ context.Context, id string) (Removal, error) {
		switch id {
		case "n1":
			return Removal{}, Errorf(CodeBadRequest, "n1 is the leader")
		case "n9":
			return Removal{}, Errorf(CodeNoSuchMember, "no member %q", id)
		}
		removed = append(removed, id)
		return Removal{ID: id, LeaderID: "n1", Left: true}, nil
	}))
	mux.Handle(LeavePath, LeaveHandler(node, func() {
		left.Add(1)
		select {
		case leaving <- struct{}{}:
		default:
		}
	}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()

	cases := []struct {
		name   string
		client Client
		id     string
		code   Code
	}{
		{"client token", Client{Token: token}, "n2", ""},
		{"node credential", Client{Node: node}, "n3", ""},
		{"wrong token", Client{Token: "guess"}, "n4", CodeUnauthorized},
		{"no credential", Client{}, "n4", CodeUnauthorized},
		{"the leader", Client{Token: token}, "n1", CodeBadRequest},
		{"unknown member", Client{Token: token}, "n9", CodeNoSuchMember},
		{"no id", Client{Token: token}, "", CodeBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tc.client.Remove(ctx, addr, tc.id)
			if got := CodeOf(err); got != tc.code {
				t.Fatalf("Remove(%q) = %+v, %v; code %q, want %q", tc.id, res, err, got, tc.code)
			}
			if tc.code == "" && (res.ID != tc.id || res.LeaderID != "n1" || !res.Left) {
				t.Errorf("Remove(%q) answered %+v", tc.id, res)
			}
		})
	}
	if strings.Join(removed, ",") != "n2,n3" {
		t.Errorf("removed %v, want n2,n3", removed)
	}

	// Leaving stops a node: a client token must not be enough.
	if err := (&Client{Node: token}).Leave(ctx, addr); CodeOf(err) != CodeUnauthorized {
		t.Errorf("leave with the client token: %v", err)
	}
	if err := (&Client{Node: node}).Leave(ctx, addr); err != nil {
		t.Errorf("leave with the node credential: %v", err)
	}
	resp, err := http.Get(srv.URL + RemovePath + "?id=n2")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET without credential: %s", resp.Status)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+RemovePath+"?id=n2", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || len(removed) != 2 {
		t.Errorf("GET with the token: %s, removed %v", resp.Status, removed)
	}
	// The handler answers before it leaves, so the client may return first.
	select {
	case <-leaving:
	case <-time.After(30 * time.Second):
		t.Fatal("leave was never called")
	}
	if left.Load() != 1 {
		t.Errorf("left %d times, want 1", left.Load())
	}
}
