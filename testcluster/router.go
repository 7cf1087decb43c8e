package testcluster

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
)

// Router is a data-less duckraftd --router process. It is not one of the
// cluster's Nodes: it holds no data and is never in the Raft configuration.
type Router struct {
	ID         string
	QuackAddr  string
	GossipAddr string
	cmd        *exec.Cmd
	log        *bytes.Buffer
}

// StartRouter starts a router that joins the cluster's gossip through its
// first running node, and waits until it knows a leader. It is killed when
// the test ends.
func (c *Cluster) StartRouter(t testing.TB, args ...string) *Router {
	t.Helper()
	r := &Router{ID: "router" + strconv.Itoa(len(c.Nodes)+1), QuackAddr: freeAddr(t), GossipAddr: freeAddr(t), log: &bytes.Buffer{}}
	var join string
	for _, n := range c.Nodes {
		if n.Running() {
			join = n.GossipAddr
			break
		}
	}
	a := append([]string{"--router", "--id", r.ID, "--data", filepath.Join(c.dir, r.ID), "--quack", r.QuackAddr,
		"--gossip", r.GossipAddr, "--join", join, "--token", Token, "--log-level", "debug", "--gossip-profile", "loopback"},
		args...)
	r.cmd = exec.Command(c.bin, a...)
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start router: %v", err)
	}
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		r.cmd.Wait()
		if t.Failed() {
			t.Logf("--- log of %s ---\n%s", r.ID, tail(r.log.String(), 60))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if conn, err := net.DialTimeout("tcp", r.QuackAddr, 200*time.Millisecond); err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("router did not listen on %s:\n%s", r.QuackAddr, r.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	probe := (&Node{QuackAddr: r.QuackAddr})
	for {
		if st, err := probe.Status(); err == nil && st.LeaderID != "" {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("router knows no leader within 30s:\n%s", r.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Client connects to the router with the cluster token.
func (r *Router) Client(t testing.TB) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, "quack:"+r.QuackAddr, client.Options{Token: Token, Generation: wire.Q1})
	if err != nil {
		t.Fatalf("connect to %s: %v", r.ID, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
