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
	"unicode"

	"github.com/duckraft/duckraft/internal/buildinfo"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/routing/classify"
	"golang.org/x/term"
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
	var keepGoing bool
	g, pos, code := parseCommand("", args, stderr, usage, func(fs *flag.FlagSet) {
		fs.Var(&sqls, "c", "SQL to run (repeatable); without -c an interactive shell starts")
		fs.BoolVar(&keepGoing, "keep-going", false, "run the statements after one that failed (the exit status is still 1)")
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
	l := &link{servers: g.endpoints, opts: client.Options{Token: g.token, Generation: wire.Generation(g.protocol)}, stderr: stderr}
	if err := l.dial(ctx, 0); err != nil {
		fmt.Fprintln(stderr, "duckraft:", err)
		return 1
	}
	defer l.close()
	s := &session{link: l, out: out, stderr: stderr, progress: isTerminal(os.Stderr), keepGoing: keepGoing}
	if len(sqls) == 0 {
		// The shell watches Ctrl-C per statement itself.
		stop()
		failed, err := s.shell(stdin)
		if err != nil {
			fmt.Fprintln(stderr, "duckraft:", err)
			return 1
		}
		if failed {
			return 1
		}
		return 0
	}
	failed := false
	for _, sql := range sqls {
		if !s.runText(ctx, sql) {
			failed = true
			if !keepGoing || ctx.Err() != nil {
				break
			}
		}
	}
	if failed {
		return 1
	}
	return 0
}

// terminalWidth asks the width of w's terminal, as duckbox does before
// each result (the terminal may have been resized); nil when w is not a
// terminal, where DuckDB's shell sets no width limit.
func terminalWidth(w io.Writer) func() int {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return func() int {
		cols, _, err := term.GetSize(int(f.Fd()))
		if err != nil || cols <= 0 {
			return minBoxWidth
		}
		return cols
	}
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
	// keepGoing runs the statements after one that failed.
	keepGoing bool
	// hinted is set once the hint about writes in a transaction was
	// given, for the transaction open.
	hinted bool
}

// runText runs the statements of text in order, as DuckDB's parser splits
// them, printing each result; a statement DuckDB's parser rejects fails
// with its parser error without reaching the server. The first failure
// stops the rest unless keepGoing; an interrupted statement stops them
// always. It reports whether every statement succeeded.
func (s *session) runText(ctx context.Context, text string) bool {
	stmts, err := splitStatements(text)
	if err != nil {
		s.report(err)
		return false
	}
	ok := true
	for _, st := range stmts {
		err := st.parseErr
		if err == nil {
			err = s.execute(ctx, st.text)
		}
		if err != nil {
			s.report(err)
			ok = false
			if !s.keepGoing || ctx.Err() != nil {
				return false
			}
		}
	}
	return ok
}

// execute runs one SQL text and prints its result.
//
// ctx ending (Ctrl-C) interrupts the statement on the server, whether it
// still computes its first rows or streams them: Query sends a CANCEL, and
// so does Rows.Cancel, which also stops the printing.
func (s *session) execute(ctx context.Context, sql string) error {
	start := time.Now()
	rows, class, err := s.link.query(ctx, sql)
	if err != nil {
		return err
	}
	defer rows.Close()
	if class != classify.Read {
		s.transactionHint(class)
	}
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
	if class == classify.Read {
		err = s.out.print(rows, p)
	} else {
		err = s.printNonEmpty(rows, p)
	}
	p.stop()
	if err != nil {
		return err
	}
	if s.timer {
		fmt.Fprintf(s.stderr, "Run Time: %.3fs\n", time.Since(start).Seconds())
	}
	return nil
}

// printNonEmpty prints rows unless it holds no row: DuckDB's shell prints
// nothing for a statement that returns nothing (DDL, SET, BEGIN), and
// the Quack answer to one is a result of no rows.
func (s *session) printNonEmpty(rows result, p *progressLine) error {
	for {
		c, err := rows.NextChunk()
		if err != nil || c == nil {
			return err
		}
		if c.Rows > 0 {
			return s.out.print(&peeked{result: rows, first: c}, p)
		}
	}
}

// peeked is a result whose first chunk was read ahead.
type peeked struct {
	result
	first *wire.DataChunk
}

func (p *peeked) NextChunk() (*wire.DataChunk, error) {
	if c := p.first; c != nil {
		p.first = nil
		return c, nil
	}
	return p.result.NextChunk()
}

// report prints a statement's error as DuckDB's shell does; a statement
// the user interrupted says so, not the Go error behind it.
func (s *session) report(err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, client.ErrCanceled) {
		fmt.Fprintln(s.stderr, "Interrupted")
		return
	}
	fmt.Fprintln(s.stderr, errorText(err))
}

// errorText words err as DuckDB's shell does ("Catalog Error: Table with
// name x does not exist!"): DuckDB's message as the server sent it, with
// its exception type in front, and duckraft's code on a line of its own
// when the server gave one (forbidden, not_leader, …).
func errorText(err error) string {
	se, ok := errors.AsType[*client.ServerError](err)
	if !ok {
		if msg := err.Error(); typed(msg) {
			return msg
		}
		return "Error: " + err.Error()
	}
	msg := se.Message
	switch {
	case typed(msg):
	case se.Type != "":
		msg = se.Type + " Error: " + msg
	default:
		msg = "Error: " + msg
	}
	if code, _, ok := outcome.ParseHeader(se.Code); ok {
		msg += "\n(duckraft code " + string(code) + ")"
	}
	return msg
}

// typed reports whether msg starts with DuckDB's exception type, as in
// "Parser Error: …" or "Catalog Error: …".
func typed(msg string) bool {
	head, _, ok := strings.Cut(msg, " Error: ")
	if !ok || head == "" {
		return false
	}
	for _, r := range head {
		if !unicode.IsLetter(r) && r != ' ' {
			return false
		}
	}
	return true
}

// transactionHint tells, once per transaction, that the writes of an open
// transaction take effect at COMMIT: duckraft collects them and applies
// them together, so until then their counts are not known and reads in
// the transaction do not see them (DuckDB alone would show both).
func (s *session) transactionHint(class classify.Class) {
	if !s.link.inTxn {
		s.hinted = false
		return
	}
	if class == classify.Write && !s.hinted {
		s.hinted = true
		fmt.Fprintln(s.stderr, "duckraft: in a transaction, writes are collected and applied at COMMIT: until then they count no rows and reads do not see them")
	}
}
