package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"

	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// TestDebugPortNeedsToken: the profiler port answers only requests that
// carry an admin token (or the node credential); a profile or trace would
// otherwise be free to anyone who can reach the port, or holds a read token.
func TestDebugPortNeedsToken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	creds := nodeapi.Credentials{Tokens: (&tokens.Set{}).Add("debug-token-123", tokens.Admin).Add("read-token-123", tokens.Read),
		Node: "node-credential"}
	if err := startDebug(addr, creds, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"no credential", "", http.StatusUnauthorized},
		{"wrong token", "Bearer other-token", http.StatusUnauthorized},
		{"token without scheme", "debug-token-123", http.StatusUnauthorized},
		{"read token", "Bearer read-token-123", http.StatusUnauthorized},
		{"token", "Bearer debug-token-123", http.StatusOK},
		{"node credential", "Bearer node-credential", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", "http://"+addr+"/debug/pprof/cmdline", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}
