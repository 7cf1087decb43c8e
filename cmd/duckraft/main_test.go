package main

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/internal/buildinfo"
	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/engine"
)

const token = "cli-test-token"

func startServer(t *testing.T) string {
	t.Helper()
	db, err := engine.Open(t.TempDir()+"/cli.db", engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := node.New(node.Config{DB: db, Authenticator: node.TokenAuth{Token: token}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() {
		srv.Close()
		db.Close()
	})
	return "quack:" + l.Addr().String()
}

func TestCLI(t *testing.T) {
	addr := startServer(t)
	cases := []struct {
		name     string
		args     []string
		stdin    string
		code     int
		stdout   string
		stderrIn string
	}{
		{"csv", []string{"--format", "csv", "-c", "SELECT 42 AS answer, 'duck' AS s"}, "", 0, "answer,s\n42,duck\n", ""},
		{"json", []string{"--format", "json", "-c", "SELECT 1 AS i, 'x' AS s, NULL AS n"}, "", 0, "[\n{\"i\":1,\"s\":\"x\",\"n\":null}\n]\n", ""},
		{"duckbox", []string{"-c", "SELECT 7 AS seven"}, "", 0, "┌───────┐\n│ seven │\n│ int32 │\n├───────┤\n│     7 │\n└───────┘\n", ""},
		{"several statements in order", []string{"--format", "csv", "-c", "CREATE TABLE t AS SELECT * FROM range(1000) r(i)", "-c", "SELECT sum(i) FROM t"}, "", 0, "sum(i)\n499500\n", ""},
		{"server error exits 1", []string{"-c", "SELECT * FROM missing"}, "", 1, "", "Table with name missing does not exist"},
		{"bad token", []string{"--token", "wrong", "-c", "SELECT 1"}, "", 1, "", "Authentication failed"},
		{"bad format", []string{"--format", "xml", "-c", "SELECT 1"}, "", 2, "", "unknown output mode"},
		{"piped shell", []string{"--format", "csv"}, "SELECT 1\n+ 1 AS two;\n.mode json\nSELECT 3 AS three;\n.quit\n", 0, "two\n2\n[\n{\"three\":3}\n]\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"--server", addr, "--token", token}, tc.args...)
			code := run(args, strings.NewReader(tc.stdin), &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, errb.String())
			}
			if !strings.Contains(out.String(), tc.stdout) {
				t.Errorf("stdout %q lacks %q", out.String(), tc.stdout)
			}
			if !strings.Contains(errb.String(), tc.stderrIn) {
				t.Errorf("stderr %q lacks %q", errb.String(), tc.stderrIn)
			}
		})
	}
}

// TestVersion: --version names the build and exits 0, without a server.
func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--version"}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("--version: exit %d, stderr %q", code, stderr.String())
	}
	if want := "duckraft " + buildinfo.Version() + " (Go "; !strings.HasPrefix(stdout.String(), want) {
		t.Fatalf("--version printed %q, want it to start with %q", stdout.String(), want)
	}
}
