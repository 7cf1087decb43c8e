package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/chzyer/readline"
	"golang.org/x/term"

	"github.com/duckraft/duckraft/node/sqlquote"
)

const shellHelp = `Enter SQL statements terminated by ';'. Commands:
  .mode MODE             output mode: duckbox (default), box, table, markdown,
                         csv, json, jsonlines, line or list
  .tables                the tables and views
  .schema [TABLE]        the CREATE statements of every table and view, or of one
  .timer on|off          print each statement's run time
  .help                  this text
  .quit                  leave (also Ctrl-D)
`

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// lineReader yields input lines; readline on a terminal, plain lines
// otherwise (so scripts can be piped in).
type lineReader interface {
	readLine(prompt string) (string, error)
	close()
}

type plainReader struct{ sc *bufio.Scanner }

func (p plainReader) readLine(string) (string, error) {
	if !p.sc.Scan() {
		if err := p.sc.Err(); err != nil {
			return "", err
		}
		return "", io.EOF
	}
	return p.sc.Text(), nil
}
func (plainReader) close() {}

type editReader struct{ rl *readline.Instance }

func (e editReader) readLine(prompt string) (string, error) {
	e.rl.SetPrompt(prompt)
	return e.rl.Readline()
}
func (e editReader) close() { e.rl.Close() }

func newLineReader(stdin io.Reader) (lineReader, error) {
	f, ok := stdin.(*os.File)
	if !ok || !isTerminal(f) {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		return plainReader{sc}, nil
	}
	history := ""
	if home, err := os.UserHomeDir(); err == nil {
		history = filepath.Join(home, ".duckraft_history")
	}
	rl, err := readline.NewEx(&readline.Config{HistoryFile: history, InterruptPrompt: "^C", EOFPrompt: ""})
	if err != nil {
		return nil, err
	}
	return editReader{rl}, nil
}

// shell reads statements until EOF or .quit. A statement may span lines:
// the text typed runs when it ends at a ';' that ends a statement
// (complete: not one in a string or a comment), each of its statements in
// turn. Dot commands take one line. On a terminal a failed statement
// leaves the shell at its prompt; from a script (input not a terminal) it
// stops the script unless keepGoing. failed reports whether a statement
// failed.
func (s *session) shell(stdin io.Reader) (failed bool, err error) {
	in, err := newLineReader(stdin)
	if err != nil {
		return false, err
	}
	defer in.close()
	_, interactive := in.(editReader)
	// Open DuckDB's parser before the first prompt: complete reads each
	// line with it before a statement's Ctrl-C handler is in place, so
	// its first use must not be the slow one.
	duckdbParser()
	if interactive {
		c := s.link.conn
		fmt.Fprintf(s.stderr, "duckraft: connected to %s (DuckDB %s, Quack %d). Enter .help for help.\n",
			c.ID()[:8], c.ServerVersion(), c.Generation())
	}
	var buf strings.Builder
	for {
		prompt := "D "
		if buf.Len() > 0 {
			prompt = "· "
		}
		line, err := in.readLine(prompt)
		if errors.Is(err, readline.ErrInterrupt) {
			// As DuckDB's shell: Ctrl-C drops what was typed, and on an
			// empty prompt leaves.
			if buf.Len() == 0 && line == "" {
				return failed, nil
			}
			buf.Reset()
			continue
		}
		if err == io.EOF {
			if strings.TrimSpace(buf.String()) != "" && !s.runInteractive(buf.String()) {
				failed = true
			}
			return failed, nil
		}
		if err != nil {
			return failed, err
		}
		trimmed := strings.TrimSpace(line)
		if buf.Len() == 0 && strings.HasPrefix(trimmed, ".") {
			quit, ok := s.dotCommand(trimmed)
			if !ok {
				failed = true
				if !interactive && !s.keepGoing {
					return failed, nil
				}
			}
			if quit {
				return failed, nil
			}
			continue
		}
		buf.WriteString(line)
		buf.WriteString("\n")
		if complete(buf.String()) {
			ok := s.runInteractive(buf.String())
			buf.Reset()
			if !ok {
				failed = true
				if !interactive && !s.keepGoing {
					return failed, nil
				}
			}
		}
	}
}

