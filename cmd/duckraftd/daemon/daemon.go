// Package daemon runs one duckraft node or router: it wires DuckDB
// (node/engine), Raft (replication), gossip and its reconciler (cluster),
// statement routing (routing) and the Quack front end (node) together and
// serves them on one HTTP listener. cmd/duckraftd runs one Daemon per
// process; testcluster runs several in one test process, so both exercise
// the same wiring.
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/cluster"
	"github.com/duckraft/duckraft/clusterkey"
	"github.com/duckraft/duckraft/cmd/internal/s3backup"
	"github.com/duckraft/duckraft/internal/buildinfo"
	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/routing"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// Config configures a Daemon. Its fields are duckraftd's flags (see
// docs/cli.md), already parsed and checked; zero values take the defaults
// of the packages they are handed to.
type Config struct {
	// ID is the node's id, unique in the cluster and stable across
	// restarts.
	ID string
	// DataDir holds the DuckDB file (duckraft.db), the Raft state (raft/),
	// when Token is empty the generated token, and the cluster key the
	// node generated if it bootstrapped its cluster (KeyFileName).
	DataDir string
	// QuackAddr is the Quack (HTTP) listen address; RaftAddr the Raft one
	// (unused by a router); GossipAddr the gossip one, TCP and UDP.
	QuackAddr, RaftAddr, GossipAddr string
	// HTTPAddr is the operations address: /livez, /readyz, /metrics,
	// /status and the status page (docs/operations.md). Empty serves none.
	HTTPAddr string
	// RaftAdvertise is the Raft address other nodes dial, if not RaftAddr
	// (tests route Raft through fault-injecting proxies).
	RaftAdvertise string
	// QuackAdvertise is the Quack address other nodes and routers dial, as
	// gossip carries it, if not QuackAddr (tests put a bandwidth-capping
	// proxy in front of each node).
	QuackAdvertise string
	// Join is the gossip address of a live member to join. A node without
	// it bootstraps a new cluster unless it already has Raft state.
	Join string
	// Replica runs the node as a non-voting read replica.
	Replica bool
	// Router runs a data-less router that joins gossip through Join and
	// sends writes to the leader and reads to the data nodes.
	Router bool
	// Token authenticates clients as an admin. Empty means the one kept
	// in DataDir, generated on first start so that restarts keep it,
	// unless TokensFile is given: then only that file's tokens are
	// accepted.
	Token string
	// TokensFile names a file of client tokens with their roles, one
	// "ROLE TOKEN" per line (package node/tokens), accepted besides
	// Token; ReloadTokens reads it again.
	TokensFile string
	// ConfigFile is the --config file the configuration came from, if
	// any: it may hold the token or the cluster key, so no client
	// statement may read it (routing.Config.ProtectedPaths).
	ConfigFile string
	// ClusterKey (16, 24 or 32 bytes) is the members' credential: gossip's
	// encryption key, the node API's node credential and the Raft
	// transport's CA are derived from it (package clusterkey). Nil reads
	// it from ClusterKeyFile, else from DataDir's KeyFileName, else a node
	// that bootstraps a new cluster generates one there, and any other
	// node refuses to start (ErrNoClusterKey; see loadClusterKey). No
	// client credential implies it.
	ClusterKey []byte
	// ClusterKeyFile names a file holding the cluster key in hex, such as
	// a copy of the bootstrap node's KeyFileName; it excludes ClusterKey.
	ClusterKeyFile string
	// RaftTLSCert, RaftTLSKey and RaftTLSCA, when set (all three), are the
	// Raft transport's certificate, key and the CA of every member's
	// certificate, instead of the CA derived from ClusterKey.
	RaftTLSCert, RaftTLSKey, RaftTLSCA string
	// GossipTiming is gossip's failure detection; zero is cluster.LANTiming.
	GossipTiming cluster.Timing
	// Voters is how many voting members the cluster keeps; ReapAfter how
	// long a dead voter stays in Raft before it is removed; CatchUpFor how
	// long a non-voter must stay caught up before it is promoted (zero:
	// cluster.ReconcilerConfig's default).
	Voters     int
	ReapAfter  time.Duration
	CatchUpFor time.Duration
	// SnapshotThreshold, TrailingLogs and SnapshotInterval tune Raft
	// snapshots and log compaction (replication.Config).
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotInterval  time.Duration
	// RaftLogStore is the library keeping the Raft log and stable state
	// (replication.Config.LogStore): "boltdb" (the default when empty)
	// or "wal".
	RaftLogStore string
	// GroupCommitWait is how long the leader may hold concurrent writes to
	// pack them into one log entry (replication.Config.GatherMax); zero
	// means the default, negative never.
	GroupCommitWait time.Duration
	// StageBytes is the size of an open transaction's appends past which
	// they are sent ahead of COMMIT in log entries of about that size
	// (routing.Config.StageBytes); StageTimeout how long staged rows may
	// sit idle before the leader drops them (zero: the defaults; negative:
	// never stage, never drop).
	StageBytes   int
	StageTimeout time.Duration
	// Consistency is the default read consistency of new sessions;
	// MaxStaleness the log entries a bounded read may lag behind.
	Consistency  routing.Level
	MaxStaleness uint64
	// StatementTimeout bounds each read of a session that has not set
	// duckraft_statement_timeout itself (routing.Config.StatementTimeout);
	// 0 is none.
	StatementTimeout time.Duration
	// TLSCert and TLSKey, when set, serve HTTPS with this key pair.
	TLSCert, TLSKey string
	// Authorizer names a SQL macro fn(session_id, sql) that authorizes each
	// statement on a node.
	Authorizer string
	// AllowExternalAccess lets clients read and write server files, ATTACH
	// and INSTALL.
	AllowExternalAccess bool
	// MaxMessageBytes bounds a request body.
	MaxMessageBytes int64
	// MaxBodyBytesInFlight bounds the request bodies held at once, and
	// MaxDecompressedBytes and MaxSessionDecompressedBytes the bytes
	// decompressed from compressed requests, node-wide and per session
	// (node.Config; the members' requests are not counted). Zero is node's
	// default for each.
	MaxBodyBytesInFlight        int64
	MaxDecompressedBytes        int64
	MaxSessionDecompressedBytes int64
	// MaxConns and MaxConnsPerClient bound the TCP connections held open
	// on QuackAddr, in all and per address (members' addresses are
	// exempt). Zero is node's default for each.
	MaxConns          int
	MaxConnsPerClient int
	// MaxSessions and MaxSessionsPerClient bound concurrent Quack sessions
	// of clients, in all and per client address (the members' sessions,
	// which carry their own clients' reads, are not counted); MaxLease
	// bounds the heartbeat lease a client may ask for. Zero is node's
	// default for each.
	MaxSessions          int
	MaxSessionsPerClient int
	MaxLease             time.Duration
	// MaxRunningStatements bounds the client statements running in
	// DuckDB at once, MaxRunningStatementsPerClient those of one client,
	// and AdmissionWait how long one waits for its turn (node.Config).
	// Zero is node's default for each.
	MaxRunningStatements          int
	MaxRunningStatementsPerClient int
	AdmissionWait                 time.Duration
	// StatementMemoryLimit is each client session's DuckDB
	// operator_memory_limit (node.Config); "" is node's default.
	StatementMemoryLimit string
	// ReadHeaderTimeout bounds a request's headers; BodyTimeout and
	// MinBodyRate its body (node.Config). Zero is node's default.
	ReadHeaderTimeout time.Duration
	BodyTimeout       time.Duration
	MinBodyRate       int64
	// WriteTimeout bounds how long the leader proves a heavy write before
	// it enters the log (replication.Config.WriteTimeout; 0: 1m, negative:
	// none).
	WriteTimeout time.Duration
	// Threads and MemoryLimit are DuckDB's resources.
	Threads     int
	MemoryLimit string
	// DuckDBFsync is the replicated database's fsync_mode (engine.Options).
	DuckDBFsync string
	// Restore is a backup file (duckraft backup), or an object
	// s3://bucket/key with its state hash beside it, that seeds a new
	// cluster: the node installs it as its database in an empty DataDir
	// and bootstraps with its state (see docs/backup.md).
	Restore string
	// BackupDir, when set, receives a backup every BackupEvery (zero:
	// DefaultBackupEvery) from whichever node leads then, of which the
	// newest BackupKeep (zero: DefaultBackupKeep) are kept.
	BackupDir string
	// BackupTo, when set (s3://bucket/prefix), receives the scheduled
	// backups as BackupDir would, as objects under the prefix of an
	// object store, with credentials from the environment; it excludes
	// BackupDir.
	BackupTo    string
	BackupEvery time.Duration
	BackupKeep  int
	// Logger receives every component's diagnostics; nil discards them.
	Logger *slog.Logger

	// WrapLogStore and Now inject faults into a daemon that runs inside a
	// test: WrapLogStore wraps the Raft log store (slow fsyncs, see
	// replication.Config), Now is the clock the leader stamps statements
	// with (clock jumps, see routing.Config). duckraftd leaves them nil.
	WrapLogStore func(raft.LogStore) raft.LogStore
	Now          func() time.Time
}

