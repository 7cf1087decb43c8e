// Package testcluster starts real duckraft clusters on loopback for tests:
// duckraftd processes on free ports with temporary data directories, which a
// test can kill (SIGKILL), stop, restart, pause (SIGSTOP) and resume, and
// clients that connect to any node.
package testcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/routing"
)

// Token is the cluster token every test cluster uses.
const Token = "testcluster-token"

// Options configures a cluster.
type Options struct {
	// Replicas is how many non-voting read replicas start besides the
	// voters.
	Replicas int
	// Args are extra duckraftd flags for every node.
	Args []string
	// Proxy routes Raft traffic between nodes through in-process proxies
	// so that Partition can cut links (see faults.go).
	Proxy bool
}

// Cluster is a set of duckraftd processes forming one cluster.
type Cluster struct {
	t     testing.TB
	bin   string
	dir   string
	opts  Options
	net   *network
	Nodes []*Node
}

// Node is one duckraftd process.
type Node struct {
	c         *Cluster
	ID        string
	Dir       string
	QuackAddr string
	RaftAddr  string
	// RaftAdvertise is the address peers dial for Raft when the cluster
	// runs with Options.Proxy: the proxy in front of RaftAddr.
	RaftAdvertise string
	GossipAddr    string
	Replica       bool
	join          string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    *bytes.Buffer
	paused bool
}

// Start builds (once per test binary) and starts a cluster of voters
// voters plus opts.Replicas replicas, and waits for a leader. Every process
// is killed when the test ends.
func Start(t testing.TB, voters int, opts Options) *Cluster {
	t.Helper()
	c := &Cluster{t: t, bin: Binary(t), dir: t.TempDir(), opts: opts}
	for i := 0; i < voters+opts.Replicas; i++ {
		n := &Node{
			c:          c,
			ID:         fmt.Sprintf("n%d", i+1),
			QuackAddr:  freeAddr(t),
			RaftAddr:   freeAddr(t),
			GossipAddr: freeAddr(t),
			Replica:    i >= voters,
		}
		n.Dir = filepath.Join(c.dir, n.ID)
		if i > 0 {
			n.join = c.Nodes[0].GossipAddr
		}
		c.Nodes = append(c.Nodes, n)
	}
	t.Cleanup(c.killAll)
	if opts.Proxy {
		c.net = newNetwork()
		t.Cleanup(c.net.close)
		for _, n := range c.Nodes {
			c.net.add(t, n)
		}
	}
	for _, n := range c.Nodes {
		n.start(t)
		if n == c.Nodes[0] {
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

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// memberlist also binds UDP on the gossip port; make sure it is free.
	addr := l.Addr().String()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return freeAddr(t)
	}
	u.Close()
	return addr
}

func (n *Node) args() []string {
	a := []string{"--id", n.ID, "--data", n.Dir, "--quack", n.QuackAddr, "--raft", n.RaftAddr,
		"--gossip", n.GossipAddr, "--token", Token, "--log-level", "debug", "--gossip-profile", "loopback"}
	if n.join != "" {
		a = append(a, "--join", n.join)
	}
	if n.Replica {
		a = append(a, "--replica")
	}
	if n.RaftAdvertise != "" {
		a = append(a, "--raft-advertise", n.RaftAdvertise)
	}
	return append(a, n.c.opts.Args...)
}

func (n *Node) start(t testing.TB) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	cmd := exec.Command(n.c.bin, n.args()...)
	if n.log == nil {
		n.log = &bytes.Buffer{}
	} else {
		// Keep what the previous run printed: why it stopped is often there.
		fmt.Fprintf(n.log, "--- testcluster: restarting %s ---\n", n.ID)
	}
	cmd.Stdout = n.log
	cmd.Stderr = n.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", n.ID, err)
	}
	n.cmd, n.exited, n.paused = cmd, make(chan struct{}), false
	go func(exited chan struct{}) {
		cmd.Wait()
		close(exited)
	}(n.exited)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if conn, err := net.DialTimeout("tcp", n.QuackAddr, 200*time.Millisecond); err == nil {
			conn.Close()
			return
		}
		select {
		case <-n.exited:
			t.Fatalf("%s exited at start:\n%s", n.ID, n.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s within 30s:\n%s", n.ID, n.QuackAddr, n.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Running reports whether the process is alive (paused counts as alive).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

func (n *Node) signal(sig syscall.Signal) {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		if sig == syscall.SIGTERM {
			cmd.Process.Signal(syscall.SIGCONT)
		}
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
}

// Kill ends the process with SIGKILL: no chance to flush or say goodbye.
func (n *Node) Kill() { n.signal(syscall.SIGKILL) }

// Stop ends the process with SIGTERM and waits for it.
func (n *Node) Stop() { n.signal(syscall.SIGTERM) }

// Pause freezes the process with SIGSTOP.
func (n *Node) Pause() {
	n.signal(syscall.SIGSTOP)
	n.mu.Lock()
	n.paused = true
	n.mu.Unlock()
}

// Resume continues a paused process.
func (n *Node) Resume() {
	n.signal(syscall.SIGCONT)
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
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

// Log returns what the process printed so far.
func (n *Node) Log() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.log.String()
}

func (c *Cluster) killAll() {
	for _, n := range c.Nodes {
		if n.Running() {
			n.Kill()
		}
	}
	if c.t.Failed() {
		for _, n := range c.Nodes {
			c.t.Logf("--- log of %s ---\n%s", n.ID, tail(n.Log(), 60))
		}
	}
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

var statusClient = &http.Client{Timeout: 2 * time.Second}

// Status asks n for its view of the cluster.
func (n *Node) Status() (routing.Status, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+n.QuackAddr+routing.StatusPath, nil)
	if err != nil {
		return routing.Status{}, err
	}
	req.Header.Set("Authorization", "Bearer "+Token)
	resp, err := statusClient.Do(req)
	if err != nil {
		return routing.Status{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return routing.Status{}, fmt.Errorf("status of %s: %s: %s", n.ID, resp.Status, b)
	}
	var st routing.Status
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// StateHash asks n for its state hash: equal hashes at equal applied
// indexes mean equal data.
func (n *Node) StateHash() (index uint64, hash string, err error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+n.QuackAddr+routing.HashPath, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+Token)
	resp, err := statusClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return 0, "", fmt.Errorf("hash of %s: %s: %s", n.ID, resp.Status, b)
	}
	var h struct {
		Index uint64 `json:"applied_index"`
		Hash  string `json:"hash"`
	}
	err = json.NewDecoder(resp.Body).Decode(&h)
	return h.Index, h.Hash, err
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
