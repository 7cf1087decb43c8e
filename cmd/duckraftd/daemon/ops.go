package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/duckraft/duckraft/routing"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// Paths of the operations address (Config.HTTPAddr), docs/operations.md.
const (
	PagePath    = "/"
	LivezPath   = "/livez"
	ReadyzPath  = "/readyz"
	MetricsPath = "/metrics"
	StatusPath  = "/status"
)

// Status is what /status answers: the node API's status of this node
// (nodeapi.Status, the same fields at the top level), whether it is
// ready and why not, and the leader changes it saw most recently.
type Status struct {
	nodeapi.Status
	Ready         bool           `json:"ready"`
	NotReady      string         `json:"not_ready,omitempty"`
	Lag           uint64         `json:"lag"`
	MaxStaleness  uint64         `json:"max_staleness"`
	Consistency   string         `json:"consistency"`
	LeaderChanges []LeaderChange `json:"leader_changes"`
}

// LeaderChange is one change of the leader a node observed; Leader is
// empty while none was known.
type LeaderChange struct {
	Time   time.Time `json:"time"`
	Leader string    `json:"leader"`
}

// leaderHistory keeps the most recent leader changes.
type leaderHistory struct {
	mu      sync.Mutex
	changes []LeaderChange
}

// leaderHistoryLen bounds the leader changes a daemon remembers.
const leaderHistoryLen = 32

func (h *leaderHistory) add(leader string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.changes) == leaderHistoryLen {
		h.changes = append(h.changes[:0], h.changes[1:]...)
	}
	h.changes = append(h.changes, LeaderChange{Time: at, Leader: leader})
}

func (h *leaderHistory) list() []LeaderChange {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]LeaderChange{}, h.changes...)
}

// observeLeader is replication.Config.ObserveLeader.
func (d *Daemon) observeLeader(leader string) {
	d.metrics.leaderChanges.Inc()
	d.leaders.add(leader, time.Now())
	d.log.Info("leader changed", "leader", leader)
}

// lag is how many log entries this node is behind, in the one meaning
// status gives a member's lag: the leader's commit index, as this node
// knows it (so a stalled applier lags even when every member is stuck
// with it), or the furthest index a live data member reports applied
// through gossip when that is higher (a follower cut off from the leader
// learns no new commit index, but gossip still tells it how far the
// others got; gossip pushes indexes every half second or so, which bounds
// how fresh that part is), less this node's applied index
// (Store.AppliedThrough).
func (d *Daemon) lag() uint64 {
	applied := d.store.AppliedThrough()
	return d.members.lagReference(max(applied, d.store.CommitIndex())) - applied
}

// readiness reports whether this node can serve reads at its default
// consistency, and if not why (docs/operations.md): a leader must be
// known, and, at session and bounded consistency, a node that is not the
// leader must be within MaxStaleness log entries of the furthest index it
// knows of. A strong read runs on the leader, an any read anywhere, so for
// them a known leader is enough. A router is ready while it knows a
// leader.
func (d *Daemon) readiness() (ok bool, reason string) {
	if d.store == nil {
		if d.members.leaderID() == "" {
			return false, "no leader known"
		}
		return true, ""
	}
	if halted := d.store.Stats()["fsm_halted"]; halted != "" {
		return false, "applier halted"
	}
	if st, ok := d.store.Stalled(); ok {
		return false, fmt.Sprintf("applier stalled: entry %d failed %d times in %s", st.First, st.Attempts,
			time.Since(st.Since).Round(time.Second))
	}
	if d.store.LeaderID() == "" {
		return false, "no leader known"
	}
	if d.store.IsLeader() {
		return true, ""
	}
	switch d.consistency() {
	case routing.Session, routing.Bounded:
		if lag, bound := d.lag(), d.maxStaleness(); lag > bound {
			return false, fmt.Sprintf("%d log entries behind, more than the max staleness of %d", lag, bound)
		}
	}
	return true, ""
}

// consistency and maxStaleness are the defaults routing uses.
func (d *Daemon) consistency() routing.Level {
	if d.cfg.Consistency == "" {
		return routing.Session
	}
	return d.cfg.Consistency
}

func (d *Daemon) maxStaleness() uint64 {
	if d.cfg.MaxStaleness == 0 {
		return routing.DefaultMaxStaleness
	}
	return d.cfg.MaxStaleness
}

// opsStatus is /status: the node API's status with readiness, lag and
// the leader history.
func (d *Daemon) opsStatus() Status {
	st := Status{Status: d.statusOf(), MaxStaleness: d.maxStaleness(), Consistency: string(d.consistency()),
		LeaderChanges: d.leaders.list()}
	st.Ready, st.NotReady = d.readiness()
	if d.store != nil {
		st.Lag = d.lag()
	}
	return st
}

// opsHandler serves the operations address. /livez and /readyz answer
// anyone, since load balancers probe them without credentials, and say no
// more than ok or a short reason; /metrics and /status show the cluster's
// shape and load, so they need the client token. The status page at /
// holds no data and is served to anyone (ui.go).
func (d *Daemon) opsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+LivezPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET "+ReadyzPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		ok, reason := d.readiness()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready:", reason)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	metrics := promhttp.HandlerFor(d.metrics.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(d.log.Handler(), slog.LevelWarn)})
	mux.Handle("GET "+MetricsPath, d.requireToken(metrics))
	mux.Handle("GET "+StatusPath, d.requireToken(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(d.opsStatus())
	})))
	page := uiHandler()
	mux.Handle("GET /{$}", page)
	mux.Handle("GET /ui/", page)
	return mux
}

// requireToken admits only requests that carry a client token of any role
// (or the node credential) as a bearer token, compared in constant time.
func (d *Daemon) requireToken(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := d.Credentials().Role(r); !ok {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "authentication required: Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// serveOps listens on Config.HTTPAddr, if set, and serves the operations
// endpoints until the daemon stops; with Config.TLSCert it serves HTTPS
// with the same key pair as Quack, since /metrics and /status carry the
// token.
func (d *Daemon) serveOps() error {
	if d.cfg.HTTPAddr == "" {
		return nil
	}
	l, err := net.Listen("tcp", d.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (--http): %w", d.cfg.HTTPAddr, err)
	}
	if d.cfg.TLSCert != "" {
		if l, err = tlsListener(l, d.cfg.TLSCert, d.cfg.TLSKey); err != nil {
			return err
		}
	}
	d.opsL = l
	d.ops = &http.Server{Handler: d.opsHandler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10,
		ErrorLog: slog.NewLogLogger(d.log.Handler(), slog.LevelDebug)}
	d.opsDone = make(chan struct{})
	go func() {
		defer close(d.opsDone)
		if err := d.ops.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			d.log.Warn("operations listener stopped", "addr", d.cfg.HTTPAddr, "err", err)
		}
	}()
	d.log.Info("serving operations endpoints", "http", l.Addr().String())
	return nil
}

// HTTPAddr is the address the operations endpoints are served on; empty
// when Config.HTTPAddr is.
func (d *Daemon) HTTPAddr() string {
	if d.opsL == nil {
		return ""
	}
	return d.opsL.Addr().String()
}
