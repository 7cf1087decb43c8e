// Command duckraft-bench is duckraft's benchmark lab: it loads a
// deployment (or local clusters it starts from a duckraftd binary) with
// writes, reads, bulk scans, ingests, failovers and lag measurements, side
// by side with in-process DuckDB and PostgreSQL, and turns the results
// into docs/benchmarks.md's generated section and its plots. It is a
// command of its own so that the operator's CLI (cmd/duckraft) links
// neither DuckDB, PostgreSQL's driver, the plotting library nor the test
// clusters' bandwidth proxy.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: duckraft-bench bulk [flags]       SELECT * of a lineitem-shaped table: duckraft, in-process DuckDB (Arrow), PostgreSQL (pgx)
       duckraft-bench writes [flags]     single-row INSERT transactions: tx/s, p50, p99 at each client count
       duckraft-bench reads [flags]      dashboard aggregates and split scans through a router
       duckraft-bench failover [flags]   write unavailability when the leader is killed, stopped or transferred;
                                         with --via nginx|haproxy, what clients behind one endpoint see when a node dies
       duckraft-bench lag [flags]        replication lag (leader commit against each follower's applied) under writes
       duckraft-bench ingest [flags]     CREATE TABLE AS and INSERT … SELECT of a lineitem-shaped table, against a local DuckDB file
       duckraft-bench report [flags] FILE.json...  docs/benchmarks.md's generated section and its plots

Each benchmark but reads runs against --server (a deployment's nodes or router, with --token) or,
without it, against local clusters it starts; see duckraft-bench NAME --help.
`

// run runs the benchmark args names and returns the exit status: 2 for a
// usage error, 1 for a failed benchmark.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "bulk":
		err = benchBulk(args[1:], stdout, stderr)
	case "writes":
		err = benchWrites(args[1:], stdout, stderr)
	case "reads":
		err = benchReads(args[1:], stdout, stderr)
	case "failover":
		err = benchFailover(args[1:], stdout, stderr)
	case "lag":
		err = benchLag(args[1:], stdout, stderr)
	case "ingest":
		err = benchIngest(args[1:], stdout, stderr)
	case "report":
		err = benchReportCmd(args[1:], stdout, stderr)
	case scanCommand:
		err = benchScan(args[1:], stdout)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		if strings.HasPrefix(args[0], "-") {
			// The flags, --server and --token among them, are each
			// benchmark's own.
			fmt.Fprintln(stderr, "duckraft-bench: name the benchmark first: duckraft-bench bulk|writes|reads|failover|lag|ingest|report [--server S --token T] [flags]")
		} else {
			fmt.Fprintf(stderr, "duckraft-bench: unknown benchmark %q\n", args[0])
		}
		return 2
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintln(stderr, "duckraft-bench:", err)
		return 1
	}
	return 0
}
