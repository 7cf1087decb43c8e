package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cliEnv makes the test binary run the CLI (TestMain): the shell under a
// terminal needs a process of its own, with the terminal as its
// controlling one, so that Ctrl-C is a real SIGINT from the line
// discipline.
const cliEnv = "DUCKRAFT_TEST_RUN_CLI"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(cliEnv); ok {
		os.Exit(run(strings.Split(args, "\x1f"), os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// terminal is the CLI running in a pseudo-terminal, as a user at a
// keyboard has it.
type terminal struct {
	t      *testing.T
	master *os.File
	cmd    *exec.Cmd
	mu     sync.Mutex
	screen bytes.Buffer
	exited chan struct{}
}

// openPTY opens a pseudo-terminal pair (Linux's /dev/ptmx).
func openPTY() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("pty number: %w", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 50, Col: 200}); err != nil {
		master.Close()
		slave.Close()
		return nil, nil, fmt.Errorf("window size: %w", err)
	}
	return master, slave, nil
}

// startTerminal runs the CLI with args in a pseudo-terminal.
func startTerminal(t *testing.T, args ...string) *terminal {
	t.Helper()
	master, slave, err := openPTY()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), cliEnv+"="+strings.Join(args, "\x1f"), "HOME="+t.TempDir())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	term := &terminal{t: t, master: master, cmd: cmd, exited: make(chan struct{})}
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := master.Read(buf)
			term.mu.Lock()
			term.screen.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() {
		cmd.Wait()
		close(term.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-term.exited
		master.Close()
		if t.Failed() {
			t.Logf("--- terminal ---\n%s", term.tail(4000))
		}
	})
	return term
}

// mark is how much the terminal has shown so far.
func (term *terminal) mark() int {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.screen.Len()
}

// tail is the last n bytes shown.
func (term *terminal) tail(n int) string {
	term.mu.Lock()
	defer term.mu.Unlock()
	b := term.screen.Bytes()
	return string(b[max(0, len(b)-n):])
}

// since is what the terminal has shown after mark m.
func (term *terminal) since(m int) string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return string(term.screen.Bytes()[m:])
}

