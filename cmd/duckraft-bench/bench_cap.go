package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
)

// benchCap measures bulk scans of lineitem with a bandwidth proxy in front
// of every data node's Quack port (duckraftd --quack-advertise names the
// proxy, so the router reads through it), in two phases on one cluster of
// 3 voters and 3 replicas:
//   - caps lifted: a node's scan straight from it against the same scan
//     through the router, which passes the node's chunks through;
//   - each node capped at rate: the router's scan from one node against a
//     split scan over 3.
//
// Within a phase the two scans alternate (scanPair).
func benchCap(daemon string, rate int64, rows, scans int, stdout, stderr io.Writer) error {
	dir, err := os.MkdirTemp("", "duckraft-bench-cap-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	token := benchToken
	nodes, proxies, err := startReadCluster(daemon, dir, token, 3, 3, true)
	defer func() {
		stopReadCluster(nodes)
		for _, p := range proxies {
			p.Close()
		}
	}()
	if err != nil {
		return err
	}
	setRate := func(r int64) {
		for _, p := range proxies {
			p.SetRate(r)
		}
	}
	setRate(0)
	router := nodes[len(nodes)-1]
	ctx := context.Background()
	fmt.Fprintf(stderr, "cap: loading %d rows\n", rows)
	if err := loadLineitem(ctx, router.quack, token, rows); err != nil {
		return err
	}
	if err := waitApplied(nodes, token, 180*time.Second); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "## bench reads --cap %s: %d-row lineitem, 3 voters + 3 replicas, a proxy in front of each node's Quack port\n\n", fmtRate(rate), rows)
	fmt.Fprintf(stdout, "%s\n\n", machine())
	fmt.Fprintf(stdout, "Issue 15 part 5's goals: a scan through the router at least 0.9× the same scan straight "+
		"from a node, caps lifted; a split over 3 capped nodes at least 2.5× the router's scan from one capped node. "+
		"The client is the Q1 Go client, decoding every chunk. The two scans of a pair alternate, after one unmeasured "+
		"scan of each. CPU is utime+stime per scan, the data nodes' summed over all %d, idle ones included.\n\n", len(proxies))
	fmt.Fprintf(stdout, "| scan | proxies | M rows/s (median of %d) | ratio | CPU ms per scan: data nodes, router |\n|---|---|---|---|---|\n", scans)
	row := func(scan, proxies string, m scanMeasure, ratio string) {
		fmt.Fprintf(stdout, "| %s | %s | %.2f | %s | %.0f, %.0f |\n", scan, proxies, m.rate/1e6, ratio, m.nodeCPU, m.routerCPU)
	}
	// A replica, as the router picks for an unsplit scan.
	fmt.Fprintf(stderr, "cap: straight from %s and through the router, in turn\n", nodes[3].id)
	direct, via, err := scanPair(ctx, nodes, token, scans, scanSpec{nodes[3].quack, 1}, scanSpec{router.quack, 1})
	if err != nil {
		return err
	}
	row("straight from a node", "uncapped", direct, "1")
	row("through the router, one node", "uncapped", via, goalRatio(via.rate/direct.rate, 0.9, "straight"))
	setRate(rate)
	fmt.Fprintf(stderr, "cap: capped, through the router from one node and split over 3, in turn\n")
	one, three, err := scanPair(ctx, nodes, token, scans, scanSpec{router.quack, 1}, scanSpec{router.quack, 3})
	if err != nil {
		return err
	}
	row("through the router, one node", fmtRate(rate)+" per node", one, "1")
	row("through the router, split over 3", fmtRate(rate)+" per node", three, goalRatio(three.rate/one.rate, 2.5, "one node"))
	sent := make([]string, len(proxies))
	for i, p := range proxies {
		sent[i] = fmt.Sprintf("%s %.0f", nodes[i].id, float64(p.Sent())/1e6)
	}
	fmt.Fprintf(stdout, "\nMB each node sent through its proxy in all: %s.\n", strings.Join(sent, ", "))
	return nil
}

// scanSpec is a bulk scan of lineitem at addr, split over split nodes.
type scanSpec struct {
	addr  string
	split int
}

// scanMeasure is a scanSpec's median rate in rows/s and the CPU per scan,
// in ms, of the data nodes together and of the router.
type scanMeasure struct {
	rate, nodeCPU, routerCPU float64
}

// scanPair runs a and b in turn, scans times each after one unmeasured
// scan of each, so that a drift in the machine's load (other work on
// shared cores, the checkpoint after the load) leans on neither.
func scanPair(ctx context.Context, nodes []*readNode, token string, scans int, a, b scanSpec) (scanMeasure, scanMeasure, error) {
	var out [2]scanMeasure
	rates := [2][]float64{}
	for i := -1; i < scans; i++ {
		for k, sp := range []scanSpec{a, b} {
			before := cpuTimes(nodes)
			r, _, err := bulkScan(ctx, sp.addr, token, sp.split)
			if err != nil {
				return out[0], out[1], err
			}
			if i < 0 {
				continue
			}
			after := cpuTimes(nodes)
			for j := range nodes {
				ms := float64((after[j] - before[j]).Milliseconds()) / float64(scans)
				if nodes[j].role == "router" {
					out[k].routerCPU += ms
				} else {
					out[k].nodeCPU += ms
				}
			}
			rates[k] = append(rates[k], r)
		}
	}
	for k := range out {
		slices.Sort(rates[k])
		out[k].rate = rates[k][len(rates[k])/2]
	}
	return out[0], out[1], nil
}

// goalRatio renders a ratio against its goal for the table's ratio column.
// The ratio is cut, not rounded, to two places, so that a ratio shown as
// the goal has met it.
func goalRatio(ratio, goal float64, of string) string {
	ratio = math.Floor(ratio*100+1e-9) / 100
	met := "met"
	if ratio < goal {
		met = "**not met**"
	}
	return fmt.Sprintf("**%.2f** of %s (goal ≥ %g: %s)", ratio, of, goal, met)
}

func fmtRate(r int64) string { return fmt.Sprintf("%gMB/s", float64(r)/1e6) }

// loadLineitem creates the lineitem table through addr.
func loadLineitem(ctx context.Context, addr, token string, rows int) error {
	c, err := client.Connect(ctx, "quack:"+addr, client.Options{Token: token, Generation: wire.Q1})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Exec(ctx, strings.Replace(lineitemSQL, "ROWS", strconv.Itoa(rows), 1)); err != nil {
		return fmt.Errorf("create lineitem: %w", err)
	}
	return nil
}
