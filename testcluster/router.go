package testcluster

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/duckraft/duckraft/cluster"
	"github.com/duckraft/duckraft/cmd/duckraftd/daemon"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
)

// Router is a data-less router (duckraftd --router), a process or, in an
// in-process cluster, a daemon. It is not one of the cluster's Nodes: it
// holds no data and is never in the Raft configuration.
type Router struct {
	ID         string
	QuackAddr  string
	GossipAddr string
	// HTTPAddr is the router's operations address.
	HTTPAddr string
	run      runner
	log      logBuffer
}

// StartRouter starts a router that joins the cluster's gossip through its
// first running node, and waits until it knows a leader. args are extra
// duckraftd flags (process mode only). It is killed when the test ends.
func (c *Cluster) StartRouter(t testing.TB, args ...string) *Router {
	t.Helper()
	r := &Router{ID: "router" + strconv.Itoa(int(c.routers.Add(1))), QuackAddr: freeAddr(t), GossipAddr: freeAddr(t), HTTPAddr: freeAddr(t)}
	var join string
	for _, n := range c.Nodes {
		if n.Running() {
			join = n.GossipAddr
			break
		}
	}
	dir := filepath.Join(c.dir, r.ID)
	if c.opts.InProcess {
		if len(args) > 0 {
			t.Fatal("testcluster: router flags are for process mode")
		}
		r.run = startInProcess(t, r.ID, daemon.Config{Router: true, ID: r.ID, DataDir: dir, QuackAddr: r.QuackAddr,
			GossipAddr: r.GossipAddr, HTTPAddr: r.HTTPAddr, Join: join, Token: Token, ClusterKeyFile: c.keyFile,
			GossipTiming: cluster.LoopbackTiming()}, &r.log)
	} else {
		a := append([]string{"--router", "--id", r.ID, "--data", dir, "--quack", r.QuackAddr,
			"--gossip", r.GossipAddr, "--join", join, "--token", Token, "--log-level", "debug", "--gossip-profile", "loopback"},
			append(append(httpArgs(c.bin, r.HTTPAddr), c.keyArgs(c.bin)...), args...)...)
		r.run = startProcess(t, r.ID, c.bin, a, &r.log, r.QuackAddr)
	}
	t.Cleanup(func() {
		r.run.kill()
		if t.Failed() {
			showLog(t, r.ID, r.log.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	probe := &Node{c: c, QuackAddr: r.QuackAddr}
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

// ReloadTokens has the router read its tokens file again, as
// Node.ReloadTokens.
func (r *Router) ReloadTokens() { r.run.reloadTokens() }

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
