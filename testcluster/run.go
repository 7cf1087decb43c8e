package testcluster

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/duckraft/duckraft/cmd/duckraftd/daemon"
)

// runner is one run of a node or router, from a start to its end: a
// duckraftd process, or a daemon inside the test process
// (Options.InProcess).
type runner interface {
	// running reports whether the run is alive; a paused process is.
	running() bool
	// kill ends the run abruptly and stop gracefully; both return once it
	// has ended, and do nothing after it has.
	kill()
	stop()
	// reloadTokens has the run read its tokens file again: SIGHUP to a
	// process, which handles it in its own time; Daemon.ReloadTokens
	// in-process.
	reloadTokens()
}

// process is a duckraftd process.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// startProcess runs bin with args, its output going to log, and waits until
// it listens on quackAddr.
func startProcess(t testing.TB, name, bin string, args []string, log *logBuffer, quackAddr string) *process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdout = log
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if conn, err := net.DialTimeout("tcp", quackAddr, 200*time.Millisecond); err == nil {
			conn.Close()
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited at start:\n%s", name, log.String())
		default:
		}
		if time.Now().After(deadline) {
			p.kill()
			t.Fatalf("%s did not listen on %s within 30s:\n%s", name, quackAddr, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signal sends sig; for SIGKILL and SIGTERM it waits for the process to
// exit, killing it after 30 s.
func (p *process) signal(sig syscall.Signal) {
	p.cmd.Process.Signal(sig)
	if sig != syscall.SIGKILL && sig != syscall.SIGTERM {
		return
	}
	if sig == syscall.SIGTERM {
		// A paused process must run to handle SIGTERM.
		p.cmd.Process.Signal(syscall.SIGCONT)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

func (p *process) kill()         { p.signal(syscall.SIGKILL) }
func (p *process) stop()         { p.signal(syscall.SIGTERM) }
func (p *process) reloadTokens() { p.signal(syscall.SIGHUP) }

// inProcess is a daemon running inside the test process: real Raft, files
// and sockets, without a process boundary.
type inProcess struct{ d *daemon.Daemon }

// startInProcess starts a daemon with cfg, logging to log at debug level as
// duckraftd does under testcluster.
func startInProcess(t testing.TB, name string, cfg daemon.Config, log *logBuffer) *inProcess {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := daemon.Start(cfg)
	if err != nil {
		t.Fatalf("start %s in-process: %v\n%s", name, err, log.String())
	}
	return &inProcess{d: d}
}

func (r *inProcess) running() bool {
	select {
	case <-r.d.Done():
		return false
	default:
		return true
	}
}

// kill crashes the daemon (daemon.Daemon.Crash): no gossip leave and no
// DuckDB checkpoint, unlike stop.
func (r *inProcess) kill()         { r.d.Crash() }
func (r *inProcess) stop()         { r.d.Close() }
func (r *inProcess) reloadTokens() { r.d.ReloadTokens() }

// logBuffer collects what a node logs: a process's output, or the log
// records of an in-process daemon's goroutines, while the test reads it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// restarting marks a restart of name in its log: what the previous run
// printed often says why it stopped.
func (l *logBuffer) restarting(name string) {
	fmt.Fprintf(l, "--- testcluster: restarting %s ---\n", name)
}
