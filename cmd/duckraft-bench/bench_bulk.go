package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/duckraft/duckraft/node/client"
)

// bulkResult is bench bulk's answer: one point per read path.
type bulkResult struct {
	Rows  int         `json:"rows"`
	Runs  int         `json:"runs"`
	Paths []bulkPoint `json:"paths"`
}

type bulkPoint struct {
	Path       string  `json:"path"`
	System     string  `json:"system"`
	Seconds    float64 `json:"seconds"`
	RowsPerSec float64 `json:"rows_per_sec"`
	MBPerSec   float64 `json:"mb_per_sec"`
	ClientRSS  int64   `json:"client_rss_bytes"`
	ServerRSS  int64   `json:"server_rss_bytes,omitempty"`
}

// bulkPath is one way to read the table: the scan child's arguments, and
// the server process whose memory to report, if local.
type bulkPath struct {
	point  bulkPoint
	args   []string
	server *benchNode
}

// benchBulk times SELECT * of the same lineitem-shaped table along each
// path, each scan in a child process so that its peak RSS is its own, the
// paths alternating run by run.
func benchBulk(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("duckraft-bench bulk", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bf benchFlags
	bf.register(fs, "duckraft-1,duckraft-3,duckdb")
	rows := fs.Int("rows", 3_000_000, "rows in the table")
	runs := fs.Int("runs", 3, "runs of each scan; the median is reported")
	protocol := fs.Int("protocol", 1, "Quack generation the client speaks (1 or 3)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rows < 1 || *runs < 1 {
		return errors.New("--rows and --runs must be positive")
	}
	ctx := context.Background()
	work, cleanup, err := benchWorkDir("duckraft-bench-bulk-")
	if err != nil {
		return err
	}
	defer cleanup()
	var paths []bulkPath
	quackPath := func(name, server, token string, n *benchNode) bulkPath {
		return bulkPath{
			point:  bulkPoint{Path: fmt.Sprintf("%s over Quack (Q%d, Go client)", name, *protocol), System: name},
			args:   []string{"--mode", "quack", "--server", server, "--token", token, "--protocol", strconv.Itoa(*protocol)},
			server: n,
		}
	}
	pgPath := func() (bulkPath, error) {
		fmt.Fprintf(stderr, "bench: loading %d rows into PostgreSQL\n", *rows)
		if err := pgLoadLineitem(ctx, bf.pg, *rows); err != nil {
			return bulkPath{}, err
		}
		return bulkPath{point: bulkPoint{Path: "postgres over pgx (binary protocol)", System: "postgres"}, args: []string{"--mode", "pg", "--dsn", bf.pg}}, nil
	}
	if servers := bf.servers.List(); len(servers) > 0 {
		d, err := remoteDeployment(servers, bf.token)
		if err != nil {
			return err
		}
		if err := ensureLineitem(ctx, d, *rows); err != nil {
			return err
		}
		for _, s := range servers {
			paths = append(paths, quackPath("duckraft "+s, s, bf.token, nil))
		}
		if bf.pg != "" {
			p, err := pgPath()
			if err != nil {
				return err
			}
			paths = append(paths, p)
		}
	} else {
		systems, err := parseSystems(bf.systems, bf.pg)
		if err != nil {
			return err
		}
		for _, sys := range systems {
			switch sys.kind {
			case "duckraft":
				dir := filepath.Join(work, sys.String())
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
				fmt.Fprintf(stderr, "bench: starting %s and loading %d rows\n", sys, *rows)
				d, err := localDeployment(bf, dir, sys.nodes)
				if err != nil {
					return err
				}
				defer d.close()
				d.name = sys.String()
				if err := ensureLineitem(ctx, d, *rows); err != nil {
					return err
				}
				// Read from a follower where there is one: any node
				// serves the scan, and the leader is busiest.
				n := d.nodes[len(d.nodes)-1]
				paths = append(paths, quackPath(sys.String(), "quack:"+n.quack, d.token, n))
			case "duckdb":
				local := filepath.Join(work, "local.db")
				fmt.Fprintf(stderr, "bench: generating %d rows in a local DuckDB file\n", *rows)
				if err := generate(local, *rows); err != nil {
					return err
				}
				paths = append(paths, bulkPath{point: bulkPoint{Path: "in-process duckdb-go Arrow", System: "duckdb"}, args: []string{"--mode", "arrow", "--db", local}})
			case "postgres":
				p, err := pgPath()
				if err != nil {
					return err
				}
				paths = append(paths, p)
			}
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	res := &bulkResult{Rows: *rows, Runs: *runs}
	rep := &benchReport{Bench: "bulk", Machine: describeMachine(ctx, bf.pg), Bulk: res}
	results := make([][]scanReport, len(paths))
	prog := newBenchProgress(stderr, time.Duration(*runs*len(paths))*time.Second)
	defer prog.finish()
	for run := range *runs {
		for i, p := range paths {
			prog.begin(fmt.Sprintf("bulk: %s, run %d of %d", p.point.Path, run+1, *runs), time.Second)
			r, err := runScan(self, append(p.args, "--query", "SELECT * FROM lineitem")...)
			prog.end()
			if err != nil {
				return err
			}
			if r.Rows != int64(*rows) {
				return fmt.Errorf("%s read %d rows, want %d", p.point.Path, r.Rows, *rows)
			}
			results[i] = append(results[i], r)
		}
	}
	prog.finish()
	for i, p := range paths {
		m := median(results[i])
		pt := p.point
		pt.Seconds, pt.RowsPerSec, pt.MBPerSec = m.Seconds, float64(m.Rows)/m.Seconds, float64(m.Bytes)/m.Seconds/1e6
		pt.ClientRSS = maxRSS(results[i])
		if p.server != nil {
			pt.ServerRSS = peakRSS(p.server.cmd.Process.Pid)
		}
		res.Paths = append(res.Paths, pt)
	}
	return rep.print(stdout, bf.json)
}

// ensureLineitem makes the deployment hold lineitem with rows rows: it
// creates the table when missing and refuses one of another size rather
// than drop a deployment's table.
func ensureLineitem(ctx context.Context, d *deployment, rows int) error {
	c, err := d.connect(ctx, 0)
	if err != nil {
		return err
	}
	defer c.Close()
	n, err := countRows(ctx, c, "lineitem")
	switch {
	case err == nil && n == int64(rows):
		return nil
	case err == nil:
		return fmt.Errorf("%s: lineitem has %d rows, not --rows %d: drop it or pass --rows %d", d.name, n, rows, n)
	}
	if _, err := c.Exec(ctx, strings.Replace(lineitemSQL, "ROWS", strconv.Itoa(rows), 1)); err != nil {
		return fmt.Errorf("%s: create lineitem: %w", d.name, err)
	}
	// Every node answers the scan from its own copy: wait until each has
	// applied the table.
	if d.nodes != nil {
		return waitBenchApplied(d, 5*time.Minute)
	}
	return nil
}

func countRows(ctx context.Context, c *client.Conn, table string) (int64, error) {
	rows, err := c.Query(ctx, "SELECT count(*) FROM "+table)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	if !rows.Next() {
		return 0, fmt.Errorf("count(*) of %s: no row: %v", table, rows.Err())
	}
	v, err := rows.Values()
	if err != nil {
		return 0, err
	}
	switch n := v[0].(type) {
	case int64:
		return n, nil
	case uint64:
		return int64(n), nil
	}
	return 0, fmt.Errorf("count(*) of %s: a %T", table, v[0])
}

// waitBenchApplied waits until every node of a local cluster has applied
// what the leader committed.
func waitBenchApplied(d *deployment, timeout time.Duration) error {
	ok := pollUntil(timeout, 200*time.Millisecond, func() bool {
		var top, low uint64 = 0, ^uint64(0)
		for _, n := range d.nodes {
			st, err := nodeStatus(n.quack, d.token)
			if err != nil {
				return false
			}
			top, low = max(top, st.Commit), min(low, st.Applied)
		}
		return top > 0 && low >= top
	})
	if !ok {
		return fmt.Errorf("%s: nodes did not catch up within %s", d.name, timeout)
	}
	return nil
}

func bulkTable(b *strings.Builder, r *bulkResult) {
	fmt.Fprintln(b, "| path | seconds | M rows/s | MB/s | client peak RSS | server peak RSS |")
	fmt.Fprintln(b, "|---|---|---|---|---|---|")
	for _, p := range r.Paths {
		server := ""
		if p.ServerRSS > 0 {
			server = mib(p.ServerRSS)
		}
		fmt.Fprintf(b, "| %s | %.3f | %.2f | %.0f | %s | %s |\n", p.Path, p.Seconds, p.RowsPerSec/1e6, p.MBPerSec, mib(p.ClientRSS), server)
	}
}