// Daemon is a running node or router.
type Daemon struct {
	cfg   Config
	log   *slog.Logger
	token string
	// keys are the client tokens accepted in force, with their roles:
	// TokensFile's, Token as admin, and the node credential as admin
	// (members' sessions carry routed reads). ReloadTokens replaces them.
	keys *tokens.Keyring
	// clusterKey is the members' key (loadClusterKey); keyFile the data
	// directory's file it was read from or generated into, if so; nodeCred
	// the node API credential derived from it.
	clusterKey []byte
	keyFile    string
	nodeCred   string
	// peerTLS is how this node trusts the others when nodes serve HTTPS;
	// nil when they serve plain HTTP.
	peerTLS *tls.Config
	// ids signs this node's session ids, so any member can serve them
	// (sessions.go).
	ids *node.SessionIDs

	// Each is nil until opened; a router has no store.
	db      *engine.DB
	store   *replication.Store
	exec    *routing.Executor
	members *membership
	// gossiped is members once started, for the store's hooks, which
	// raft may call before.
	gossiped atomic.Pointer[membership]
	srv      *node.Server
	backups  backups
	stages   leaderSchedule
	l        net.Listener
	hs       *http.Server

	// metrics is the daemon's Prometheus registry and the metrics the
	// hooks of its parts feed; leaders its recent leader changes. statusOf
	// is the node API's status of this node or router.
	metrics  *metrics
	leaders  leaderHistory
	statusOf func() nodeapi.Status
	// ops serves the operations address on opsL; opsDone is closed when it
	// stops. All nil without Config.HTTPAddr.
	ops     *http.Server
	opsL    net.Listener
	opsDone chan struct{}

	done     chan struct{}
	serveErr error
	// halt is set when the applier halted (applierHalted).
	halt atomic.Pointer[error]
	// removed is set once the leader asked this node to leave
	// (leaveCluster).
	removed   atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Start opens the node's database and Raft state in cfg.DataDir (a router
// opens only an empty in-memory database), joins gossip, and serves Quack
// on cfg.QuackAddr. It returns once the node serves; on error everything
// opened so far is closed again.
func Start(cfg Config) (*Daemon, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Restore != "" {
		if err := checkRestore(cfg); err != nil {
			return nil, err
		}
	}
	if err := checkBackupConfig(cfg); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	token := cfg.Token
	var err error
	if cfg.TokensFile == "" {
		if token, err = loadToken(cfg.Token, cfg.DataDir); err != nil {
			return nil, err
		}
	}
	key, keyFile, err := loadClusterKey(cfg, cfg.Logger)
	if err != nil {
		return nil, err
	}
	d := &Daemon{cfg: cfg, log: cfg.Logger, token: token, clusterKey: key, keyFile: keyFile, nodeCred: clusterkey.NodeAPI(key),
		ids:  node.NewSessionIDs(cfg.ID, clusterkey.SessionID(key)),
		done: make(chan struct{})}
	keys, clients, err := d.loadTokens()
	if err != nil {
		return nil, err
	}
	if clients == 0 {
		return nil, fmt.Errorf("tokens file %s holds no token, and no token is given: no client could connect", cfg.TokensFile)
	}
	d.keys = tokens.NewKeyring(keys)
	if cfg.TLSCert != "" {
		if d.peerTLS, err = peerTLS(cfg.TLSCert); err != nil {
			return nil, err
		}
	}
	if d.metrics, err = newMetrics(cfg.ID); err != nil {
		return nil, err
	}
	if cfg.Router {
		err = d.startRouter()
	} else {
		err = d.startNode()
	}
	if err == nil {
		d.metrics.scraped(d)
		err = d.serveOps()
	}
	if err != nil {
		d.shutdown(true)
		return nil, err
	}
	return d, nil
}

// loadToken returns token, or if it is empty the one kept in dir, creating
// it on first start so restarts keep it.
func loadToken(token, dir string) (string, error) {
	if token != "" {
		return token, nil
	}
	path := filepath.Join(dir, "token")
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

// loadTokens reads the tokens file, if there is one, and returns the set
// of tokens a node accepts with it: the file's, Token as admin and the
// node credential as admin; clients counts those but the node credential.
func (d *Daemon) loadTokens() (set *tokens.Set, clients int, err error) {
	set = &tokens.Set{}
	if path := d.cfg.TokensFile; path != "" {
		if set, err = tokens.Load(path); err != nil {
			return nil, 0, err
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			d.log.Warn("the tokens file is readable by others than its owner", "path", path, "mode", fi.Mode().Perm().String())
		}
		d.log.Info("tokens loaded", "path", path, "read", set.Count(tokens.Read), "write", set.Count(tokens.Write),
			"admin", set.Count(tokens.Admin))
	}
	if d.token != "" {
		set = set.Add(d.token, tokens.Admin)
	}
	return set.Add(d.nodeCred, tokens.Admin), set.Len(), nil
}

// ReloadTokens reads the tokens file again (duckraftd does on SIGHUP) and
// puts its tokens in force: a session whose token it no longer holds is
// refused at its next request, one whose role changed has the new role
// from then on. A file that does not load changes nothing: the tokens in
// force stay, and the error is logged and returned.
func (d *Daemon) ReloadTokens() error {
	if d.cfg.TokensFile == "" {
		d.log.Info("tokens not reloaded: no tokens file")
		return nil
	}
	set, clients, err := d.loadTokens()
	if err != nil {
		d.log.Error("tokens not reloaded; the previous tokens stay in force", "err", err)
		return err
	}
	if clients == 0 {
		d.log.Warn("the tokens file holds no token, and no token is given: no client can connect", "path", d.cfg.TokensFile)
	}
	d.keys.Replace(set)
	return nil
}

// Credentials are the credentials the node API accepts, with their roles;
// the other HTTP ports of duckraftd (the profiler's) check theirs with them.
func (d *Daemon) Credentials() nodeapi.Credentials {
	return nodeapi.Credentials{Tokens: d.keys, Node: d.nodeCred}
}

// startNode opens a data node: DuckDB, Raft, gossip, routing and Quack.
func (d *Daemon) startNode() error {
	c := d.cfg
	dbPath := filepath.Join(c.DataDir, "duckraft.db")
	// Stale temporary backups go first: one may be an interrupted
	// download of the backup to restore.
	if err := removeStaleBackupTmp(c.DataDir); err != nil {
		return err
	}
	if c.Restore != "" {
		if err := d.restore(dbPath); err != nil {
			return err
		}
	}
	var err error
	d.db, err = replication.OpenDatabase(dbPath, engine.Options{
		Threads:             c.Threads,
		MemoryLimit:         c.MemoryLimit,
		AllowExternalAccess: c.AllowExternalAccess,
		FsyncMode:           c.DuckDBFsync,
		Logger:              d.log,
	}, d.log)
	if err != nil {
		return err
	}
	raftTLS, err := d.raftTLS()
	if err != nil {
		return err
	}
	d.store, err = replication.Open(replication.Config{
		ID:                       c.ID,
		Dir:                      filepath.Join(c.DataDir, "raft"),
		RaftAddr:                 c.RaftAddr,
		AdvertiseAddr:            c.RaftAdvertise,
		TLS:                      raftTLS,
		Bootstrap:                c.Join == "",
		DB:                       d.db,
		SnapshotThreshold:        c.SnapshotThreshold,
		TrailingLogs:             c.TrailingLogs,
		SnapshotInterval:         c.SnapshotInterval,
		LogStore:                 c.RaftLogStore,
		GatherMax:                c.GroupCommitWait,
		WrapLogStore:             c.WrapLogStore,
		ObserveSnapshot:          d.metrics.observeSnapshot,
		ObserveLeader:            d.observeLeader,
		OnHalt:                   d.applierHalted,
		ReadsCompressedSnapshots: d.readsCompressedSnapshots,
		WriteTimeout:             c.WriteTimeout,
		Logger:                   d.log,
	})
	if mis, ok := errors.AsType[*replication.LogStoreMismatchError](err); ok {
		return fmt.Errorf("%w; this data directory was written with --raft-log-store %s: start with that, or on an empty --data", err, mis.Found)
	}
	if err != nil {
		return err
	}
	// Gossip tells the reconciler each node's Raft address exactly as the
	// Raft configuration holds it: the advertised one.
	raftAddr := c.RaftAddr
	if c.RaftAdvertise != "" {
		raftAddr = c.RaftAdvertise
	}
	// Gossip starts before the executor that reports the load it carries.
	var execRef atomic.Pointer[routing.Executor]
	if d.members, err = startMembership(c, raftAddr, d.db.Version(), clusterkey.Gossip(d.clusterKey), d.store, loadOf(&execRef), d.log); err != nil {
		return err
	}
	d.gossiped.Store(d.members)
	rc := d.routingConfig()
	rc.Store = d.store
	exec, err := routing.New(rc)
	if err != nil {
		return err
	}
	d.exec = exec
	execRef.Store(exec)
	if d.srv, err = d.quackServer(exec, c.Authorizer); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(nodeapi.WritePath, exec.WriteHandler())
	handleSessions(mux, exec)
	creds := d.Credentials()
	d.statusOf = func() nodeapi.Status {
		st := status(d.store, d.members, exec)
		st.Version, st.Engine = buildinfo.Version(), d.db.Version()
		return st
	}
	mux.Handle(nodeapi.StatusPath, nodeapi.StatusHandler(creds, func(context.Context) (nodeapi.Status, error) {
		return d.statusOf(), nil
	}))
	mux.Handle(nodeapi.HashPath, nodeapi.HashHandler(creds, func(ctx context.Context) (nodeapi.StateHash, error) {
		h, err := d.store.StateHash(ctx)
		return nodeapi.StateHash{Index: h.Index, Hash: h.Hash, Rows: h.Rows}, err
	}))
	mux.Handle(nodeapi.TransferPath, nodeapi.TransferHandler(creds, func(to string) (nodeapi.Transfer, error) {
		err := d.store.TransferLeadership(to)
		return nodeapi.Transfer{From: d.store.ID(), LeaderID: d.store.LeaderID()}, routing.APIError(err)
	}))
	mux.Handle(nodeapi.RemovePath, nodeapi.RemoveHandler(creds, d.removeMember))
	mux.Handle(nodeapi.LeavePath, nodeapi.LeaveHandler(d.nodeCred, d.leaveCluster))
	mux.Handle(nodeapi.BackupPath, nodeapi.BackupHandler(creds, d.serveBackup))
	if err := d.startBackups(); err != nil {
		return err
	}
	d.startSweeper()
	mux.Handle("/", d.srv.Handler())
	d.log.Info("serving Quack", "id", c.ID, "raft", raftAddr, "gossip", c.GossipAddr, "data", c.DataDir, "duckdb", d.db.Version())
	return d.serve(mux)
}

// startRouter opens a data-less router. Its sessions still need a DuckDB
// connection each (node.Server keeps settings there), so it opens an
// in-memory database that holds no cluster data.
func (d *Daemon) startRouter() error {
	c := d.cfg
	var err error
	d.db, err = engine.Open("", engine.Options{Threads: 1, MemoryLimit: c.MemoryLimit, Logger: d.log})
	if err != nil {
		return err
	}
	var execRef atomic.Pointer[routing.Executor]
	if d.members, err = startRouterMembership(c, clusterkey.Gossip(d.clusterKey), loadOf(&execRef), d.log); err != nil {
		return err
	}
	exec, err := routing.NewRouter(d.routingConfig())
	if err != nil {
		return err
	}
	d.exec = exec
	execRef.Store(exec)
	// The router's database holds no data, so it has no authorizer macro:
	// statements are authorized where they run.
	if d.srv, err = d.quackServer(exec, ""); err != nil {
		return err
	}
	mux := http.NewServeMux()
	handleSessions(mux, exec)
	d.statusOf = func() nodeapi.Status {
		st := routerStatus(c.ID, d.members, exec)
		st.Version = buildinfo.Version()
		return st
	}
	mux.Handle(nodeapi.StatusPath, nodeapi.StatusHandler(d.Credentials(), func(context.Context) (nodeapi.Status, error) {
		return d.statusOf(), nil
	}))
	mux.Handle("/", d.srv.Handler())
	d.log.Info("serving Quack as a router", "id", c.ID, "gossip", c.GossipAddr, "join", c.Join)
	if err := d.serve(mux); err != nil {
		return err
	}
	go d.watchLeader()
	return nil
}

// routerLeaderPoll is how often a router looks at which member gossip says
// leads, for its leader changes (a data node hears them from Raft).
const routerLeaderPoll = 250 * time.Millisecond

// watchLeader records the leader changes a router sees through gossip until
// the daemon stops.
func (d *Daemon) watchLeader() {
	t := time.NewTicker(routerLeaderPoll)
	defer t.Stop()
	last := ""
	for {
		select {
		case <-d.done:
			return
		case <-t.C:
		}
		leader := ""
		for _, p := range d.members.Peers() {
			if p.Leader {
				leader = p.ID
			}
		}
		if leader != last {
			last = leader
			d.observeLeader(leader)
		}
	}
}

// raftTLS is the Raft transport's mutual TLS: the operator's certificates
// if given, else a certificate this node issues itself from the CA derived
// from the cluster key.
func (d *Daemon) raftTLS() (*tls.Config, error) {
	c := d.cfg
	if c.RaftTLSCert != "" || c.RaftTLSKey != "" || c.RaftTLSCA != "" {
		if c.RaftTLSCert == "" || c.RaftTLSKey == "" || c.RaftTLSCA == "" {
			return nil, errors.New("raft TLS needs a certificate, its key and the members' CA")
		}
		return clusterkey.LoadRaftTLS(c.RaftTLSCert, c.RaftTLSKey, c.RaftTLSCA)
	}
	return clusterkey.RaftTLS(d.clusterKey, c.ID)
}

// loadOf reports the statements in flight on the executor once it exists,
// for gossip, which starts first.
func loadOf(exec *atomic.Pointer[routing.Executor]) func() uint64 {
	return func() uint64 {
		if e := exec.Load(); e != nil {
			return e.Load()
		}
		return 0
	}
}

// routingConfig is what a node's and a router's routing share. Sessions
// on other nodes (routed reads) authenticate with the token, which nodes
// of earlier versions accept, or else with the node credential: either is
// an admin there, trusted because the client's statement was checked here.
func (d *Daemon) routingConfig() routing.Config {
	remoteToken := d.token
	if remoteToken == "" {
		remoteToken = d.nodeCred
	}
	remote := routing.NewQuackRemote(remoteToken, d.nodeCred, d.peerTLS)
	return routing.Config{
		ID:               d.cfg.ID,
		Directory:        d.members,
		DB:               d.db,
		Token:            remoteToken,
		NodeCredential:   d.nodeCred,
		Remote:           remote,
		SessionIDs:       d.ids,
		SessionAPI:       remote,
		Consistency:      d.cfg.Consistency,
		MaxStaleness:     d.cfg.MaxStaleness,
		StageBytes:       d.cfg.StageBytes,
		StatementTimeout: d.cfg.StatementTimeout,
		Voters:           d.voterCount,
		Now:              d.cfg.Now,
		ObserveRead:      d.metrics.observeRead,
		ObserveWrite:     d.metrics.observeWrite,
		ProtectedPaths:   d.ownFiles(),
		Logger:           d.log,
	}
}

// voterCount is routing.Config.Voters: the voters of the Raft
// configuration, or on a router, which has none, the voters the cluster
// keeps (--voters).
func (d *Daemon) voterCount() int {
	if d.store != nil {
		return d.store.Voters()
	}
	return d.cfg.Voters
}

// ownFiles are the node's files and directories that no client statement
// may read or write: the data directory (DuckDB file and WAL, Raft state,
// generated token and cluster key), the tokens, cluster key, TLS key and
// configuration files, the backup directory and the backup file a cluster
// was seeded from (an object store's are no local files).
func (d *Daemon) ownFiles() []string {
	c := d.cfg
	var out []string
	for _, p := range []string{c.DataDir, c.TokensFile, c.ClusterKeyFile, c.TLSKey, c.RaftTLSKey, c.ConfigFile, c.BackupDir, c.Restore} {
		if p != "" && !s3backup.IsURL(p) {
			out = append(out, p)
		}
	}
	return out
}

// quackServer is the Quack front end of a node or a router: sessions
// authenticated by the tokens in force, each with its token's role,
// statements run by exec, and, when
// authorizer names a SQL macro, each statement authorized by it.
func (d *Daemon) quackServer(exec node.Executor, authorizer string) (*node.Server, error) {
	cfg := node.Config{
		DB:                          d.db,
		Authenticator:               node.KeyringAuth{Keyring: d.keys},
		Executor:                    exec,
		MaxMessageBytes:             d.cfg.MaxMessageBytes,
		MaxBodyBytesInFlight:        d.cfg.MaxBodyBytesInFlight,
		MaxDecompressedBytes:        d.cfg.MaxDecompressedBytes,
		MaxSessionDecompressedBytes: d.cfg.MaxSessionDecompressedBytes,
		MaxSessions:                 d.cfg.MaxSessions,
		MaxSessionsPerClient:        d.cfg.MaxSessionsPerClient,
		MaxRunningStatements:        d.cfg.MaxRunningStatements,
		AdmissionWait:               d.cfg.AdmissionWait,
		StatementMemoryLimit:        d.cfg.StatementMemoryLimit,
		// The members' sessions on this node carry their own clients'
		// reads, so a member is not one client: routing sends the node
		// credential with them. Its connections are told by address,
		// since nothing has been read when one is accepted.
		MemberCredential:  d.nodeCred,
		MaxConns:          d.cfg.MaxConns,
		MaxConnsPerClient: d.cfg.MaxConnsPerClient,
		MemberHost:        d.members.isMemberHost,
		MaxLease:          d.cfg.MaxLease,
		ReadHeaderTimeout: d.cfg.ReadHeaderTimeout,
		BodyTimeout:       d.cfg.BodyTimeout,
		MinBodyRate:       d.cfg.MinBodyRate,
		HiddenSchemas:     []string{replication.MetaSchema},
		ObserveRequest:    d.metrics.observeRequest,
		Cluster:           d.clusterSessions(),
		Logger:            d.log,
	}
	if authorizer != "" {
		cfg.Authorizer = node.SQLAuthorizer{DB: d.db, Function: authorizer}
	}
	cfg.MaxRunningStatementsPerClient = d.cfg.MaxRunningStatementsPerClient
	cfg.ObserveForward, cfg.ObserveAdopt, cfg.ObserveSessionLost = d.metrics.observeForward, d.metrics.observeAdopt, d.metrics.sessionsLost.Inc
	return node.New(cfg)
}

// serve listens on QuackAddr and serves mux until the daemon stops.
func (d *Daemon) serve(mux *http.ServeMux) error {
	l, err := net.Listen("tcp", d.cfg.QuackAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", d.cfg.QuackAddr, err)
	}
	// The connection caps go under TLS: a refused connection costs no
	// handshake.
	l = d.srv.LimitListener(l)
	if d.cfg.TLSCert != "" {
		if l, err = tlsListener(l, d.cfg.TLSCert, d.cfg.TLSKey); err != nil {
			return err
		}
	}
	d.l = l
	headerTimeout := d.cfg.ReadHeaderTimeout
	if headerTimeout <= 0 {
		headerTimeout = node.DefaultReadHeaderTimeout
	}
	bodyTimeout, rate := d.cfg.BodyTimeout, d.cfg.MinBodyRate
	if bodyTimeout <= 0 {
		bodyTimeout = node.DefaultBodyTimeout
	}
	if rate <= 0 {
		rate = node.DefaultMinBodyRate
	}
	// The body deadline covers the node API's endpoints too, not only
	// Quack's.
	d.hs = &http.Server{Handler: node.GuardBodies(mux, bodyTimeout, rate), ReadHeaderTimeout: headerTimeout,
		IdleTimeout: 5 * time.Minute, ErrorLog: slog.NewLogLogger(d.log.Handler(), slog.LevelDebug)}
	go func() {
		if err := d.hs.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			d.serveErr = err
		}
		close(d.done)
	}()
	return nil
}

// Token is the admin token given as Token or kept in the data directory;
// empty when the node has only a tokens file.
func (d *Daemon) Token() string { return d.token }

// QuackAddr is the address Quack is served on.
func (d *Daemon) QuackAddr() string { return d.l.Addr().String() }

// KeyFile is the path of the data directory's cluster key file when the
// node's key is kept there (it generated it, bootstrapping its cluster):
// what the nodes that join need a copy of. Empty when the key was given.
func (d *Daemon) KeyFile() string { return d.keyFile }

// Done is closed when the daemon stops serving: after Close or Crash, or
// when serving fails on its own (Err says why).
func (d *Daemon) Done() <-chan struct{} { return d.done }

// Err is why serving stopped on its own (ErrRemoved after the leader
// removed the node); nil while serving and after Close or Crash.
func (d *Daemon) Err() error {
	select {
	case <-d.done:
		if d.removed.Load() {
			return ErrRemoved
		}
		if err := d.halt.Load(); err != nil {
			return fmt.Errorf("%w: %w", ErrApplierHalted, *err)
		}
		return d.serveErr
	default:
		return nil
	}
}

// Close stops the daemon gracefully: it stops serving, ends every session,
// leaves gossip (so the others see it leave rather than fail), shuts Raft
// down and closes the database, which DuckDB checkpoints. Statements in
// flight are interrupted; every acknowledged write is already on a quorum's
// disks. Close waits for all of it, so a caller that must not hang bounds it
// itself.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() { d.closeErr = d.shutdown(true) })
	return d.closeErr
}

