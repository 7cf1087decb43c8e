package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
)

// TestDebugPortNeedsToken: the profiler port answers only requests that
// carry the token; a profile or trace would otherwise be free to anyone who
// can reach the port.
func TestDebugPortNeedsToken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if err := startDebug(addr, "debug-token-123", slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"no credential", "", http.StatusUnauthorized},
		{"wrong token", "Bearer other-token", http.StatusUnauthorized},
		{"token without scheme", "debug-token-123", http.StatusUnauthorized},
		{"token", "Bearer debug-token-123", http.StatusOK},
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
