// Command duckraftd is the duckraft node daemon: a DuckDB database served
// over Quack, DuckDB's own client/server protocol.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/peterbourgon/ff/v3"

	"github.com/duckraft/duckraft/cluster"
	"github.com/duckraft/duckraft/clusterkey"
	"github.com/duckraft/duckraft/cmd/duckraftd/daemon"
	"github.com/duckraft/duckraft/internal/buildinfo"
	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/routing"
)

func main() {
	err := run(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
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
	logFormat     string
	debugAddr     string
	version       bool
}

// envPrefix prefixes the environment variable of every flag: --cluster-key
// is DUCKRAFT_CLUSTER_KEY.
const envPrefix = "DUCKRAFT"

// parseFlags reads the configuration from args, the DUCKRAFT_*
// environment variables and the --config file, in that order of
// precedence, over the defaults (docs/configuration.md). Every setting is a
// flag, so the three sources cannot drift apart. usage receives --help's
// text.
func parseFlags(args []string, usage io.Writer) (*config, error) {
	host, _ := os.Hostname()
	c := &config{}
	fs := flag.NewFlagSet("duckraftd", flag.ContinueOnError)
	// Errors are returned, not printed with the whole usage after them;
	// only --help prints it.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var configFile string
	fs.StringVar(&configFile, "config", "", "configuration `file`: one \"key value\" per line, keys are flag names without dashes, # starts a comment")
	fs.StringVar(&c.ID, "id", host, "node id, unique in the cluster")
	fs.StringVar(&c.DataDir, "data", "./duckraft-data", "data directory")
	fs.StringVar(&c.QuackAddr, "quack", "127.0.0.1:9494", "Quack listen address (host:port)")
	fs.StringVar(&c.RaftAddr, "raft", "127.0.0.1:9495", "Raft listen address (host:port)")
	fs.StringVar(&c.RaftAdvertise, "raft-advertise", "", "Raft address other nodes dial, if not --raft (tests route Raft through fault-injecting proxies)")
	fs.StringVar(&c.QuackAdvertise, "quack-advertise", "", "Quack address other nodes and routers dial, if not --quack (tests cap each node's bandwidth with a proxy)")
	fs.StringVar(&c.HTTPAddr, "http", "127.0.0.1:9497", `operations address (host:port): /livez and /readyz for load balancers, /metrics (Prometheus), /status and the status page, the last two needing the token; "" or "off" disables it`)
	fs.StringVar(&c.GossipAddr, "gossip", "127.0.0.1:9496", "gossip listen address (host:port)")
	fs.StringVar(&c.Join, "join", "", "gossip address of a live member to join")
	fs.BoolVar(&c.Replica, "replica", false, "run as a non-voting read replica")
	fs.BoolVar(&c.Router, "router", false, "run as a data-less router: join gossip through --join, send writes to the leader and reads to replicas")
	fs.StringVar(&c.consistency, "consistency", "session", "default read consistency of new sessions: strong, session, bounded or any")
	fs.Uint64Var(&c.MaxStaleness, "max-staleness", 1000, "log entries a bounded read may lag behind")
	fs.DurationVar(&c.StatementTimeout, "statement-timeout", 0, "longest a read may run before it is interrupted, for sessions that do not SET duckraft_statement_timeout themselves (0: no limit)")
	fs.IntVar(&c.Voters, "voters", 3, "number of voting members the cluster keeps")
	fs.DurationVar(&c.ReapAfter, "reap-after", 30*time.Second, "how long a dead voter stays in Raft before it is removed")
	fs.DurationVar(&c.CatchUpFor, "catch-up-for", 3*time.Second, "how long a non-voter must stay caught up with the leader before it is promoted to voter")
	fs.StringVar(&c.clusterKey, "cluster-key", "", "the members' credential, 32/48/64 hex digits: gossip, Raft TLS and node-to-node requests are keyed by it. Default: read from --cluster-key-file, else from <data>/cluster.key, which a node bootstrapping a new cluster generates (mode 0600); a node that joins must be given it")
	fs.StringVar(&c.ClusterKeyFile, "cluster-key-file", "", "file holding the cluster key in hex, e.g. a copy of the bootstrap node's <data>/cluster.key; excludes --cluster-key")
	fs.StringVar(&c.RaftTLSCert, "raft-tls-cert", "", "Raft transport certificate file (PEM), instead of one issued from the cluster key; with --raft-tls-key and --raft-tls-ca")
	fs.StringVar(&c.RaftTLSKey, "raft-tls-key", "", "Raft transport key file (PEM)")
	fs.StringVar(&c.RaftTLSCA, "raft-tls-ca", "", "CA certificates (PEM) that sign every member's Raft certificate, and members' only")
	fs.Uint64Var(&c.SnapshotThreshold, "snapshot-threshold", 0, "log entries between snapshots (0: 8192)")
	fs.Uint64Var(&c.TrailingLogs, "trailing-logs", 0, "log entries kept after a snapshot (0: 4096)")
	fs.DurationVar(&c.SnapshotInterval, "snapshot-interval", 0, "how often the snapshot threshold is checked (0: 2m)")
	fs.StringVar(&c.RaftLogStore, "raft-log-store", replication.LogStoreBoltDB, "library keeping the Raft log: boltdb (raft-boltdb, raft/raft.db) or wal (hashicorp/raft-wal, raft/wal/); a data directory keeps the one it was created with")
	fs.DurationVar(&c.GroupCommitWait, "group-commit-wait", 5*time.Millisecond, "longest the leader holds concurrent writes to share one log entry (0: never)")
	fs.IntVar(&c.StageBytes, "stage-bytes", routing.DefaultStageBytes, "size of a transaction's appends past which they are replicated ahead of COMMIT, in log entries of about this size (negative: never)")
	fs.DurationVar(&c.StageTimeout, "stage-timeout", daemon.DefaultStageTimeout, "how long rows staged by an unfinished transaction may sit idle before the leader drops them (negative: never)")
	fs.StringVar(&c.gossipProfile, "gossip-profile", "lan", "gossip timing: lan, or loopback for fast failure detection in tests")
	fs.StringVar(&c.Token, "token", "", "admin token; generated and kept in the data directory when empty and no --tokens file is given")
	fs.StringVar(&c.TokensFile, "tokens", "", "file of client tokens with roles, one 'ROLE TOKEN' per line, roles read, write and admin; re-read on SIGHUP")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "TLS certificate file (serve HTTPS)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "TLS key file")
	fs.StringVar(&c.Authorizer, "authorizer", "", "name of a SQL macro fn(session_id, sql) that authorizes each statement")
	fs.BoolVar(&c.AllowExternalAccess, "allow-external-access", false, "let clients read and write server files, ATTACH and INSTALL (never the node's own: data directory, tokens, keys, --config, backups)")
	fs.Int64Var(&c.MaxMessageBytes, "max-message-bytes", node.DefaultMaxMessageBytes, "largest request body accepted")
	fs.Int64Var(&c.MaxBodyBytesInFlight, "max-body-bytes-in-flight", node.DefaultMaxBodyBytesInFlight, "most bytes of request bodies held at once; a body past it waits 5s, then is refused unread (never less than --max-message-bytes)")
	fs.Int64Var(&c.MaxDecompressedBytes, "max-decompressed-bytes", 0, "most bytes decompressed from compressed requests held at once (0: --max-message-bytes)")
	fs.Int64Var(&c.MaxSessionDecompressedBytes, "max-session-decompressed-bytes", 0, "most bytes decompressed from one session's compressed requests held at once (0: --max-message-bytes)")
	fs.IntVar(&c.MaxConns, "max-conns", 0, "most TCP connections held open on the Quack port; members' addresses are exempt (0: half the process's file descriptor limit, at most 65536)")
	fs.IntVar(&c.MaxConnsPerClient, "max-conns-per-client", node.DefaultMaxConnsPerClient, "most TCP connections held open on the Quack port from one address; members' addresses are exempt")
	fs.IntVar(&c.MaxSessions, "max-sessions", node.DefaultMaxSessions, "most concurrent Quack sessions of clients; the cluster's members' are not counted")
	fs.IntVar(&c.MaxSessionsPerClient, "max-sessions-per-client", 0, "most concurrent Quack sessions from one client address; the cluster's members' are not counted (0: a quarter of --max-sessions)")
	fs.IntVar(&c.MaxRunningStatements, "max-running-statements", 0, "most client statements (reads routed here by other nodes included) running in DuckDB at once; others wait their turn, which goes to the waiting client holding the fewest (0: twice the processors, at least 4)")
	fs.IntVar(&c.MaxRunningStatementsPerClient, "max-running-statements-per-client", 0, "most statements of one client (a token from one address; a routed read counts for its client) running in DuckDB at once, so that one client cannot take every turn (0: half of --max-running-statements, at least 1)")
	fs.DurationVar(&c.AdmissionWait, "admission-wait", node.DefaultAdmissionWait, "longest a client statement waits for its turn to run (--max-running-statements) before it is refused with code busy")
	fs.StringVar(&c.StatementMemoryLimit, "statement-memory-limit", "", "memory a client statement's sorts, hash tables and joins may hold before they spill to disk, e.g. 256MB (DuckDB's operator_memory_limit per session; empty: half of --memory-limit over --max-running-statements; none: no limit)")
	fs.DurationVar(&c.MaxLease, "max-lease", node.DefaultMaxLease, "longest heartbeat lease granted to a client; an idle session ends after it")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", node.DefaultReadHeaderTimeout, "longest a request's headers may take to arrive")
	fs.DurationVar(&c.BodyTimeout, "body-timeout", node.DefaultBodyTimeout, "longest a request's body may take to arrive, plus one second per --min-body-rate bytes received")
	fs.Int64Var(&c.MinBodyRate, "min-body-rate", node.DefaultMinBodyRate, "bytes per second that extend a request body's deadline by one second")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", time.Minute, "longest the leader runs a write that reads rows (INSERT … SELECT, UPDATE, CREATE TABLE … AS, …) to prove it before it enters the log; a longer one is refused and applies nowhere (negative: no bound)")
	fs.IntVar(&c.Threads, "threads", 0, "DuckDB worker threads (0: DuckDB's default)")
	fs.StringVar(&c.MemoryLimit, "memory-limit", "", "DuckDB memory limit, e.g. 4GB (empty: DuckDB's default)")
	fs.StringVar(&c.DuckDBFsync, "duckdb-fsync", "STANDARD", "fsync_mode of the replicated database: STANDARD, NONE or FULL (the Raft log is fsynced whatever this says)")
	fs.StringVar(&c.Restore, "restore", "", "seed a new cluster from this backup file (duckraft backup), or from an object s3://bucket/key and its .hash (credentials from AWS_* variables): only on an empty --data, on the first node, without --join")
	fs.StringVar(&c.BackupDir, "backup-dir", "", "write scheduled backups into this directory (from whichever node leads at each tick)")
	fs.StringVar(&c.BackupTo, "backup-to", "", "write scheduled backups as objects under s3://bucket/prefix instead of --backup-dir (credentials and endpoint from AWS_* variables; docs/backup.md)")
	fs.DurationVar(&c.BackupEvery, "backup-every", daemon.DefaultBackupEvery, "interval of scheduled backups (with --backup-dir or --backup-to)")
	fs.IntVar(&c.BackupKeep, "backup-keep", daemon.DefaultBackupKeep, "scheduled backups kept in --backup-dir or under --backup-to; older ones are deleted")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log lines as text (key=value) or json (one object per line)")
	fs.BoolVar(&c.version, "version", false, "print duckraftd's version and the DuckDB version it embeds, and exit")
	fs.StringVar(&c.debugAddr, "debug-addr", "", "serve Go's pprof profiler on this address (host:port; requests need Authorization: Bearer <admin token>)")
	err := ff.Parse(fs, args,
		ff.WithEnvVarPrefix(envPrefix),
		ff.WithConfigFileFlag("config"),
		ff.WithConfigFileParser(configParser(fs, &configFile)))
	if errors.Is(err, flag.ErrHelp) {
		printUsage(fs, usage)
	}
	if pe, ok := errors.AsType[*iofs.PathError](err); ok && pe.Path == configFile {
		err = fmt.Errorf("--config: %w", err)
	}
	if err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.ConfigFile = configFile
	if c.HTTPAddr == "off" {
		c.HTTPAddr = ""
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
	if c.clusterKey != "" && c.ClusterKeyFile != "" {
		return nil, errors.New("--cluster-key and --cluster-key-file exclude each other")
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
	if c.BackupEvery <= 0 || c.BackupKeep < 1 {
		return nil, errors.New("--backup-every must be positive and --backup-keep at least 1")
	}
	if c.RaftLogStore != replication.LogStoreBoltDB && c.RaftLogStore != replication.LogStoreWAL {
		return nil, fmt.Errorf("--raft-log-store: %q is neither %s nor %s", c.RaftLogStore, replication.LogStoreBoltDB, replication.LogStoreWAL)
	}
	switch c.gossipProfile {
	case "lan":
	case "loopback":
		c.GossipTiming = cluster.LoopbackTiming()
	default:
		return nil, fmt.Errorf("--gossip-profile: %q is neither lan nor loopback", c.gossipProfile)
	}
	return c, nil
}

// configParser reads a --config file in ff's plain format, one "key value"
// per line, and names the file, the key and the value in its errors.
func configParser(fs *flag.FlagSet, path *string) ff.ConfigFileParser {
	return func(r io.Reader, set func(name, value string) error) error {
		return ff.PlainParser(r, func(name, value string) error {
			if fs.Lookup(name) == nil {
				return fmt.Errorf("--config %s: unknown key %q (keys are the flag names of duckraftd --help)", *path, name)
			}
			if err := set(name, value); err != nil {
				return fmt.Errorf("--config %s: bad value %q for %s: %w", *path, value, name, errors.Unwrap(err))
			}
			return nil
		})
	}
}

// printUsage writes --help: every flag with its environment variable and
// its default, the empty ones too, so the text is the whole configuration.
func printUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "usage: duckraftd [flags]\n\nEvery flag can also be set by the environment variable shown, or as a key in\nthe --config file; a flag beats its variable, which beats the file.\n\n")
	fs.VisitAll(func(f *flag.Flag) {
		kind, help := flag.UnquoteUsage(f)
		if kind != "" {
			kind = " " + kind
		}
		fmt.Fprintf(w, "  --%s%s\n    \t%s\n    \t(env %s, default %q)\n", f.Name, kind, help, envVar(f.Name), f.DefValue)
	})
}

// envVar is the environment variable that sets flag name.
func envVar(name string) string {
	return envPrefix + "_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
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

// newLogger is the one logger of the daemon, handed down to every
// component: level and format are --log-level and --log-format.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is neither text nor json", format)
}

func run(args []string) error {
	c, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	if c.version {
		fmt.Println(versionLine())
		return nil
	}
	log, err := newLogger(os.Stderr, c.logLevel, c.logFormat)
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
	// The banner names where the token is, never the token: stdout goes
	// to the journal under the shipped unit, and to whoever reads logs.
	addr := d.QuackAddr()
	var token string
	switch {
	case d.Token() == "":
		token = "<a token of " + c.TokensFile + ">"
		fmt.Printf("duckraftd %s: Quack on quack:%s  tokens from %s\n", c.ID, addr, c.TokensFile)
	case c.Token == "":
		path := filepath.Join(c.DataDir, "token")
		token = `"$(cat ` + path + `)"`
		fmt.Printf("duckraftd %s: Quack on quack:%s  admin token in %s (mode 0600)\n", c.ID, addr, path)
	default:
		token = "<the admin token>"
		fmt.Printf("duckraftd %s: Quack on quack:%s  admin token as given (--token or DUCKRAFT_TOKEN)\n", c.ID, addr)
	}
	fmt.Printf("  connect: duckraft --server quack:%s --token %s\n", addr, token)
	fmt.Printf("  DuckDB:  CREATE SECRET (TYPE quack, TOKEN '<token>'); ATTACH 'quack:%s' AS remote;\n", addr)
	if kf := d.KeyFile(); kf != "" {
		// The path, never the key.
		fmt.Printf("  members: join with --join %s --cluster-key-file <a copy of %s>\n", c.GossipAddr, kf)
	}
	if h := d.HTTPAddr(); h != "" {
		scheme := "http"
		if c.TLSCert != "" {
			scheme = "https"
		}
		fmt.Printf("  status:  %s://%s/  metrics: %s://%s/metrics (Authorization: Bearer <token>)\n", scheme, h, scheme, h)
	}

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
			if errors.Is(d.Err(), daemon.ErrRemoved) {
				// A clean exit: a service manager that restarts failed
				// nodes must not start this one again to rejoin.
				log.Info("stopped: removed from the cluster")
				return nil
			}
			if errors.Is(d.Err(), daemon.ErrApplierHalted) {
				return restartSelf(log, d.Err())
			}
			return d.Err()
		}
	}
}

