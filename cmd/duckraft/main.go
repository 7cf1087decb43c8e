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

const usage = `usage: duckraft [flags]                 interactive shell
       duckraft [flags] -c SQL [-c SQL]  run statements and exit
       duckraft status [--server S]      the cluster's members as one node sees them
       duckraft transfer-leader [--to ID] move leadership to another voter
       duckraft hash [--server S]        every member's applied index and state hash
       duckraft backup --out FILE        a backup of one member's database (a DuckDB file)
       duckraft bench bulk|writes        benchmarks (see duckraft bench)

flags:
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "bench":
			return runBench(args[1:], stdout, stderr)
		case "status":
			return runStatus(args[1:], stdout, stderr)
		case "transfer-leader":
			return runTransferLeader(args[1:], stdout, stderr)
		case "hash":
			return runHash(args[1:], stdout, stderr)
		case "backup":
			return runBackup(args[1:], stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("duckraft", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	server := fs.String("server", envOr("DUCKRAFT_SERVER", "quack:127.0.0.1:9494"), "server as quack:HOST[:PORT] (env DUCKRAFT_SERVER)")
	token := fs.String("token", os.Getenv("DUCKRAFT_TOKEN"), "authentication token (env DUCKRAFT_TOKEN)")
	var commands stringList
	fs.Var(&commands, "c", "SQL to run (repeatable); without -c an interactive shell starts")
	format := fs.String("format", "table", "output format: table, csv or json")
	protocol := fs.Int("protocol", 0, "Quack generation to speak: 1 or 3 (0: negotiate)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "duckraft: unexpected arguments %q\n", fs.Args())
		return 2
	}
	out, err := newPrinter(*format, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "duckraft:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	conn, err := client.Connect(ctx, *server, client.Options{Token: *token, Generation: wire.Generation(*protocol)})
	if err != nil {
		fmt.Fprintln(stderr, "duckraft:", err)
		return 1
	}
	defer conn.Close()
	s := &session{conn: conn, out: out, stderr: stderr, progress: isTerminal(os.Stderr)}
	if len(commands) == 0 {
		if err := s.shell(stdin); err != nil {
			fmt.Fprintln(stderr, "duckraft:", err)
			return 1
		}
		return 0
	}
	for _, sql := range commands {
		if err := s.execute(ctx, sql); err != nil {
			fmt.Fprintln(stderr, "Error:", err)
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
	conn     *client.Conn
	out      printer
	stderr   io.Writer
	timer    bool
	progress bool
}

// execute runs one SQL text and prints its result.
func (s *session) execute(ctx context.Context, sql string) error {
	start := time.Now()
	rows, err := s.conn.Query(ctx, sql)
	if err != nil {
		return err
	}
	defer rows.Close()
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
