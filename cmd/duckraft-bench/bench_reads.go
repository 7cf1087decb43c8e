package main

import (
	"context"
	"errors"
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

	"github.com/duckraft/duckraft/cmd/internal/clusterctl"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/testcluster/bandwidth"
)

// dashboardQueries are the aggregates a dashboard refreshes: small answers
// from full scans of lineitem.
var dashboardQueries = []string{
	`SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice), avg(l_discount), count(*)
FROM lineitem WHERE l_shipdate <= DATE '1998-09-02' GROUP BY ALL ORDER BY ALL`,
	`SELECT l_shipmode, count(*), avg(l_quantity) FROM lineitem
WHERE l_receiptdate BETWEEN DATE '1994-01-01' AND DATE '1995-01-01' GROUP BY ALL ORDER BY ALL`,
	`SELECT l_suppkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem
GROUP BY ALL ORDER BY revenue DESC LIMIT 10`,
	`SELECT date_trunc('month', l_shipdate) AS m, count(*) FROM lineitem GROUP BY ALL ORDER BY ALL`,
}

// readNode is one duckraftd process of the read benchmark.
type readNode struct {
	id, quack string
	role      string // voter, replica or router
	cmd       *exec.Cmd
}

// benchReads measures dashboard aggregates per second and bulk-scan rows per
// second through a router, on 3 voters plus each replica count, with the
// CPU time each node spent per query.
func benchReads(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("duckraft-bench reads", flag.ContinueOnError)
	fs.SetOutput(stderr)
	daemon := fs.String("duckraftd", "bin/duckraftd", "duckraftd binary")
	replicas := fs.String("replicas", "1,3", "replica counts to compare")
	rows := fs.Int("rows", 1_000_000, "lineitem rows")
	clients := fs.Int("clients", 8, "dashboard clients")
	dur := fs.Duration("duration", 10*time.Second, "measuring time of the dashboard load")
	scans := fs.Int("scans", 3, "bulk scans per setting (the median is reported)")
	var servers clusterctl.Servers
	fs.Var(&servers, "server", "a router (or node) of a running deployment, quack:HOST[:PORT]; without it local clusters are started")
	token := fs.String("token", os.Getenv("DUCKRAFT_TOKEN"), "token for --server (env DUCKRAFT_TOKEN)")
	split := fs.Int("split", 3, "with --server: the nodes a split scan spreads over (SET duckraft_split_scan)")
	capRate := fs.String("cap", "", "cap each data node's Quack bandwidth with a proxy (e.g. 50MB/s) and compare scans through the router instead (bench_cap.go); local clusters only")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *capRate != "" {
		if len(servers.List()) > 0 {
			return errors.New("--cap starts clusters of its own: it does not go with --server")
		}
		rate, err := bandwidth.ParseRate(*capRate)
		if err != nil {
			return err
		}
		return benchCap(*daemon, rate, *rows, *scans, stdout, stderr)
	}
	if len(servers.List()) > 0 {
		return benchReadsRemote(servers.List(), *token, *rows, *clients, *dur, *scans, *split, stdout, stderr)
	}
	var counts []int
	for _, s := range strings.Split(*replicas, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			return fmt.Errorf("--replicas: bad count %q", s)
		}
		counts = append(counts, n)
	}
	fmt.Fprintf(stdout, "## bench reads: %d-row lineitem, 3 voters + N replicas, clients on a duckraftd --router\n\n", *rows)
	fmt.Fprintf(stdout, "%s\n\n", machine())
	for _, n := range counts {
		if err := readRound(*daemon, n, *rows, *clients, *dur, *scans, stdout, stderr); err != nil {
			return err
		}
	}
	return nil
}