// restartEnv counts the restarts restartSelf made in a row, so that their
// backoff grows; it is not a DUCKRAFT_ variable, which would be a flag.
const restartEnv = "DUCKRAFTD_APPLIER_RESTARTS"

// restartSelf replaces the process with a new run of the same command
// after the applier halted: the new process reopens DuckDB and replays the
// log from the last entry applied, which is how a node recovers from an
// error DuckDB invalidates its database for. Restarts in a row wait
// longer each time (1 s doubling to 1 min); a run that lasted 10 minutes
// starts the count again.
func restartSelf(log *slog.Logger, cause error) error {
	n, _ := strconv.Atoi(os.Getenv(restartEnv))
	if time.Since(started) > 10*time.Minute {
		n = 0
	}
	wait := min(time.Minute, time.Second<<min(n, 6))
	log.Warn("restarting to recover the applier", "cause", cause, "restarts_in_a_row", n, "wait", wait)
	time.Sleep(wait)
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%w; restart: %w", cause, err)
	}
	env := append(os.Environ(), restartEnv+"="+strconv.Itoa(n+1))
	if err := syscall.Exec(exe, os.Args, env); err != nil {
		return fmt.Errorf("%w; restart: %w", cause, err)
	}
	return nil
}

// started is when this process started.
var started = time.Now()

// shutdownTimeout bounds a graceful stop.
const shutdownTimeout = 10 * time.Second

// versionLine is what --version prints: this build, the DuckDB it embeds
// and the Go that built it.
func versionLine() string {
	return fmt.Sprintf("duckraftd %s (DuckDB %s, Go %s)", buildinfo.Version(), engine.LibraryVersion(), buildinfo.GoVersion())
}
