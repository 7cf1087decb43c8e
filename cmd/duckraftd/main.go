// Command duckraftd is the duckraft node daemon: a DuckDB database served
// over Quack, DuckDB's own client/server protocol.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/duckraft/duckraft/cluster"
	"github.com/duckraft/duckraft/clusterkey"
	"github.com/duckraft/duckraft/cmd/duckraftd/daemon"
	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/routing"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "duckraftd:", err)
		os.Exit(1)
	}
}

// config is the daemon's command line: the daemon's configuration, and the
// flags that are parsed into it or that only the command uses.
type config struct {
	daemon.Config
	consistency   string
	gossipProfile string
	clusterKey    string
	logLevel      string
	debugAddr     string
}

func parseFlags(args []string) (*config, error) {
	host, _ := os.Hostname()
	c := &config{}
	fs := flag.NewFlagSet("duckraftd", flag.ContinueOnError)
	fs.StringVar(&c.ID, "id", host, "node id, unique in the cluster")
	fs.StringVar(&c.DataDir, "data", "./duckraft-data", "data directory")
	fs.StringVar(&c.QuackAddr, "quack", "127.0.0.1:9494", "Quack listen address (host:port)")
	fs.StringVar(&c.RaftAddr, "raft", "127.0.0.1:9495", "Raft listen address (host:port)")
	fs.StringVar(&c.RaftAdvertise, "raft-advertise", "", "Raft address other nodes dial, if not --raft (tests route Raft through fault-injecting proxies)")
	fs.StringVar(&c.GossipAddr, "gossip", "127.0.0.1:9496", "gossip listen address (host:port)")
	fs.StringVar(&c.Join, "join", "", "gossip address of a live member to join")
	fs.BoolVar(&c.Replica, "replica", false, "run as a non-voting read replica")
	fs.BoolVar(&c.Router, "router", false, "run as a data-less router: join gossip through --join, send writes to the leader and reads to replicas")
	fs.StringVar(&c.consistency, "consistency", "session", "default read consistency of new sessions: strong, session, bounded or any")
	fs.Uint64Var(&c.MaxStaleness, "max-staleness", 1000, "log entries a bounded read may lag behind")
	fs.IntVar(&c.Voters, "voters", 3, "number of voting members the cluster keeps")
	fs.DurationVar(&c.ReapAfter, "reap-after", 30*time.Second, "how long a dead voter stays in Raft before it is removed")
	fs.StringVar(&c.clusterKey, "cluster-key", os.Getenv("DUCKRAFT_CLUSTER_KEY"), "the members' credential, 32/48/64 hex digits (env DUCKRAFT_CLUSTER_KEY): gossip, Raft TLS and node-to-node requests are keyed by it. Default: derived from the token, which lets every client holding the token act as a member; production clusters set their own")
	fs.StringVar(&c.RaftTLSCert, "raft-tls-cert", "", "Raft transport certificate file (PEM), instead of one issued from the cluster key; with --raft-tls-key and --raft-tls-ca")
	fs.StringVar(&c.RaftTLSKey, "raft-tls-key", "", "Raft transport key file (PEM)")
	fs.StringVar(&c.RaftTLSCA, "raft-tls-ca", "", "CA certificates (PEM) that sign every member's Raft certificate, and members' only")
	fs.Uint64Var(&c.SnapshotThreshold, "snapshot-threshold", 0, "log entries between snapshots (0: 8192)")
	fs.Uint64Var(&c.TrailingLogs, "trailing-logs", 0, "log entries kept after a snapshot (0: 4096)")
	fs.DurationVar(&c.SnapshotInterval, "snapshot-interval", 0, "how often the snapshot threshold is checked (0: 2m)")
	fs.DurationVar(&c.GroupCommitWait, "group-commit-wait", 5*time.Millisecond, "longest the leader holds concurrent writes to share one log entry (0: never)")
	fs.StringVar(&c.gossipProfile, "gossip-profile", "lan", "gossip timing: lan, or loopback for fast failure detection in tests")
	fs.StringVar(&c.Token, "token", os.Getenv("DUCKRAFT_TOKEN"), "admin token (env DUCKRAFT_TOKEN); generated and kept in the data directory when empty and no --tokens file is given")
	fs.StringVar(&c.TokensFile, "tokens", os.Getenv("DUCKRAFT_TOKENS_FILE"), "file of client tokens with roles, one 'ROLE TOKEN' per line, roles read, write and admin (env DUCKRAFT_TOKENS_FILE); re-read on SIGHUP. Without --token it needs --cluster-key")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "TLS certificate file (serve HTTPS)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "TLS key file")
	fs.StringVar(&c.Authorizer, "authorizer", "", "name of a SQL macro fn(session_id, sql) that authorizes each statement")
	fs.BoolVar(&c.AllowExternalAccess, "allow-external-access", false, "let clients read and write server files, ATTACH and INSTALL")
	fs.Int64Var(&c.MaxMessageBytes, "max-message-bytes", node.DefaultMaxMessageBytes, "largest request body accepted")
	fs.IntVar(&c.MaxSessions, "max-sessions", node.DefaultMaxSessions, "most concurrent Quack sessions")
	fs.IntVar(&c.MaxSessionsPerClient, "max-sessions-per-client", 0, "most concurrent Quack sessions from one client address; the cluster's members are exempt (0: a quarter of --max-sessions)")
	fs.DurationVar(&c.MaxLease, "max-lease", node.DefaultMaxLease, "longest heartbeat lease granted to a client; an idle session ends after it")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", node.DefaultReadHeaderTimeout, "longest a request's headers may take to arrive")
	fs.DurationVar(&c.BodyTimeout, "body-timeout", node.DefaultBodyTimeout, "longest a request's body may take to arrive, plus one second per --min-body-rate bytes received")
	fs.Int64Var(&c.MinBodyRate, "min-body-rate", node.DefaultMinBodyRate, "bytes per second that extend a request body's deadline by one second")
	fs.IntVar(&c.Threads, "threads", 0, "DuckDB worker threads (0: DuckDB's default)")
	fs.StringVar(&c.MemoryLimit, "memory-limit", "", "DuckDB memory limit, e.g. 4GB (empty: DuckDB's default)")
	fs.StringVar(&c.DuckDBFsync, "duckdb-fsync", "STANDARD", "fsync_mode of the replicated database: STANDARD, NONE or FULL (the Raft log is fsynced whatever this says)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.debugAddr, "debug-addr", "", "serve Go's pprof profiler on this address (host:port; requests need Authorization: Bearer <token>)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if c.GroupCommitWait <= 0 {
		c.GroupCommitWait = -1
	}
	level, err := routing.ParseLevel(c.consistency)
	if err != nil {
		return nil, fmt.Errorf("--consistency: %w", err)
	}
	c.Consistency = level
	if c.Router && (c.Join == "" || c.Replica) {
		return nil, errors.New("--router needs --join and excludes --replica")
	}
	if c.Token != "" && len(c.Token) < 4 {
		return nil, errors.New("--token must be at least 4 characters long")
	}
	if c.clusterKey != "" {
		k, err := clusterkey.Parse(c.clusterKey)
		if err != nil {
			return nil, fmt.Errorf("--cluster-key: %w", err)
		}
		c.ClusterKey = k
	}
	if n := countSet(c.RaftTLSCert, c.RaftTLSKey, c.RaftTLSCA); n != 0 && n != 3 {
		return nil, errors.New("--raft-tls-cert, --raft-tls-key and --raft-tls-ca go together")
	}
	if c.gossipProfile == "loopback" {
		c.GossipTiming = cluster.LoopbackTiming()
	}
	return c, nil
}

