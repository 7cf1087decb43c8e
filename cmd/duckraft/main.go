// Command duckraft is the duckraft command-line client: it runs SQL against
// any Quack server (a duckraft node or DuckDB's own quack_serve) from the
// command line or an interactive shell.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/duckraft/duckraft/internal/buildinfo"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// stringList collects a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, "; ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

const usage = `usage: duckraft [flags]                   interactive shell
       duckraft --version                  this build's version
       duckraft [flags] -c SQL [-c SQL]    run statements and exit
       duckraft status [--json]            the cluster's members as one node sees them
       duckraft transfer-leader [--to ID]  move leadership to another voter
       duckraft node remove ID             take a node out of the cluster
       duckraft hash                       every member's applied index and state hash
       duckraft backup --out FILE          a backup of one member's database (a DuckDB file)

The flags --server, --token, --format and --protocol go before or after the
subcommand.

flags:
`

// commands are the subcommands' names.
var commands = []string{"bench", "status", "transfer-leader", "hash", "backup", "node"}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		fmt.Fprintf(stdout, "duckraft %s (Go %s)\n", buildinfo.Version(), buildinfo.GoVersion())
		return 0
	}
	name, args := splitCommand(args, commands)
	switch name {
	case "bench":
		// Scripts and notes written before the benchmarks had a command of
		// their own still say `duckraft bench`: point them at it.
		fmt.Fprintln(stderr, "duckraft: the benchmarks are a command of their own: duckraft-bench bulk|writes|reads|failover|lag|ingest|report (make build builds bin/duckraft-bench)")
		return 2
	case "status":
		return runStatus(args, stdout, stderr)
	case "transfer-leader":
		return runTransferLeader(args, stdout, stderr)
	case "hash":
		return runHash(args, stdout, stderr)
	case "backup":
		return runBackup(args, stdout, stderr)
	case "node":
		return runNode(args, stdout, stderr)
	}
	var sqls stringList
	g, pos, code := parseCommand("", args, stderr, usage, func(fs *flag.FlagSet) {
		fs.Var(&sqls, "c", "SQL to run (repeatable); without -c an interactive shell starts")
	})
	if g == nil {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "duckraft: unexpected arguments %q (commands: %s)\n", pos, strings.Join(commands, ", "))
		return 2
	}
	out, err := newPrinter(g.format, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "duckraft:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	l := &link{servers: g.servers.List(), opts: client.Options{Token: g.token, Generation: wire.Generation(g.protocol)}, stderr: stderr}
	if err := l.dial(ctx, 0); err != nil {
		fmt.Fprintln(stderr, "duckraft:", err)
		return 1
	}
	defer l.close()
	s := &session{link: l, out: out, stderr: stderr, progress: isTerminal(os.Stderr)}
	if len(sqls) == 0 {
		// The shell watches Ctrl-C per statement itself.
		stop()
		if err := s.shell(stdin); err != nil {
			fmt.Fprintln(stderr, "duckraft:", err)
			return 1
		}
		return 0
	}
	for _, sql := range sqls {
		if err := s.execute(ctx, sql); err != nil {
			s.report(err)
			return 1
		}
	}
	return 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// session is the CLI's state: the connection, the output mode and options.
type session struct {
	link     *link
	out      printer
	stderr   io.Writer
	timer    bool
	progress bool
}

// execute runs one SQL text and prints its result.
//
// ctx ending (Ctrl-C) interrupts the statement on the server, whether it
// still computes its first rows or streams them: Query sends a CANCEL, and
// so does Rows.Cancel, which also stops the printing.
func (s *session) execute(ctx context.Context, sql string) error {
	start := time.Now()
	rows, err := s.link.query(ctx, sql)
	if err != nil {
		return err
	}
	defer rows.Close()
	stopCancel := context.AfterFunc(ctx, func() {
		cctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		defer cancel()
		rows.Cancel(cctx)
	})
	defer stopCancel()
	var p *progressLine
	if s.progress {
		p = startProgress(s.stderr)
	}
	err = s.out.print(rows, p)
	p.stop()
	if err != nil {
		return err
	}
	if s.timer {
		fmt.Fprintf(s.stderr, "Run Time: %.3fs\n", time.Since(start).Seconds())
	}
	return nil
}

// report prints a statement's error as DuckDB's shell does; a statement
// the user interrupted says so, not the Go error behind it.
func (s *session) report(err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, client.ErrCanceled) {
		fmt.Fprintln(s.stderr, "Interrupted")
		return
	}
	fmt.Fprintln(s.stderr, "Error:", err)
}
