package main

import (
	"bytes"
	"flag"
	"slices"
	"testing"
)

// TestArgumentsAnywhere: the global flags parse before and after the
// subcommand, and between its positional arguments.
func TestArgumentsAnywhere(t *testing.T) {
	t.Setenv("DUCKRAFT_SERVER", "")
	t.Setenv("DUCKRAFT_TOKEN", "")
	cases := []struct {
		name    string
		args    []string
		command string
		server  string
		token   string
		to      string
		pos     []string
	}{
		{"flags before", []string{"--server", "quack:h:1", "--token", "t", "status"}, "status", "quack:h:1", "t", "", nil},
		{"flags after", []string{"status", "--server", "quack:h:1", "--token=t"}, "status", "quack:h:1", "t", "", nil},
		{"flags on both sides", []string{"-server=quack:h:1", "transfer-leader", "--to", "n2", "--token", "t"}, "transfer-leader", "quack:h:1", "t", "n2", nil},
		{"between positional arguments", []string{"--token", "t", "node", "remove", "--server", "quack:h:1", "n3"}, "node", "quack:h:1", "t", "", []string{"remove", "n3"}},
		{"a value that names a command", []string{"--token", "status", "hash"}, "hash", "quack:127.0.0.1:9494", "status", "", nil},
		{"SQL that names a command", []string{"-c", "status", "--server", "quack:h:1"}, "", "quack:h:1", "", "", nil},
		{"after --", []string{"node", "--token", "t", "--", "remove", "--server"}, "node", "quack:127.0.0.1:9494", "t", "", []string{"remove", "--server"}},
		{"no command", []string{"--format", "csv"}, "", "quack:127.0.0.1:9494", "", "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name, rest := splitCommand(tc.args, commands)
			if name != tc.command {
				t.Fatalf("command %q, want %q", name, tc.command)
			}
			var to string
			var sqls stringList
			var stderr bytes.Buffer
			g, pos, _ := parseCommand(name, rest, &stderr, usage, func(fs *flag.FlagSet) {
				fs.StringVar(&to, "to", "", "")
				fs.Var(&sqls, "c", "")
			})
			if g == nil {
				t.Fatalf("parse failed: %s", stderr.String())
			}
			if g.endpoints[0].name != tc.server || g.token != tc.token || to != tc.to || !slices.Equal(pos, tc.pos) {
				t.Errorf("server %q token %q to %q args %q; want %q %q %q %q", g.endpoints[0].name, g.token, to, pos, tc.server, tc.token, tc.to, tc.pos)
			}
		})
	}
}

// TestArgumentErrors: a misplaced or unknown argument is an exit status 2
// with a message, never a command run with it ignored.
func TestArgumentErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"status", "--verbose"}, "flag provided but not defined: -verbose"},
		{"stray argument", []string{"status", "extra"}, `arguments ["extra"]`},
		{"node without subcommand", []string{"node"}, "want 2"},
		{"node remove without id", []string{"node", "remove"}, "want 2"},
		{"unknown node subcommand", []string{"node", "add", "n4"}, `unknown subcommand "add"`},
		{"status as csv", []string{"status", "--format", "csv"}, "status prints a table or json"},
		{"unknown command", []string{"statsu"}, `unexpected arguments ["statsu"]`},
		{"the benchmarks' old place", []string{"--server", "quack:h", "bench", "writes"}, "duckraft-bench bulk|writes"},
		{"an empty server", []string{"status", "--server", " , "}, "no server given"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, nil, &stdout, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2; stderr %q", code, stderr.String())
			}
			if !bytes.Contains(stderr.Bytes(), []byte(tc.want)) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.want)
			}
		})
	}
}