// Crash stops the daemon the way a crash would, as far as one process can
// stop part of itself: it does not leave gossip (the others detect it as
// failed), and it closes DuckDB without a checkpoint, so the next start
// replays DuckDB's write-ahead log. Raft shuts down without a snapshot, as
// on Close. Unlike a killed process it still waits for the statements it
// interrupts to return, and every write already handed to the operating
// system stays in its page cache: a crash of the process, not of the
// machine.
func (d *Daemon) Crash() error {
	d.closeOnce.Do(func() { d.closeErr = d.shutdown(false) })
	return d.closeErr
}

// shutdown closes whatever is open, in the order that stops new work first.
func (d *Daemon) shutdown(graceful bool) error {
	if !graceful && d.db != nil {
		d.skipCheckpoint()
	}
	if graceful && d.store != nil && d.store.IsLeader() {
		// Hand leadership over while this node still serves: the others
		// then need no election timeout to notice it is gone, and writes
		// in flight here are retried on the new leader.
		switch err := d.store.TransferLeadership(""); {
		case errors.Is(err, replication.ErrNoSuchVoter):
		case err != nil:
			d.log.Warn("shutdown: leadership not transferred", "err", err)
		}
	}
	if d.ops != nil {
		d.ops.Close()
		<-d.opsDone
	}
	if d.hs != nil {
		d.hs.Close()
		<-d.done
	}
	d.stopBackups()
	d.stages.stop()
	var errs []error
	if d.exec != nil {
		// The sessions the server ends now stay with the other nodes,
		// which adopt them: a node that stops takes none with it.
		d.exec.Leave()
	}
	if d.srv != nil {
		errs = append(errs, d.srv.Close())
	}
	if d.exec != nil {
		// Its pooled connections would keep DuckDB open past its close.
		errs = append(errs, d.exec.Close())
	}
	if d.members != nil {
		errs = append(errs, d.members.Close(graceful))
	}
	if d.store != nil {
		errs = append(errs, d.store.Close())
	}
	switch {
	case d.db != nil && graceful:
		errs = append(errs, replication.CloseDatabase(d.db))
	case d.db != nil:
		// A crash leaves no mark of a clean close.
		errs = append(errs, d.db.Close())
	}
	return errors.Join(errs...)
}

