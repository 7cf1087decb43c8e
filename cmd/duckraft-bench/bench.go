package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/duckraft/duckraft/internal/freeport"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/wire"
)

// lineitemSQL generates a table with TPC-H lineitem's 16 columns and types.
const lineitemSQL = `CREATE TABLE lineitem AS
SELECT
  (i // 4 + 1)::BIGINT AS l_orderkey,
  (i * 7919 % 200000 + 1)::BIGINT AS l_partkey,
  (i * 104729 % 10000 + 1)::BIGINT AS l_suppkey,
  (i % 7 + 1)::INTEGER AS l_linenumber,
  ((i % 50) + 1)::DECIMAL(15,2) AS l_quantity,
  ((i * 37 % 100000) / 100.0 + 900)::DECIMAL(15,2) AS l_extendedprice,
  ((i % 11) / 100.0)::DECIMAL(15,2) AS l_discount,
  ((i % 9) / 100.0)::DECIMAL(15,2) AS l_tax,
  (['A','N','R'])[i % 3 + 1] AS l_returnflag,
  (['F','O'])[i % 2 + 1] AS l_linestatus,
  (DATE '1992-01-02' + (i % 2526)::INTEGER) AS l_shipdate,
  (DATE '1992-01-31' + (i % 2466)::INTEGER) AS l_commitdate,
  (DATE '1992-01-03' + (i % 2555)::INTEGER) AS l_receiptdate,
  (['DELIVER IN PERSON','COLLECT COD','NONE','TAKE BACK RETURN'])[i % 4 + 1] AS l_shipinstruct,
  (['REG AIR','AIR','RAIL','SHIP','TRUCK','MAIL','FOB'])[i % 7 + 1] AS l_shipmode,
  'carefully regular ' || (['deposits','requests','accounts','packages','ideas'])[i % 5 + 1] || ' haggle ' || (i % 1000)::VARCHAR AS l_comment
FROM range(ROWS) t(i)`

// scanReport is what one scan child prints.
type scanReport struct {
	Rows    int64   `json:"rows"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	RSS     int64   `json:"rss_bytes"`
}

func generate(path string, rows int) error {
	db, err := engine.Open(path, engine.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Connect()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, strings.Replace(lineitemSQL, "ROWS", strconv.Itoa(rows), 1)); err != nil {
		return fmt.Errorf("generate lineitem: %w", err)
	}
	_, err = conn.Exec(ctx, "CHECKPOINT")
	return err
}

// mustFreeAddr returns a loopback address for a daemon the bench starts.
func mustFreeAddr() string {
	a, err := freeport.Addr()
	if err != nil {
		panic(err)
	}
	return a
}

func waitForServer(addr, token string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := client.Connect(ctx, "quack:"+addr, client.Options{Token: token, Generation: wire.Q1})
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server at %s not ready: %w", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scanCommand is the hidden subcommand of the child process a bulk scan
// runs in.
const scanCommand = "scan"

// runScan runs one scan in a child process, so its peak RSS is its own.
func runScan(self string, args ...string) (scanReport, error) {
	cmd := exec.Command(self, append([]string{scanCommand}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return scanReport{}, fmt.Errorf("scan %v: %w", args, err)
	}
	var r scanReport
	if err := json.Unmarshal(out, &r); err != nil {
		return scanReport{}, fmt.Errorf("scan output %q: %w", out, err)
	}
	return r, nil
}

// benchScan is the child side: one timed scan, reported as JSON.
func benchScan(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("duckraft-bench scan", flag.ContinueOnError)
	mode := fs.String("mode", "quack", "quack or arrow")
	server := fs.String("server", "", "Quack server (mode quack)")
	token := fs.String("token", "", "token (mode quack)")
	protocol := fs.Int("protocol", 1, "Quack generation (mode quack)")
	db := fs.String("db", "", "DuckDB file (mode arrow)")
	dsn := fs.String("dsn", "", "PostgreSQL connection string (mode pg)")
	query := fs.String("query", "", "query to scan")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var r scanReport
	var err error
	switch *mode {
	case "quack":
		r, err = scanQuack(*server, *token, wire.Generation(*protocol), *query)
	case "arrow":
		r, err = scanArrow(*db, *query)
	case "pg":
		r, err = scanPG(*dsn, *query)
	default:
		return fmt.Errorf("unknown mode %q", *mode)
	}
	if err != nil {
		return err
	}
	// The high-water mark of this process's own memory: the rusage of a
	// child counts the parent's at fork, which holds a generated table.
	r.RSS = peakRSS(os.Getpid())
	return json.NewEncoder(stdout).Encode(r)
}

func scanQuack(server, token string, g wire.Generation, query string) (scanReport, error) {
	ctx := context.Background()
	c, err := client.Connect(ctx, server, client.Options{Token: token, Generation: g})
	if err != nil {
		return scanReport{}, err
	}
	defer c.Close()
	start := time.Now()
	rows, err := c.Query(ctx, query)
	if err != nil {
		return scanReport{}, err
	}
	defer rows.Close()
	var n int64
	for {
		chunk, err := rows.NextChunk()
		if err != nil {
			return scanReport{}, err
		}
		if chunk == nil {
			break
		}
		n += int64(chunk.Rows)
	}
	return scanReport{Rows: n, Bytes: c.BytesReceived(), Seconds: time.Since(start).Seconds()}, nil
}

func median(rs []scanReport) scanReport {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b scanReport) int {
		switch {
		case a.Seconds < b.Seconds:
			return -1
		case a.Seconds > b.Seconds:
			return 1
		}
		return 0
	})
	return s[len(s)/2]
}

func maxRSS(rs []scanReport) int64 {
	var m int64
	for _, r := range rs {
		m = max(m, r.RSS)
	}
	return m
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// peakRSS reads a live process's high-water resident set size.
func peakRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// machine describes the machine a benchmark ran on.
func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if line, _, ok := strings.Cut(string(b), "\n"); ok {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
			}
		}
	}
	return fmt.Sprintf("Machine: %s, %d cores%s, %s %s/%s, %s", cpu, runtime.NumCPU(), mem,
		runtime.Version(), runtime.GOOS, runtime.GOARCH, time.Now().UTC().Format("2006-01-02"))
}

var errNoArrow = errors.New("built without the duckdb_arrow tag: build with `make build`")
