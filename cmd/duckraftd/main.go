// Command duckraftd is the duckraft node daemon: a DuckDB database served
// over Quack, DuckDB's own client/server protocol.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/routing"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "duckraftd:", err)
		os.Exit(1)
	}
}

// config is the daemon's command line.
type config struct {
	id, data              string
	quackAddr, raftAddr   string
	raftAdvertise         string
	gossipAddr, join      string
	token                 string
	tlsCert, tlsKey       string
	authorizer            string
	allowExternalAccess   bool
	replica               bool
	maxMessageBytes       int64
	threads               int
	memoryLimit, logLevel string
	voters                int
	reapAfter             time.Duration
	clusterKey            string
	gossipProfile         string
	snapshotThreshold     uint64
	trailingLogs          uint64
	snapshotInterval      time.Duration
	consistency           string
	maxStaleness          uint64
	router                bool
	debugAddr             string
}

func parseFlags(args []string) (*config, error) {
	host, _ := os.Hostname()
	c := &config{}
	fs := flag.NewFlagSet("duckraftd", flag.ContinueOnError)
	fs.StringVar(&c.id, "id", host, "node id, unique in the cluster")
	fs.StringVar(&c.data, "data", "./duckraft-data", "data directory")
	fs.StringVar(&c.quackAddr, "quack", "127.0.0.1:9494", "Quack listen address (host:port)")
	fs.StringVar(&c.raftAddr, "raft", "127.0.0.1:9495", "Raft listen address (host:port)")
	fs.StringVar(&c.raftAdvertise, "raft-advertise", "", "Raft address other nodes dial, if not --raft (tests route Raft through fault-injecting proxies)")
	fs.StringVar(&c.gossipAddr, "gossip", "127.0.0.1:9496", "gossip listen address (host:port)")
	fs.StringVar(&c.join, "join", "", "gossip address of a live member to join")
	fs.BoolVar(&c.replica, "replica", false, "run as a non-voting read replica")
	fs.BoolVar(&c.router, "router", false, "run as a data-less router: join gossip through --join, send writes to the leader and reads to replicas")
	fs.StringVar(&c.consistency, "consistency", "session", "default read consistency of new sessions: strong, session, bounded or any")
	fs.Uint64Var(&c.maxStaleness, "max-staleness", 1000, "log entries a bounded read may lag behind")
	fs.IntVar(&c.voters, "voters", 3, "number of voting members the cluster keeps")
	fs.DurationVar(&c.reapAfter, "reap-after", 30*time.Second, "how long a dead voter stays in Raft before it is removed")
	fs.StringVar(&c.clusterKey, "cluster-key", "", "gossip encryption key, 32/48/64 hex digits (default: derived from the token)")
	fs.Uint64Var(&c.snapshotThreshold, "snapshot-threshold", 0, "log entries between snapshots (0: 8192)")
	fs.Uint64Var(&c.trailingLogs, "trailing-logs", 0, "log entries kept after a snapshot (0: 4096)")
	fs.DurationVar(&c.snapshotInterval, "snapshot-interval", 0, "how often the snapshot threshold is checked (0: 2m)")
	fs.StringVar(&c.gossipProfile, "gossip-profile", "lan", "gossip timing: lan, or loopback for fast failure detection in tests")
	fs.StringVar(&c.token, "token", os.Getenv("DUCKRAFT_TOKEN"), "authentication token (env DUCKRAFT_TOKEN); generated and kept in the data directory when empty")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "TLS certificate file (serve HTTPS)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "TLS key file")
	fs.StringVar(&c.authorizer, "authorizer", "", "name of a SQL macro fn(session_id, sql) that authorizes each statement")
	fs.BoolVar(&c.allowExternalAccess, "allow-external-access", false, "let clients read and write server files, ATTACH and INSTALL")
	fs.Int64Var(&c.maxMessageBytes, "max-message-bytes", node.DefaultMaxMessageBytes, "largest request body accepted")
	fs.IntVar(&c.threads, "threads", 0, "DuckDB worker threads (0: DuckDB's default)")
	fs.StringVar(&c.memoryLimit, "memory-limit", "", "DuckDB memory limit, e.g. 4GB (empty: DuckDB's default)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.debugAddr, "debug-addr", "", "serve Go's pprof profiler on this address (host:port, unauthenticated: keep it on loopback)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if _, err := routing.ParseLevel(c.consistency); err != nil {
		return nil, fmt.Errorf("--consistency: %w", err)
	}
	if c.router && (c.join == "" || c.replica) {
		return nil, errors.New("--router needs --join and excludes --replica")
	}
	return c, nil
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// loadToken returns the configured token, or the one kept in the data
// directory, creating it on first start so restarts keep it.
func loadToken(c *config) (string, error) {
	if c.token != "" {
		if len(c.token) < 4 {
			return "", errors.New("--token must be at least 4 characters long")
		}
		return c.token, nil
	}
	path := filepath.Join(c.data, "token")
	if b, err := os.ReadFile(path); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read token: %w", err)
	}
	t := node.NewToken()
	if err := os.WriteFile(path, []byte(t+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	return t, nil
}

func run(args []string) error {
	c, err := parseFlags(args)
	if err != nil {
		return err
	}
	log, err := newLogger(c.logLevel)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.data, 0o755); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	token, err := loadToken(c)
	if err != nil {
		return err
	}
	if err := startDebug(c.debugAddr, log); err != nil {
		return err
	}
	level, _ := routing.ParseLevel(c.consistency)
	if c.router {
		return runRouter(c, token, level, log)
	}
	db, err := engine.Open(filepath.Join(c.data, "duckraft.db"), engine.Options{
		Threads:             c.threads,
		MemoryLimit:         c.memoryLimit,
		AllowExternalAccess: c.allowExternalAccess,
		Logger:              log,
	})
	if err != nil {
		return err
	}
	defer db.Close()

	store, err := replication.Open(replication.Config{
		ID:                c.id,
		Dir:               filepath.Join(c.data, "raft"),
		RaftAddr:          c.raftAddr,
		AdvertiseAddr:     c.raftAdvertise,
		Bootstrap:         c.join == "",
		DB:                db,
		SnapshotThreshold: c.snapshotThreshold,
		TrailingLogs:      c.trailingLogs,
		SnapshotInterval:  c.snapshotInterval,
		Logger:            log,
	})
	if err != nil {
		return err
	}
	defer store.Close()

	if c.raftAdvertise != "" {
		// Gossip tells the reconciler each node's Raft address exactly as
		// the Raft configuration holds it: the advertised one.
		c.raftAddr = c.raftAdvertise
	}

	// Gossip starts before the executor that reports the load it carries.
	var execRef atomic.Pointer[routing.Executor]
	load := func() uint64 {
		if e := execRef.Load(); e != nil {
			return e.Load()
		}
		return 0
	}
	members, err := startMembership(c, token, store, load, log)
	if err != nil {
		return err
	}
	defer members.Close()

	rc := routingConfig(c, db, members, token, level, log)
	rc.Store = store
	exec, err := routing.New(rc)
	if err != nil {
		return err
	}
	execRef.Store(exec)
	srv, err := quackServer(c, db, exec, token, c.authorizer, log)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(routing.WritePath, exec.Handler())
	mux.Handle(routing.StatusPath, routing.JSONHandler(token, func(context.Context) (any, error) {
		return status(store, members, exec), nil
	}))
	mux.Handle(routing.HashPath, routing.JSONHandler(token, func(ctx context.Context) (any, error) { return store.StateHash(ctx) }))
	mux.Handle("/", srv.Handler())
	log.Info("serving Quack", "id", c.id, "raft", c.raftAddr, "gossip", c.gossipAddr, "data", c.data, "duckdb", db.Version())
	return serve(c, token, mux, srv, log)
}

// routingConfig is what a node's and a router's routing share.
func routingConfig(c *config, db *engine.DB, dir routing.Directory, token string, level routing.Level, log *slog.Logger) routing.Config {
	return routing.Config{
		ID:           c.id,
		Directory:    dir,
		DB:           db,
		Token:        token,
		Consistency:  level,
		MaxStaleness: c.maxStaleness,
		Logger:       log,
	}
}

// quackServer is the Quack front end of a node or a router: sessions
// authenticated by the cluster token, statements run by exec, and, when
// authorizer names a SQL macro, each statement authorized by it.
func quackServer(c *config, db *engine.DB, exec node.Executor, token, authorizer string, log *slog.Logger) (*node.Server, error) {
	cfg := node.Config{
		DB:              db,
		Authenticator:   node.TokenAuth{Token: token},
		Executor:        exec,
		MaxMessageBytes: c.maxMessageBytes,
		HiddenSchemas:   []string{replication.MetaSchema},
		Logger:          log,
	}
	if authorizer != "" {
		cfg.Authorizer = node.SQLAuthorizer{DB: db, Function: authorizer}
	}
	return node.New(cfg)
}

// runRouter runs a data-less router. Its sessions still need a DuckDB
// connection each (node.Server keeps settings there), so it opens an
// in-memory database that holds no cluster data.
func runRouter(c *config, token string, level routing.Level, log *slog.Logger) error {
	db, err := engine.Open("", engine.Options{Threads: 1, MemoryLimit: c.memoryLimit, Logger: log})
	if err != nil {
		return err
	}
	defer db.Close()
	var execRef atomic.Pointer[routing.Executor]
	members, err := startRouterMembership(c, token, func() uint64 {
		if e := execRef.Load(); e != nil {
			return e.Load()
		}
		return 0
	}, log)
	if err != nil {
		return err
	}
	defer members.Close()
	exec, err := routing.NewRouter(routingConfig(c, db, members, token, level, log))
	if err != nil {
		return err
	}
	execRef.Store(exec)
	// The router's database holds no data, so it has no authorizer macro:
	// statements are authorized where they run.
	srv, err := quackServer(c, db, exec, token, "", log)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(routing.StatusPath, routing.JSONHandler(token, func(context.Context) (any, error) {
		return routerStatus(c.id, members, exec), nil
	}))
	mux.Handle("/", srv.Handler())
	log.Info("serving Quack as a router", "id", c.id, "gossip", c.gossipAddr, "join", c.join)
	return serve(c, token, mux, srv, log)
}

// serve listens on --quack and serves mux until SIGINT or SIGTERM.
// shutdownTimeout bounds a graceful stop.
const shutdownTimeout = 10 * time.Second

func serve(c *config, token string, mux *http.ServeMux, srv *node.Server, log *slog.Logger) error {
	l, err := net.Listen("tcp", c.quackAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.quackAddr, err)
	}
	if c.tlsCert != "" {
		l, err = tlsListener(l, c.tlsCert, c.tlsKey)
		if err != nil {
			return err
		}
	}
	fmt.Printf("duckraftd %s: Quack on quack:%s  token %s\n", c.id, l.Addr(), token)
	fmt.Printf("  connect: duckraft --server quack:%s --token %s\n", l.Addr(), token)
	fmt.Printf("  DuckDB:  CREATE SECRET (TYPE quack, TOKEN '%s'); ATTACH 'quack:%s' AS remote;\n", token, l.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 5 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case <-ctx.Done():
		log.Info("shutting down")
		// Shutdown waits for statements in flight and for Raft. A stop
		// must not hang on them: past the deadline the process exits, which
		// is as safe as a crash, since every acknowledged write is already
		// on disk on a quorum.
		time.AfterFunc(shutdownTimeout, func() {
			log.Error("shutdown timed out; exiting", "timeout", shutdownTimeout)
			os.Exit(1)
		})
		hs.Close()
		srv.Close()
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
