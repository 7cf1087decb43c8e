package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// startDebug serves Go's profiler on addr (--debug-addr), apart from the
// Quack port so that it is never exposed with it. Like every other port it
// answers only requests that carry a credential, as "Authorization: Bearer
// T", here an admin token or the node credential: a profile shows the
// statements being run and a trace can load the node.
func startDebug(addr string, creds nodeapi.Credentials, log *slog.Logger) error {
	if addr == "" {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--debug-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Info("serving pprof", "addr", l.Addr().String())
	go func() {
		if err := http.Serve(l, requireAdmin(creds, mux)); err != nil {
			log.Warn("debug listener stopped", "err", err)
		}
	}()
	return nil
}

// requireAdmin admits only requests whose bearer credential holds the
// admin role, checked as the node API checks its callers.
func requireAdmin(creds nodeapi.Credentials, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if role, ok := creds.Role(r); !ok || !role.Allows(tokens.Admin) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "authentication required: Authorization: Bearer <admin token>", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