// waitFor waits until the terminal shows want after mark m, and returns
// how long it took.
func (term *terminal) waitFor(m int, want string, within time.Duration) time.Duration {
	term.t.Helper()
	start := time.Now()
	for !strings.Contains(term.since(m), want) {
		if time.Since(start) > within {
			term.t.Fatalf("the terminal did not show %q within %v", want, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// typ types s.
func (term *terminal) typ(s string) {
	term.t.Helper()
	if _, err := term.master.Write([]byte(s)); err != nil {
		term.t.Fatal(err)
	}
}

// resize makes the terminal cols columns wide.
func (term *terminal) resize(cols uint16) {
	term.t.Helper()
	if err := unix.IoctlSetWinsize(int(term.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 50, Col: cols}); err != nil {
		term.t.Fatalf("window size: %v", err)
	}
}

// ctrlC is the interrupt character: the line discipline sends SIGINT to
// the foreground process while a statement runs (the terminal is not in
// raw mode then), and readline reads it as a key at the prompt.
const ctrlC = "\x03"

// shellBound is how long an interrupted statement, and the next one, may
// take to answer on a loaded machine; the scans interrupted run for
// minutes.
const shellBound = 15 * time.Second

// TestShellCtrlC drives the interactive shell through a pseudo-terminal:
// Ctrl-C during a scan that computes for minutes interrupts it on the
// server and prints "Interrupted", and the next statement answers at
// once; in csv mode Ctrl-C stops a large result's output; Ctrl-C on an
// empty prompt leaves, as in DuckDB's shell. Before, the shell printed a
// raw Go error, the server computed on, and csv output ignored Ctrl-C.
func TestShellCtrlC(t *testing.T) {
	addr := startServer(t)
	term := startTerminal(t, "--server", addr, "--token", token)
	term.waitFor(0, "D ", shellBound)

	m := term.mark()
	term.typ("SELECT sum(hash(i)) FROM range(100000000000) r(i);\r")
	time.Sleep(time.Second)
	term.typ(ctrlC)
	took := term.waitFor(m, "Interrupted", shellBound)
	if strings.Contains(term.since(m), "context canceled") {
		t.Errorf("the shell printed a Go error: %q", term.since(m))
	}
	m = term.mark()
	term.typ("SELECT 40 + 2 AS answer;\r")
	next := term.waitFor(m, "42", shellBound)
	t.Logf("Ctrl-C to Interrupted: %v; next statement: %v", took, next)

	t.Run("csv", func(t *testing.T) {
		term.typ(".mode csv\r")
		m := term.mark()
		term.typ("SELECT i FROM range(100000000000) r(i);\r")
		term.waitFor(m, "\r\n100000\r\n", shellBound)
		term.typ(ctrlC)
		term.waitFor(m, "Interrupted", shellBound)
		m = term.mark()
		term.typ("SELECT 43 AS answer;\r")
		term.waitFor(m, "43", shellBound)
		// The output stopped: nothing of the scan came after.
		time.Sleep(500 * time.Millisecond)
		if out := term.since(m); len(out) > 1000 {
			t.Fatalf("the output went on after Ctrl-C: %d bytes", len(out))
		}
	})

	t.Run("prompt", func(t *testing.T) {
		term.typ("SELECT 1")
		term.typ(ctrlC)
		m := term.mark()
		term.typ("SELECT 44 AS answer;\r")
		// The result, not the echo of the statement typed: a Ctrl-C
		// while it runs would interrupt it instead.
		term.waitFor(m, "\r\n44\r\n", shellBound)
		term.typ(ctrlC)
		select {
		case <-term.exited:
		case <-time.After(shellBound):
			t.Fatal("Ctrl-C on an empty prompt did not leave the shell")
		}
	})
}

// TestShellAtAKeyboard types what a user types into the interactive
// shell: a statement over several lines (the continuation prompt until
// DuckDB's parser sees it end, with a comment and a string literal whose
// line ends in ';' in between), DDL that prints nothing, the .tables
// and .schema commands; then, in a terminal narrowed to 80 columns,
// results wider than it: a nested value laid out over lines as DuckDB's
// shell lays it out, and wide characters cut with "…" at the terminal's
// width, the row count under the box.
func TestShellAtAKeyboard(t *testing.T) {
	addr := startServer(t)
	term := startTerminal(t, "--server", addr, "--token", token)
	term.waitFor(0, "D ", shellBound)

	steps := []struct {
		typed string
		shows string // after what was typed: the next prompt, or a result
		also  string // shown before it
	}{
		{"CREATE TABLE birds(\r", "· ", ""},
		{"  name VARCHAR, -- a comment that ends in ;\r", "· ", ""},
		{"  seen INTEGER);\r", "D ", ""},
		{"INSERT INTO birds VALUES ('wren', 1), ('kite;\r", "· ", ""},
		{"red', 2);\r", "D ", ""},
		// The literal kept its line break: 'kite;', a newline, 'red'.
		{"SELECT length(name) AS len FROM birds WHERE seen = 2;\r", "│     9 │", ""},
		{"SELECT seen FROM birds WHERE name = 'wren';\r", "│     1 │", ""},
		{".tables\r", "birds", ""},
		{".schema birds\r", "CREATE TABLE birds", ""},
		{"SELECT {'name': 'duck', 'tags': ['a', 'b', NULL], 'address': {'street': 'Main Street 1', 'city': 'Amsterdam'}, 'n': 12345} AS s, repeat('x', 60) AS t;\r",
			"└──────────────────────────────────────┴", "│     'street': Main Street 1,         │                                       │\r\n"},
		{"SELECT repeat('中', 50) AS wide FROM range(50);\r", "50 rows (40 shown)", "│ " + strings.Repeat("中", 37) + "…  │\r\n"},
	}
	for i, s := range steps {
		if i == 9 {
			term.resize(80)
		}
		m := term.mark()
		term.typ(s.typed)
		term.waitFor(m, s.shows, shellBound)
		out := term.since(m)
		if strings.Contains(out, "Error") {
			t.Fatalf("typed %q, the shell answered an error: %q", s.typed, out)
		}
		if !strings.Contains(out, s.also) {
			t.Fatalf("typed %q, the shell did not show %q: %q", s.typed, s.also, out)
		}
	}
}
