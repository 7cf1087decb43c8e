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
)

const shellHelp = `Enter SQL statements terminated by ';'. Commands:
  .mode table|csv|json   output format
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

// shell reads statements until EOF or .quit. A statement may span lines and
// ends at a ';' at the end of a line; dot commands take one line.
func (s *session) shell(stdin io.Reader) error {
	in, err := newLineReader(stdin)
	if err != nil {
		return err
	}
	defer in.close()
	if _, ok := in.(editReader); ok {
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
				return nil
			}
			buf.Reset()
			continue
		}
		if err == io.EOF {
			if strings.TrimSpace(buf.String()) != "" {
				s.runInteractive(buf.String())
			}
			return nil
		}
		if err != nil {
			return err
		}
		trimmed := strings.TrimSpace(line)
		if buf.Len() == 0 && strings.HasPrefix(trimmed, ".") {
			if quit := s.dotCommand(trimmed); quit {
				return nil
			}
			continue
		}
		buf.WriteString(line)
		buf.WriteString("\n")
		if strings.HasSuffix(trimmed, ";") {
			s.runInteractive(buf.String())
			buf.Reset()
		}
	}
}

// runInteractive runs one statement; Ctrl-C interrupts it on the server
// and stops its output, not the shell.
func (s *session) runInteractive(sql string) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := s.execute(ctx, sql); err != nil {
		s.report(err)
	}
}

func (s *session) dotCommand(cmd string) (quit bool) {
	f := strings.Fields(cmd)
	switch f[0] {
	case ".quit", ".exit":
		return true
	case ".help":
		fmt.Fprint(s.stderr, shellHelp)
	case ".timer":
		if len(f) != 2 || (f[1] != "on" && f[1] != "off") {
			fmt.Fprintln(s.stderr, "usage: .timer on|off")
			return false
		}
		s.timer = f[1] == "on"
	case ".mode":
		if len(f) != 2 {
			fmt.Fprintln(s.stderr, "usage: .mode table|csv|json")
			return false
		}
		p, err := newPrinter(f[1], outputOf(s.out))
		if err != nil {
			fmt.Fprintln(s.stderr, "Error:", err)
			return false
		}
		s.out = p
	default:
		fmt.Fprintf(s.stderr, "Error: unknown command %s (try .help)\n", f[0])
	}
	return false
}

func outputOf(p printer) io.Writer {
	switch p := p.(type) {
	case tablePrinter:
		return p.w
	case csvPrinter:
		return p.w
	case jsonPrinter:
		return p.w
	}
	return os.Stdout
}
