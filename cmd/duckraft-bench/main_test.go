package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestUsage: a command line that names no benchmark is an exit status 2
// with a message saying what to name, and --help prints the list.
func TestUsage(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"no benchmark", nil, 2, "", "usage: duckraft-bench bulk"},
		{"flags before the benchmark's name", []string{"--server", "quack:h", "writes"}, 2, "", "name the benchmark first"},
		{"unknown benchmark", []string{"writs"}, 2, "", `unknown benchmark "writs"`},
		{"help", []string{"--help"}, 0, "duckraft-bench writes [flags]", ""},
		{"a benchmark's help", []string{"writes", "--help"}, 0, "", "-duckraftd string"},
		{"a bad flag value", []string{"writes", "--clients", "0"}, 1, "", "--clients: bad count"},
		{"an empty server", []string{"writes", "--server", ""}, 1, "", "no server given"},
		{"an unknown balancer", []string{"failover", "--via", "squid"}, 1, "", `--via "squid": lb (nginx), nginx or haproxy`},
		{"a balancer and another mode", []string{"failover", "--via", "lb", "--mode", "transfer"}, 1, "", "--mode transfer is not possible"},
		{"a balancer and a deployment", []string{"failover", "--via", "haproxy", "--server", "quack:h"}, 1, "", "--via needs a local cluster"},
		{"a balancer and one client", []string{"failover", "--via", "nginx", "--clients", "1"}, 1, "", "--clients ≥ 2"},
		{"a balancer and another cluster", []string{"failover", "--via", "nginx", "--systems", "duckraft-5"}, 1, "", "--via runs duckraft-3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, %q on stdout and %q on stderr",
					code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}
