package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
)

// startDebug serves Go's profiler on addr (--debug-addr), apart from the
// Quack port so that it is never exposed with it. It has no authentication:
// bind it to loopback.
func startDebug(addr string, log *slog.Logger) error {
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
		if err := http.Serve(l, mux); err != nil {
			log.Warn("debug listener stopped", "err", err)
		}
	}()
	return nil
}