// readRound runs both measurements on one cluster of 3 voters and n replicas.
func readRound(daemon string, replicas, rows, clients int, dur time.Duration, scans int, stdout, stderr io.Writer) error {
	dir, err := os.MkdirTemp("", "duckraft-bench-reads-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	token := benchToken
	nodes, _, err := startReadCluster(daemon, dir, token, 3, replicas, false)
	defer stopReadCluster(nodes)
	if err != nil {
		return err
	}
	router := nodes[len(nodes)-1]
	ctx := context.Background()
	setup, err := client.Connect(ctx, "quack:"+router.quack, client.Options{Token: token, Generation: wire.Q1})
	if err != nil {
		return err
	}
	defer setup.Close()
	fmt.Fprintf(stderr, "%d replicas: loading %d rows\n", replicas, rows)
	if _, err := setup.Exec(ctx, strings.Replace(lineitemSQL, "ROWS", strconv.Itoa(rows), 1)); err != nil {
		return fmt.Errorf("create lineitem: %w", err)
	}
	// The session reads its write: this waits until a node has it; let the
	// rest catch up before measuring.
	if err := waitApplied(nodes, token, 120*time.Second); err != nil {
		return err
	}

	fmt.Fprintf(stdout, "### 3 voters + %d replica(s)\n\n", replicas)
	cpu0 := cpuTimes(nodes)
	n, lat, errs, err := dashboardLoad(ctx, router.quack, token, clients, dur)
	if err != nil {
		return err
	}
	cpu1 := cpuTimes(nodes)
	fmt.Fprintf(stdout, "Dashboard aggregates (%d clients, %v): **%.1f queries/s**, p50 %v, p99 %v, %d errors.\n\n",
		clients, dur, float64(n)/dur.Seconds(), pct(lat, 50), pct(lat, 99), errs)
	cpuTable(stdout, nodes, cpu0, cpu1, n, "CPU ms per query")

	split := max(1, replicas)
	for _, r := range slices.Compact([]int{1, split}) {
		cpu0 = cpuTimes(nodes)
		var results []float64
		var got int64
		for range scans {
			rate, n, err := bulkScan(ctx, router.quack, token, r)
			if err != nil {
				return err
			}
			results, got = append(results, rate), n
		}
		cpu1 = cpuTimes(nodes)
		slices.Sort(results)
		fmt.Fprintf(stdout, "Bulk scan `SELECT * FROM lineitem`, split over %d node(s): **%.2f M rows/s** (median of %d, %d rows each).\n\n",
			r, results[len(results)/2]/1e6, scans, got)
		cpuTable(stdout, nodes, cpu0, cpu1, scans, "CPU ms per scan")
	}
	return nil
}

// startReadCluster starts voters, then replicas, then a router, each data
// node joining the first through gossip, and waits until the router knows
// every data node and a leader. With proxied, each data node sits behind a
// bandwidth proxy, uncapped until told, which it advertises as its Quack
// address (--quack-advertise), so the router reads through it too: a data
// node's quack in the result is its proxy's.
func startReadCluster(daemon, dir, token string, voters, replicas int, proxied bool) (nodes []*readNode, proxies []*bandwidth.Proxy, err error) {
	// The daemons log to a file: no Raft line in the benchmark's output.
	logf, err := daemonLog(dir)
	if err != nil {
		return nil, nil, err
	}
	defer logf.Close()
	defer func() {
		if err != nil {
			err = withLogTail(err, dir)
		}
	}()
	var firstGossip string
	for i := 0; i < voters+replicas+1; i++ {
		n := &readNode{id: fmt.Sprintf("n%d", i+1), quack: mustFreeAddr(), role: "voter"}
		listen, gossip := n.quack, mustFreeAddr()
		args := []string{"--id", n.id, "--data", filepath.Join(dir, n.id), "--quack", listen, "--gossip", gossip,
			"--token", token, "--http", "off", "--log-level", "warn"}
		if i == voters+replicas {
			n.role, n.id = "router", "router"
			args = append(args, "--router")
		} else {
			args = append(args, "--raft", mustFreeAddr())
			if i >= voters {
				n.role = "replica"
				args = append(args, "--replica")
			}
			if proxied {
				p, err := bandwidth.Listen("127.0.0.1:0", listen, 1)
				if err != nil {
					return nodes, proxies, err
				}
				p.SetRate(0)
				proxies = append(proxies, p)
				n.quack = p.Addr()
				args = append(args, "--quack-advertise", n.quack)
			}
		}
		if i == 0 {
			firstGossip = gossip
		} else {
			args = append(args, joinArgs(firstGossip, filepath.Join(dir, "n1"))...)
		}
		n.cmd = exec.Command(daemon, args...)
		n.cmd.Stdout, n.cmd.Stderr = io.Discard, logf
		if err := n.cmd.Start(); err != nil {
			return nodes, proxies, fmt.Errorf("start %s: %w", daemon, err)
		}
		nodes = append(nodes, n)
		if err := waitForServer(listen, token, 30*time.Second); err != nil {
			return nodes, proxies, err
		}
	}
	return nodes, proxies, waitFormed(nodes, token, voters, replicas)
}

// waitFormed waits until the router, the last of nodes, sees voters+replicas
// data nodes alive and the leader has them all in Raft, the voters voting.
func waitFormed(nodes []*readNode, token string, voters, replicas int) error {
	router := nodes[len(nodes)-1]
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := nodeStatus(router.quack, token)
		if err == nil && st.LeaderID != "" {
			data := 0
			for _, m := range st.Members {
				if m.Role != "router" && m.State == "alive" {
					data++
				}
			}
			if data == voters+replicas {
				lst, err := nodeStatus(leaderQuack(nodes, st.LeaderID), token)
				if members, voting := raftCounts(lst); err == nil && members == voters+replicas && voting == voters {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster of %d voters and %d replicas did not form within 60s", voters, replicas)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func leaderQuack(nodes []*readNode, id string) string {
	for _, n := range nodes {
		if n.id == id {
			return n.quack
		}
	}
	return ""
}

func stopReadCluster(nodes []*readNode) {
	for _, n := range nodes {
		n.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, n := range nodes {
		n.cmd.Wait()
	}
}

// waitApplied waits until every data node has applied the leader's commit
// index.
func waitApplied(nodes []*readNode, token string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var top, low uint64 = 0, ^uint64(0)
		for _, n := range nodes {
			if n.role == "router" {
				continue
			}
			st, err := nodeStatus(n.quack, token)
			if err != nil {
				low = 0
				continue
			}
			top, low = max(top, st.Commit), min(low, st.Applied)
		}
		if low >= top && top > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("nodes did not catch up")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// dashboardLoad runs clients sessions cycling through dashboardQueries for
// d and returns the queries answered, their latencies and the errors.
func dashboardLoad(ctx context.Context, addr, token string, clients int, d time.Duration) (int, []time.Duration, int, error) {
	conns := make([]*client.Conn, clients)
	for i := range conns {
		c, err := client.Connect(ctx, "quack:"+addr, client.Options{Token: token, Generation: wire.Q1})
		if err != nil {
			return 0, nil, 0, err
		}
		defer c.Close()
		conns[i] = c
	}
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := i; time.Now().Before(stop); q++ {
				t0 := time.Now()
				_, err := c.Exec(ctx, dashboardQueries[q%len(dashboardQueries)])
				mu.Lock()
				if err != nil {
					errs++
				} else {
					lat = append(lat, time.Since(t0))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	return len(lat), lat, errs, nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)].Round(100 * time.Microsecond)
}

// bulkScan reads all of lineitem through one session split over r nodes and
// returns rows per second and the rows read.
func bulkScan(ctx context.Context, addr, token string, r int) (float64, int64, error) {
	c, err := client.Connect(ctx, "quack:"+addr, client.Options{Token: token, Generation: wire.Q1})
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	if _, err := c.Exec(ctx, fmt.Sprintf("SET duckraft_split_scan = %d", r)); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	rows, err := c.Query(ctx, "SELECT * FROM lineitem")
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	var n int64
	for {
		chunk, err := rows.NextChunk()
		if err != nil {
			return 0, 0, err
		}
		if chunk == nil {
			break
		}
		n += int64(chunk.Rows)
	}
	return float64(n) / time.Since(start).Seconds(), n, nil
}

// cpuTimes returns each node's user plus system CPU time so far; a node
// whose time cannot be read counts 0.
func cpuTimes(nodes []*readNode) []time.Duration {
	out := make([]time.Duration, len(nodes))
	for i, n := range nodes {
		out[i], _ = processCPU(n.cmd.Process.Pid)
	}
	return out
}

func cpuTable(w io.Writer, nodes []*readNode, before, after []time.Duration, n int, unit string) {
	if n == 0 {
		return
	}
	fmt.Fprintf(w, "| node | role | %s |\n|---|---|---|\n", unit)
	var total time.Duration
	for i, node := range nodes {
		d := after[i] - before[i]
		total += d
		fmt.Fprintf(w, "| %s | %s | %.1f |\n", node.id, node.role, float64(d.Microseconds())/1000/float64(n))
	}
	fmt.Fprintf(w, "| all | | %.1f |\n\n", float64(total.Microseconds())/1000/float64(n))
}