// runInteractive runs the statements of one text; Ctrl-C interrupts the
// one running on the server and stops its output and the rest, not the
// shell. It reports whether every statement succeeded.
func (s *session) runInteractive(sql string) bool {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return s.runText(ctx, sql)
}

// dotCommand runs one of the shell's commands; ok is false when it
// failed.
func (s *session) dotCommand(cmd string) (quit, ok bool) {
	f := strings.Fields(cmd)
	switch f[0] {
	case ".quit", ".exit":
		return true, true
	case ".help":
		fmt.Fprint(s.stderr, shellHelp)
	case ".timer":
		if len(f) != 2 || (f[1] != "on" && f[1] != "off") {
			fmt.Fprintln(s.stderr, "Error: usage: .timer on|off")
			return false, false
		}
		s.timer = f[1] == "on"
	case ".mode":
		if len(f) != 2 {
			fmt.Fprintf(s.stderr, "Error: usage: .mode %s\n", strings.Join(modes, "|"))
			return false, false
		}
		w := writerOf(s.out)
		p, err := newPrinter(f[1], w)
		if err != nil {
			fmt.Fprintln(s.stderr, "Error:", err)
			return false, false
		}
		s.out = p
	case ".tables":
		if len(f) != 1 {
			fmt.Fprintln(s.stderr, "Error: usage: .tables")
			return false, false
		}
		return false, s.tables()
	case ".schema":
		if len(f) > 2 {
			fmt.Fprintln(s.stderr, "Error: usage: .schema [TABLE]")
			return false, false
		}
		table := ""
		if len(f) == 2 {
			table = f[1]
		}
		return false, s.schema(table)
	default:
		fmt.Fprintf(s.stderr, "Error: unknown command or invalid arguments: %q. Enter \".help\" for help\n", strings.TrimPrefix(f[0], "."))
		return false, false
	}
	return false, true
}

// catalogQuery runs a query of the catalog and returns its first column.
func (s *session) catalogQuery(sql string) ([]string, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rows, _, err := s.link.query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	err = eachRow(rows, nil, func(rec []string) error {
		out = append(out, rec[0])
		return nil
	})
	return out, err
}

// tables prints the names of the tables and views, in columns across the
// output as DuckDB's .tables does.
func (s *session) tables() bool {
	names, err := s.catalogQuery(`SELECT name FROM (
  SELECT table_name AS name FROM duckdb_tables() WHERE NOT internal AND NOT temporary AND database_name = current_database()
  UNION SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary AND database_name = current_database()
) ORDER BY name`)
	if err != nil {
		s.report(err)
		return false
	}
	if len(names) == 0 {
		return true
	}
	w := writerOf(s.out)
	colWidth := 0
	for _, n := range names {
		colWidth = max(colWidth, width(n))
	}
	lineWidth := 120
	if tw := terminalWidth(w); tw != nil {
		lineWidth = tw()
	}
	perLine := max(1, (lineWidth+2)/(colWidth+2))
	lines := (len(names) + perLine - 1) / perLine
	var b strings.Builder
	for i := range lines {
		for k := i; k < len(names); k += lines {
			if k > i {
				b.WriteString("  ")
			}
			b.WriteString(names[k])
			if k+lines < len(names) {
				b.WriteString(strings.Repeat(" ", colWidth-width(names[k])))
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprint(w, b.String())
	return true
}

// schema prints the CREATE statements of the tables and views (of table
// alone when given), each ending in ';'.
func (s *session) schema(table string) bool {
	where := ""
	if table != "" {
		where = " AND name = " + sqlquote.Literal(table)
	}
	stmts, err := s.catalogQuery(`SELECT sql FROM (
  SELECT table_name AS name, sql, 0 AS kind FROM duckdb_tables() WHERE NOT internal AND database_name = current_database()
  UNION ALL SELECT view_name, sql, 1 FROM duckdb_views() WHERE NOT internal AND database_name = current_database()
  UNION ALL SELECT table_name, sql, 2 FROM duckdb_indexes() WHERE database_name = current_database() AND sql IS NOT NULL
) WHERE true` + where + ` ORDER BY kind, name`)
	if err != nil {
		s.report(err)
		return false
	}
	w := writerOf(s.out)
	for _, st := range stmts {
		st = strings.TrimRight(strings.TrimSpace(st), ";")
		fmt.Fprintln(w, st+";")
	}
	return true
}
