// Package testcluster starts real duckraft clusters on loopback for tests:
// nodes on free ports with temporary data directories, which a test can
// kill, stop, restart, partition and heal, and clients that connect to any
// node.
//
// A cluster runs in one of two modes. By default every node is a duckraftd
// process: the binary under test, killed with SIGKILL and frozen with
// SIGSTOP, the proof that counts. With Options.InProcess every node is a
// daemon.Daemon inside the test process: the same wiring with real Raft,
// files and sockets, which starts in a fraction of the time, runs under the
// race detector, and takes faults a process cannot (slow Raft log writes,
// clock jumps: faults.go). Its Kill is a crash of the daemon rather than of
// a process (see Node.Kill), and it cannot be paused.
package testcluster

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/duckraft/duckraft/cluster"
	"github.com/duckraft/duckraft/clusterkey"
	"github.com/duckraft/duckraft/cmd/duckraftd/daemon"
	"github.com/duckraft/duckraft/internal/freeport"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/testcluster/bandwidth"
)

// Token is the cluster token every test cluster uses.
const Token = "testcluster-token"

// Options configures a cluster.
type Options struct {
	// Replicas is how many non-voting read replicas start besides the
	// voters.
	Replicas int
	// Args are extra duckraftd flags for every node (process mode only).
	Args []string
	// Proxy routes Raft traffic between nodes through in-process proxies
	// so that Isolate and IsolateSilently can cut links (see faults.go).
	Proxy bool
	// InProcess runs every node as a daemon inside the test process
	// instead of a duckraftd process.
	InProcess bool
	// Configure, in-process, adjusts every node's daemon configuration, as
	// Args do in process mode.
	Configure func(*daemon.Config)
	// Binary, in process mode, is the duckraftd every node starts with
	// instead of Binary(t): another build, for upgrade tests (see
	// Node.RestartWith).
	Binary string
	// Restore is a backup file (duckraft backup) the first node seeds the
	// new cluster from at its first start (duckraftd --restore); the
	// others join it as usual.
	Restore string
	// QuackCap, in bytes per second, puts a bandwidth.Proxy capped at that
	// rate in front of each node's Quack port: Node.QuackAddr is the
	// proxy, which the node advertises (duckraftd --quack-advertise), so
	// routers, other nodes and the test's clients all read through it. 0
	// caps nothing.
	QuackCap int64
}

// Cluster is a set of nodes forming one cluster.
type Cluster struct {
	t      testing.TB
	bin    string
	dir    string
	opts   Options
	voters int // the voter count every node keeps (duckraftd --voters)
	net    *network
	Nodes  []*Node

	// key is the members' key and keyFile a copy of it (mode 0600), which
	// every start but the first node's first is given (duckraftd
	// --cluster-key-file), as an operator gives joiners a copy of the
	// bootstrap node's: the first node generates the key when it
	// bootstraps, as any node started without one does, and the copy
	// outlives its data directory. A duckraftd that predates generated keys
	// (an older build an upgrade test starts first) generates none: then
	// the cluster makes the key and gives it to every start (see keyArgs).
	// Nil until known.
	key     []byte
	keyFile string

	// routers counts the routers started, which name each its own ID
	// and data directory.
	routers atomic.Int32
}

// Node is one node of a cluster: a duckraftd process or an in-process
// daemon, started again on each Restart with the same data directory and
// addresses.
type Node struct {
	c         *Cluster
	ID        string
	Dir       string
	QuackAddr string
	// quackListen is where the node itself listens when a bandwidth proxy
	// holds QuackAddr (Options.QuackCap); empty otherwise.
	quackListen string
	RaftAddr    string
	// RaftAdvertise is the address peers dial for Raft when the cluster
	// runs with Options.Proxy: the proxy in front of RaftAddr.
	RaftAdvertise string
	GossipAddr    string
	// HTTPAddr is the operations address (/metrics, /readyz, /status,
	// the status page); a duckraftd that predates --http serves none.
	HTTPAddr string
	Replica  bool
	join     string

	// faults are the node's injected faults, in-process; they outlast
	// restarts.
	faults faults

	mu     sync.Mutex
	run    runner // the current run; nil before the first start
	log    logBuffer
	paused bool
	bin    string // the duckraftd of this node's runs, if not the cluster's
}

