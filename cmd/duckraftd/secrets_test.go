package main

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/duckraft/duckraft/internal/syncbuf"
	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/testcluster"
)

// freeAddr is a loopback address no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// runDaemon starts a real duckraftd with args and env, waits until it
// printed its banner and became leader, and returns everything it wrote
// (stdout and stderr) by then; the process is stopped at the test's end.
func runDaemon(t *testing.T, env []string, args ...string) string {
	t.Helper()
	quack := freeAddr(t)
	args = append([]string{"--id", "n1", "--quack", quack, "--raft", freeAddr(t), "--gossip", freeAddr(t), "--http", freeAddr(t)}, args...)
	cmd := exec.Command(testcluster.Binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "connect: duckraft") || !strings.Contains(out.String(), "leader changed") {
		if time.Now().After(deadline) {
			t.Fatalf("duckraftd did not start within 60 s:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return out.String()
}

// TestNoTokenPrinted: duckraftd prints where its admin token is, never the
// token: a generated one is in <data>/token with mode 0600, and neither a
// generated one nor one given in DUCKRAFT_TOKEN appears in its banner or
// its logs, text or JSON. Before, the banner printed the token at every
// start, into the journal under the shipped unit.
func TestNoTokenPrinted(t *testing.T) {
	t.Run("generated", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		out := runDaemon(t, nil, "--data", data)
		path := filepath.Join(data, "token")
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", path, st.Mode().Perm())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		tok := strings.TrimSpace(string(b))
		if len(tok) < 16 {
			t.Fatalf("generated token %d characters long", len(tok))
		}
		if strings.Contains(out, tok) {
			t.Errorf("duckraftd printed its generated token:\n%s", out)
		}
		if !strings.Contains(out, path) {
			t.Errorf("duckraftd did not print the token's path %s:\n%s", path, out)
		}
	})
	t.Run("from the environment, JSON logs", func(t *testing.T) {
		const secret = "env-secret-token-4f1c9a0d5b7e"
		out := runDaemon(t, []string{"DUCKRAFT_TOKEN=" + secret}, "--data", filepath.Join(t.TempDir(), "data"), "--log-format", "json", "--log-level", "debug")
		if strings.Contains(out, secret) {
			t.Errorf("duckraftd printed the token of DUCKRAFT_TOKEN:\n%s", out)
		}
	})
}

// TestHelpShowsNoToken: --help prints every flag's default, and the
// token's stays empty whatever DUCKRAFT_TOKEN holds.
func TestHelpShowsNoToken(t *testing.T) {
	const secret = "help-secret-token-9a8b7c6d5e4f"
	t.Setenv("DUCKRAFT_TOKEN", secret)
	var help bytes.Buffer
	parseFlags([]string{"--help"}, &help)
	if !strings.Contains(help.String(), "--token") {
		t.Fatalf("--help lists no --token:\n%s", help.String())
	}
	if strings.Contains(help.String(), secret) {
		t.Errorf("--help shows DUCKRAFT_TOKEN's value")
	}
}

// TestDocsTokensFileLoads: the tokens file of docs/cli.md, comments and
// all, is one that --tokens loads, with the roles it shows.
func TestDocsTokensFileLoads(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	var file strings.Builder
	in := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && strings.HasPrefix(line, "# /etc/duckraft/tokens"):
			in = true
		case in && strings.HasPrefix(line, "```"):
			in = false
		}
		if in {
			file.WriteString(line + "\n")
		}
	}
	if file.Len() == 0 {
		t.Fatal("docs/cli.md has no tokens file example starting with # /etc/duckraft/tokens")
	}
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := tokens.Load(path)
	if err != nil {
		t.Fatalf("the example of docs/cli.md does not load: %v\n%s", err, file.String())
	}
	for _, r := range []tokens.Role{tokens.Read, tokens.Write, tokens.Admin} {
		if set.Count(r) != 1 {
			t.Errorf("%v tokens: %d, want 1", r, set.Count(r))
		}
	}
}