// skipCheckpoint tells DuckDB not to checkpoint when the database closes,
// which leaves its write-ahead log for the next start to replay, as after a
// crash.
func (d *Daemon) skipCheckpoint() {
	conn, err := d.db.Connect()
	if err != nil {
		d.log.Warn("crash: cannot disable the shutdown checkpoint", "err", err)
		return
	}
	defer conn.Close()
	if _, err := conn.Exec(context.Background(), "PRAGMA disable_checkpoint_on_shutdown"); err != nil {
		d.log.Warn("crash: cannot disable the shutdown checkpoint", "err", err)
	}
}

// quackAdvertise is the Quack address gossip carries for this node.
func (c Config) quackAdvertise() string {
	if c.QuackAdvertise != "" {
		return c.QuackAdvertise
	}
	return c.QuackAddr
}

// httpAdvertise is the operations address gossip tells the others, for
// the status pages' links: HTTPAddr, with the Quack address's host in
// place of an address that listens on every interface.
func (c Config) httpAdvertise() string {
	host, port, err := net.SplitHostPort(c.HTTPAddr)
	if err != nil || port == "0" {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if host, _, err = net.SplitHostPort(c.quackAdvertise()); err != nil {
			return ""
		}
	}
	return net.JoinHostPort(host, port)
}
