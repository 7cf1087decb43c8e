package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// benchNode is one duckraftd process started by a benchmark.
type benchNode struct {
	id, quack string
	cmd       *exec.Cmd
}

// startBenchCluster starts n duckraftd processes on loopback, the first
// bootstrapping and the others joining it, and waits until the leader
// counts them all.
func startBenchCluster(daemon, dir, token string, n int, stderr io.Writer) ([]*benchNode, error) {
	var nodes []*benchNode
	firstGossip := ""
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("n%d", i+1)
		quack, raftAddr, gossip := mustFreeAddr(), mustFreeAddr(), mustFreeAddr()
		args := []string{"--id", id, "--data", filepath.Join(dir, id), "--quack", quack, "--raft", raftAddr,
			"--gossip", gossip, "--token", token, "--http", "off", "--log-level", "warn"}
		if i == 0 {
			firstGossip = gossip
		} else {
			args = append(args, "--join", firstGossip)
		}
		cmd := exec.Command(daemon, args...)
		cmd.Stdout, cmd.Stderr = io.Discard, stderr
		if err := cmd.Start(); err != nil {
			stopBenchCluster(nodes)
			return nil, fmt.Errorf("start %s: %w", daemon, err)
		}
		nodes = append(nodes, &benchNode{id: id, quack: quack, cmd: cmd})
		if err := waitForServer(quack, token, 30*time.Second); err != nil {
			stopBenchCluster(nodes)
			return nil, err
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if st, err := nodeStatus(nodes[0].quack, token); err == nil {
			if l := leaderOf(st, nodes); l != nil {
				if lst, err := nodeStatus(l.quack, token); err == nil && inRaft(lst) == n {
					return nodes, nil
				}
			}
		}
		if time.Now().After(deadline) {
			stopBenchCluster(nodes)
			return nil, fmt.Errorf("cluster of %d did not form within 60s", n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func stopBenchCluster(nodes []*benchNode) {
	for _, n := range nodes {
		n.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, n := range nodes {
		n.cmd.Wait()
	}
}

func inRaft(st nodeapi.Status) int {
	n := 0
	for _, m := range st.Members {
		if m.InRaft {
			n++
		}
	}
	return n
}

func leaderOf(st nodeapi.Status, nodes []*benchNode) *benchNode {
	for _, n := range nodes {
		if n.id == st.LeaderID {
			return n
		}
	}
	return nil
}

// benchWrites measures single-row INSERT transactions per second against
// a 3-node cluster at growing client counts.
func benchWrites(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench writes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	daemon := fs.String("duckraftd", "bin/duckraftd", "duckraftd binary")
	nodesN := fs.Int("nodes", 3, "cluster size")
	dur := fs.Duration("duration", 5*time.Second, "measuring time per client count")
	threads := fs.String("threads", "1,2,4,8,16,32,64", "client thread counts")
	via := fs.String("via", "leader", "send writes to the leader or to a follower")
	local := fs.Bool("local", true, "also run each client count against a local DuckDB file in this process, side by side")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var counts []int
	for _, s := range strings.Split(*threads, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("--threads: bad count %q", s)
		}
		counts = append(counts, n)
	}
	dir, err := os.MkdirTemp("", "duckraft-bench-writes-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	const token = "bench-token-0123456789"
	nodes, err := startBenchCluster(*daemon, dir, token, *nodesN, stderr)
	if err != nil {
		return err
	}
	defer stopBenchCluster(nodes)
	st, err := nodeStatus(nodes[0].quack, token)
	if err != nil {
		return err
	}
	target := leaderOf(st, nodes)
	if target == nil {
		return fmt.Errorf("no leader")
	}
	if *via == "follower" {
		for _, n := range nodes {
			if n != target {
				target = n
				break
			}
		}
	}
	ctx := context.Background()
	setup, err := client.Connect(ctx, "quack:"+target.quack, client.Options{Token: token, Generation: wire.Q1})
	if err != nil {
		return err
	}
	if _, err := setup.Exec(ctx, "CREATE TABLE bench(thread INTEGER, seq BIGINT, payload VARCHAR)"); err != nil {
		return err
	}
	setup.Close()

	fmt.Fprintf(stdout, "## bench writes: single-row INSERT transactions, %d-node cluster, fsync on, via the %s\n\n", *nodesN, *via)
	fmt.Fprintf(stdout, "%s\n\n", machine())
	header, rule := "| client threads | tx/s | p50 latency | p99 latency | errors | writes per raft entry |", "|---|---|---|---|---|---|"
	var base *localDuckDB
	if *local {
		if base, err = openLocalDuckDB(filepath.Join(dir, "local.duckdb")); err != nil {
			return err
		}
		defer base.Close()
		header, rule = header+" local DuckDB tx/s | duckraft / local |", rule+"---|---|"
	}
	fmt.Fprintln(stdout, header)
	fmt.Fprintln(stdout, rule)
	for _, n := range counts {
		before, err := nodeStatus(target.quack, token)
		if err != nil {
			return err
		}
		r, err := writeRound(ctx, target.quack, token, n, *dur)
		if err != nil {
			return err
		}
		after, err := nodeStatus(target.quack, token)
		if err != nil {
			return err
		}
		perEntry := float64(r.writes) / float64(max(after.Commit-before.Commit, 1))
		row := fmt.Sprintf("| %d | %.0f | %s | %s | %d | %.1f |", n, r.rate, r.p50.Round(10*time.Microsecond),
			r.p99.Round(10*time.Microsecond), r.errors, perEntry)
		fmt.Fprintf(stderr, "%d threads: %.0f tx/s", n, r.rate)
		if base != nil {
			l, err := base.writeRound(ctx, n, *dur)
			if err != nil {
				return err
			}
			row += fmt.Sprintf(" %.0f | %.2f |", l.rate, r.rate/l.rate)
			fmt.Fprintf(stderr, ", local DuckDB %.0f tx/s", l.rate)
		}
		fmt.Fprintln(stdout, row)
		fmt.Fprintln(stderr)
	}
	return nil
}

type roundResult struct {
	writes   int
	rate     float64
	p50, p99 time.Duration
	errors   int
}

// writeRound runs threads clients, each inserting one row per transaction,
// for d.
func writeRound(ctx context.Context, addr, token string, threads int, d time.Duration) (roundResult, error) {
	conns := make([]*client.Conn, threads)
	for i := range conns {
		c, err := client.Connect(ctx, "quack:"+addr, client.Options{Token: token, Generation: wire.Q1})
		if err != nil {
			return roundResult{}, err
		}
		defer c.Close()
		conns[i] = c
	}
	return runClients(threads, d, func(i, seq int) error {
		_, err := conns[i].Exec(ctx, insertRow(i, seq))
		return err
	}), nil
}

// insertRow is the statement client i sends as its seq-th transaction.
func insertRow(i, seq int) string {
	return fmt.Sprintf("INSERT INTO bench VALUES (%d, %d, 'payload-%d-%d')", i, seq, i, seq)
}

// runClients calls write(i, seq) in a closed loop from threads goroutines
// for d and summarizes the latencies of the calls that succeeded.
func runClients(threads int, d time.Duration, write func(i, seq int) error) roundResult {
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for i := 0; i < threads; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var mine []time.Duration
			bad := 0
			for seq := 0; time.Now().Before(stop); seq++ {
				t0 := time.Now()
				if err := write(i, seq); err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += bad
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(lat) == 0 {
		return roundResult{errors: errs}
	}
	slices.Sort(lat)
	return roundResult{
		writes: len(lat),
		rate:   float64(len(lat)) / elapsed.Seconds(),
		p50:    lat[len(lat)/2],
		p99:    lat[len(lat)*99/100],
		errors: errs,
	}
}