// Start starts a cluster of voters voters plus opts.Replicas replicas and
// waits until they are all in the Raft configuration. In process mode it
// first builds duckraftd (once per test binary, see Binary). Every node is
// killed when the test ends.
func Start(t testing.TB, voters int, opts Options) *Cluster {
	t.Helper()
	c := &Cluster{t: t, dir: t.TempDir(), opts: opts, voters: voters}
	c.keyFile = filepath.Join(c.dir, "cluster.key")
	if opts.InProcess {
		if len(opts.Args) > 0 {
			t.Fatal("testcluster: Options.Args are duckraftd flags, for process mode; in-process, use Options.Configure")
		}
	} else if c.bin = opts.Binary; c.bin == "" {
		c.bin = Binary(t)
	}
	if !opts.InProcess && !hasFlag(c.bin, "cluster-key-file") {
		c.setKey(t, clusterkey.Generate())
	}
	for i := 0; i < voters+opts.Replicas; i++ {
		n := &Node{
			c:          c,
			ID:         fmt.Sprintf("n%d", i+1),
			QuackAddr:  freeAddr(t),
			RaftAddr:   freeAddr(t),
			GossipAddr: freeAddr(t),
			HTTPAddr:   freeAddr(t),
			Replica:    i >= voters,
		}
		n.Dir = filepath.Join(c.dir, n.ID)
		if i > 0 {
			n.join = c.Nodes[0].GossipAddr
		}
		c.Nodes = append(c.Nodes, n)
	}
	t.Cleanup(c.killAll)
	for _, n := range c.Nodes {
		c.capQuack(t, n)
	}
	if opts.Proxy {
		c.net = newNetwork(t)
		t.Cleanup(c.net.close)
		for _, n := range c.Nodes {
			c.net.add(t, n)
		}
		if c.key != nil {
			c.net.setKey(t, c.key)
		}
	}
	for _, n := range c.Nodes {
		n.start(t)
		if n == c.Nodes[0] {
			if c.key == nil {
				c.keepKey(t, n)
			}
			c.WaitForLeader(t, 20*time.Second)
		}
	}
	c.WaitForMembers(t, voters+opts.Replicas, 30*time.Second)
	c.WaitForVoters(t, voters, 30*time.Second)
	return c
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// Binary returns the duckraftd binary to run: $DUCKRAFTD if set, else one
// built from this module once per test binary.
func Binary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("DUCKRAFTD"); b != "" {
		return b
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "duckraftd-test-")
		if err != nil {
			buildErr = err
			return
		}
		buildBin = filepath.Join(dir, "duckraftd")
		out, err := exec.Command("go", "build", "-o", buildBin, "github.com/duckraft/duckraft/cmd/duckraftd").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build duckraftd: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// catchUpFor is how long a joining node of a test cluster stays caught up
// before it votes (duckraftd --catch-up-for). The default, 3 s, is spent by
// every Start and every rejoin that waits for the voters; a node's applied
// index still has to be within the reconciler's MaxLag of the leader's.
const catchUpFor = 500 * time.Millisecond

// httpArgs are the flags that serve the operations address on addr, for a
// duckraftd that has them: the build under test does, an older one an
// upgrade test starts may not, and without the flag every node would take
// the default port.
func httpArgs(bin, addr string) []string {
	if !hasFlag(bin, "http") {
		return nil
	}
	return []string{"--http", addr}
}

// hasFlag reports whether the duckraftd at bin has the flag name, by its
// --help, read once per binary.
func hasFlag(bin, name string) bool {
	helpMu.Lock()
	defer helpMu.Unlock()
	text, ok := helpText[bin]
	if !ok {
		out, _ := exec.Command(bin, "-h").CombinedOutput()
		text = string(out)
		helpText[bin] = text
	}
	return strings.Contains(text, "-"+name+" ")
}

var (
	helpMu   sync.Mutex
	helpText = map[string]string{}
)

// setKey makes key the cluster's: kept in keyFile and given to the Raft
// proxies.
func (c *Cluster) setKey(t testing.TB, key []byte) {
	t.Helper()
	if err := clusterkey.WriteFile(c.keyFile, key); err != nil {
		t.Fatal(err)
	}
	c.key = key
	if c.net != nil {
		c.net.setKey(t, key)
	}
}

// keepKey takes the key the first node generated when it bootstrapped.
func (c *Cluster) keepKey(t testing.TB, first *Node) {
	t.Helper()
	key, _, err := clusterkey.ReadFile(filepath.Join(first.Dir, daemon.KeyFileName))
	if err != nil {
		t.Fatalf("the key %s generated: %v", first.ID, err)
	}
	c.setKey(t, key)
}

// keyArgs are the flags that give a start of the duckraftd at bin the
// cluster key: none before there is one (the first node's first start
// generates it), the copy's path, or, to a build without
// --cluster-key-file, the key itself, which every build takes.
func (c *Cluster) keyArgs(bin string) []string {
	switch {
	case c.key == nil:
		return nil
	case hasFlag(bin, "cluster-key-file"):
		return []string{"--cluster-key-file", c.keyFile}
	default:
		return []string{"--cluster-key", hex.EncodeToString(c.key)}
	}
}

// api calls the nodes' API as a member does: with the client token (an
// admin's), and the node credential of the cluster key.
func (c *Cluster) api() *nodeapi.Client {
	api := &nodeapi.Client{Token: Token}
	if c.key != nil {
		api.Node = clusterkey.NodeAPI(c.key)
	}
	return api
}

// freeAddr returns a loopback address no other node of this test binary
// was given (see package freeport for why not port 0).
func freeAddr(t testing.TB) string {
	t.Helper()
	a, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// capQuack puts a bandwidth proxy in front of n's Quack port if the
// cluster caps it (Options.QuackCap).
func (c *Cluster) capQuack(t testing.TB, n *Node) {
	t.Helper()
	if c.opts.QuackCap <= 0 {
		return
	}
	n.quackListen = freeAddr(t)
	p, err := bandwidth.Listen("127.0.0.1:0", n.quackListen, c.opts.QuackCap)
	if err != nil {
		t.Fatalf("quack proxy for %s: %v", n.ID, err)
	}
	t.Cleanup(func() { p.Close() })
	n.QuackAddr = p.Addr()
}

// listenAddr is where the node's Quack server listens: QuackAddr, or the
// address behind its bandwidth proxy.
func (n *Node) listenAddr() string {
	if n.quackListen != "" {
		return n.quackListen
	}
	return n.QuackAddr
}

func (n *Node) args(bin string) []string {
	a := []string{"--id", n.ID, "--data", n.Dir, "--quack", n.listenAddr(), "--raft", n.RaftAddr,
		"--gossip", n.GossipAddr, "--token", Token, "--log-level", "debug", "--gossip-profile", "loopback",
		"--voters", strconv.Itoa(n.c.voters)}
	a = append(a, httpArgs(bin, n.HTTPAddr)...)
	a = append(a, n.c.keyArgs(bin)...)
	if hasFlag(bin, "catch-up-for") {
		a = append(a, "--catch-up-for", catchUpFor.String())
	}
	if n.join != "" {
		a = append(a, "--join", n.join)
	}
	if n.Replica {
		a = append(a, "--replica")
	}
	if n.RaftAdvertise != "" {
		a = append(a, "--raft-advertise", n.RaftAdvertise)
	}
	if n.quackListen != "" {
		a = append(a, "--quack-advertise", n.QuackAddr)
	}
	if n.restoring() {
		a = append(a, "--restore", n.c.opts.Restore)
	}
	return append(a, n.c.opts.Args...)
}

// config is the node's daemon configuration in-process: what args says in
// process mode.
func (n *Node) config() daemon.Config {
	cfg := daemon.Config{
		ID:            n.ID,
		DataDir:       n.Dir,
		QuackAddr:     n.listenAddr(),
		RaftAddr:      n.RaftAddr,
		RaftAdvertise: n.RaftAdvertise,
		GossipAddr:    n.GossipAddr,
		HTTPAddr:      n.HTTPAddr,
		Join:          n.join,
		Replica:       n.Replica,
		Token:         Token,
		Voters:        n.c.voters,
		CatchUpFor:    catchUpFor,
		GossipTiming:  cluster.LoopbackTiming(),
		WrapLogStore:  n.faults.wrapLogStore,
		Now:           n.faults.now,
	}
	if n.quackListen != "" {
		cfg.QuackAdvertise = n.QuackAddr
	}
	if n.c.key != nil {
		cfg.ClusterKeyFile = n.c.keyFile
	}
	if n.restoring() {
		cfg.Restore = n.c.opts.Restore
	}
	if n.c.opts.Configure != nil {
		n.c.opts.Configure(&cfg)
	}
	return cfg
}

// restoring reports whether this start of n restores Options.Restore: the
// first start of the first node. Restarts find the restored data in place.
func (n *Node) restoring() bool {
	return n.c.opts.Restore != "" && n == n.c.Nodes[0] && n.run == nil
}

func (n *Node) start(t testing.TB) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.run != nil {
		n.log.restarting(n.ID)
	}
	if n.c.opts.InProcess {
		n.run = startInProcess(t, n.ID, n.config(), &n.log)
	} else {
		bin := n.bin
		if bin == "" {
			bin = n.c.bin
		}
		n.run = startProcess(t, n.ID, bin, n.args(bin), &n.log, n.listenAddr())
	}
	n.paused = false
}

// Running reports whether the node is alive (paused counts as alive).
func (n *Node) Running() bool {
	r := n.current()
	return r != nil && r.running()
}

func (n *Node) current() runner {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.run
}

// Kill ends the node abruptly. A process gets SIGKILL: no chance to flush
// or say goodbye. An in-process daemon crashes (daemon.Daemon.Crash): it
// leaves gossip without a word and DuckDB without a checkpoint, but what it
// wrote stays in the page cache, and the statements it interrupts return
// before it ends, where SIGKILL stops everything mid-instruction.
func (n *Node) Kill() {
	if r := n.current(); r != nil {
		r.kill()
	}
}

// Stop ends the node gracefully and waits for it: SIGTERM to a process
// (SIGKILL after 30 s), daemon.Daemon.Close in-process.
func (n *Node) Stop() {
	if r := n.current(); r != nil {
		r.stop()
	}
}

// Pause freezes the process with SIGSTOP. An in-process node cannot be
// frozen apart from the test: Pause fails the test.
func (n *Node) Pause() {
	n.signal("Pause", syscall.SIGSTOP)
	n.mu.Lock()
	n.paused = true
	n.mu.Unlock()
}

// Resume continues a paused process; in-process it fails the test.
func (n *Node) Resume() {
	n.signal("Resume", syscall.SIGCONT)
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
}

// signal sends sig to the node's process for op.
func (n *Node) signal(op string, sig syscall.Signal) {
	if n.c.opts.InProcess {
		n.c.t.Fatalf("testcluster: %s is process-mode only, and %s runs in-process", op, n.ID)
	}
	if p, ok := n.current().(*process); ok {
		p.signal(sig)
	}
}

// ReloadTokens has the node read its tokens file (duckraftd --tokens)
// again: SIGHUP to a process, which reloads in its own time, so a test
// polls for the effect.
func (n *Node) ReloadTokens() {
	if r := n.current(); r != nil {
		r.reloadTokens()
	}
}

// Restart starts a stopped or killed node again with its data directory.
func (n *Node) Restart(t testing.TB) {
	t.Helper()
	if n.Running() {
		n.Kill()
	}
	if n.join == "" {
		// The first node bootstrapped alone; restarted, it must find the
		// others through gossip like any node that rejoins.
		for _, m := range n.c.Nodes {
			if m != n && m.Running() {
				n.join = m.GossipAddr
				break
			}
		}
	}
	n.start(t)
}

// RestartWith stops the node gracefully and starts it again from the
// duckraftd binary, with its data directory: an upgrade (or a downgrade)
// of one node. Process mode only.
func (n *Node) RestartWith(t testing.TB, binary string) {
	t.Helper()
	if n.c.opts.InProcess {
		t.Fatalf("testcluster: RestartWith is process-mode only, and %s runs in-process", n.ID)
	}
	n.Stop()
	n.mu.Lock()
	n.bin = binary
	n.mu.Unlock()
	n.Restart(t)
}

// Log returns what the node logged so far, over all its runs.
func (n *Node) Log() string { return n.log.String() }

func (c *Cluster) killAll() {
	for _, n := range c.Nodes {
		n.Kill()
	}
	if c.t.Failed() {
		for _, n := range c.Nodes {
			showLog(c.t, n.ID, n.Log())
		}
	}
}

// showLog prints the end of the log of a failed test's node, and with
// DUCKRAFT_TEST_LOGS=dir keeps the whole log in that directory: a failure
// seen once in many runs is explained by what happened long before the
// last lines.
func showLog(t testing.TB, id, log string) {
	t.Logf("--- log of %s ---\n%s", id, tail(log, 60))
	dir := os.Getenv("DUCKRAFT_TEST_LOGS")
	if dir == "" {
		return
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "." + id + "." + strconv.Itoa(os.Getpid()) + ".log"
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Logf("log of %s not kept: %v", id, err)
		return
	}
	t.Logf("whole log of %s: %s", id, path)
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// Client connects to n with the cluster token.
func (n *Node) Client(t testing.TB) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, "quack:"+n.QuackAddr, client.Options{Token: Token, Generation: wire.Q1})
	if err != nil {
		t.Fatalf("connect to %s: %v", n.ID, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// apiTimeout bounds a status request to a node, hashTimeout a state hash:
// a hash digests every table, which on a starved machine can take seconds
// (a hash that timed out every time left a hunt's nodes "stuck" at one
// applied index for a minute).
const (
	apiTimeout  = 2 * time.Second
	hashTimeout = 30 * time.Second
)

// Status asks n for its view of the cluster.
func (n *Node) Status() (nodeapi.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	st, err := n.c.api().Status(ctx, n.QuackAddr)
	if err != nil {
		return st, fmt.Errorf("status of %s: %w", n.ID, err)
	}
	return st, nil
}

// TransferLeadership asks n, which must lead, to hand leadership to the
// voter with ID to, or to the most up-to-date voter when to is empty, and
// returns the leader n reports afterwards.
func (n *Node) TransferLeadership(to string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := n.c.api().TransferLeadership(ctx, n.QuackAddr, to)
	if err != nil {
		return res.LeaderID, fmt.Errorf("transfer leadership from %s: %w", n.ID, err)
	}
	return res.LeaderID, nil
}

// StateHash asks n for its state hash: equal hashes at equal applied
// indexes mean equal data.
func (n *Node) StateHash() (index uint64, hash string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), hashTimeout)
	defer cancel()
	h, err := n.c.api().Hash(ctx, n.QuackAddr)
	if err != nil {
		return 0, "", fmt.Errorf("hash of %s: %w", n.ID, err)
	}
	return h.Index, h.Hash, nil
}

// WaitConverged waits until every running node reports the same state hash
// at the same applied index, and returns that hash.
func (c *Cluster) WaitConverged(t testing.TB, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var idx uint64
		var hash string
		same, n := true, 0
		for _, node := range c.Nodes {
			if !node.Running() {
				continue
			}
			i, h, err := node.StateHash()
			if err != nil {
				same = false
				break
			}
			if n > 0 && (i != idx || h != hash) {
				same = false
			}
			idx, hash = i, h
			n++
		}
		if same && n > 0 {
			return hash
		}
		if time.Now().After(deadline) {
			for _, node := range c.Nodes {
				if node.Running() {
					i, h, err := node.StateHash()
					t.Logf("%s: index %d hash %s err %v", node.ID, i, h, err)
				}
			}
			t.Fatalf("nodes did not converge within %v", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// AddNode starts one more node that joins through the first node's gossip
// address, and waits until it is in the Raft configuration.
func (c *Cluster) AddNode(t testing.TB, replica bool) *Node {
	t.Helper()
	n := &Node{
		c:          c,
		ID:         fmt.Sprintf("n%d", len(c.Nodes)+1),
		QuackAddr:  freeAddr(t),
		RaftAddr:   freeAddr(t),
		GossipAddr: freeAddr(t),
		HTTPAddr:   freeAddr(t),
		Replica:    replica,
	}
	n.Dir = filepath.Join(c.dir, n.ID)
	for _, m := range c.Nodes {
		if m.Running() {
			n.join = m.GossipAddr
			break
		}
	}
	c.Nodes = append(c.Nodes, n)
	c.capQuack(t, n)
	if c.net != nil {
		c.net.add(t, n)
	}
	n.start(t)
	return n
}

// Leader returns the node that reports itself leader, or nil.
func (c *Cluster) Leader() *Node {
	for _, n := range c.Nodes {
		n.mu.Lock()
		paused := n.paused
		n.mu.Unlock()
		if !n.Running() || paused {
			continue
		}
		if st, err := n.Status(); err == nil && st.State == "Leader" {
			return n
		}
	}
	return nil
}

// Others returns the cluster's nodes other than n, in order.
func (c *Cluster) Others(n *Node) []*Node {
	var out []*Node
	for _, m := range c.Nodes {
		if m != n {
			out = append(out, m)
		}
	}
	return out
}

// WaitForLeader waits until some live node is leader.
func (c *Cluster) WaitForLeader(t testing.TB, timeout time.Duration) *Node {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if l := c.Leader(); l != nil {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader within %v", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitForMembers waits until the leader's Raft configuration holds n
// servers.
func (c *Cluster) WaitForMembers(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if l := c.Leader(); l != nil {
			if st, err := l.Status(); err == nil {
				inRaft := 0
				for _, m := range st.Members {
					if m.InRaft {
						inRaft++
					}
				}
				if inRaft >= n {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster did not reach %d members within %v", n, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitForVoters waits until the leader's Raft configuration holds n voters:
// joiners start as non-voters and are promoted once caught up.
func (c *Cluster) WaitForVoters(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if l := c.Leader(); l != nil {
			if st, err := l.Status(); err == nil {
				voters := 0
				for _, m := range st.Members {
					if m.Voter {
						voters++
					}
				}
				if voters >= n {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster did not reach %d voters within %v", n, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitForIndex waits until every running node has applied idx.
func (c *Cluster) WaitForIndex(t testing.TB, idx uint64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		for {
			st, err := n.Status()
			if err == nil && st.Applied >= idx {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not apply index %d within %v (status %+v, err %v)", n.ID, idx, timeout, st, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