// countSet is how many of vs are not empty.
func countSet(vs ...string) int {
	n := 0
	for _, v := range vs {
		if v != "" {
			n++
		}
	}
	return n
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
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
	c.Logger = log
	d, err := daemon.Start(c.Config)
	if err != nil {
		return err
	}
	if err := startDebug(c.debugAddr, d.Credentials(), log); err != nil {
		d.Close()
		return err
	}
	addr, token := d.QuackAddr(), d.Token()
	if token == "" {
		// Only the tokens file's tokens: none is printed.
		token = "<a token of " + c.TokensFile + ">"
		fmt.Printf("duckraftd %s: Quack on quack:%s  tokens from %s\n", c.ID, addr, c.TokensFile)
	} else {
		fmt.Printf("duckraftd %s: Quack on quack:%s  token %s\n", c.ID, addr, token)
	}
	fmt.Printf("  connect: duckraft --server quack:%s --token %s\n", addr, token)
	fmt.Printf("  DuckDB:  CREATE SECRET (TYPE quack, TOKEN '%s'); ATTACH 'quack:%s' AS remote;\n", token, addr)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-hup:
			// ReloadTokens logs what it did, and keeps the tokens in
			// force when the file does not load.
			d.ReloadTokens()
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
			if err := d.Close(); err != nil {
				log.Warn("shutdown", "err", err)
			}
			return nil
		case <-d.Done():
			d.Close()
			return d.Err()
		}
	}
}

// shutdownTimeout bounds a graceful stop.
const shutdownTimeout = 10 * time.Second
