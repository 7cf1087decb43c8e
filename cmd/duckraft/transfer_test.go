package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

// TestTransferLeader moves leadership with the CLI, asking through a
// follower, as an operator would before taking the leader's host down.
func TestTransferLeader(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitForLeader(t, 20*time.Second)
	followers := c.Others(leader)
	target, via := followers[0], followers[1]
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"transfer-leader", "--server", "quack:" + via.QuackAddr}, args...), strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	start := time.Now()
	code, out, errOut := cli("--token", testcluster.Token, "--to", target.ID)
	took := time.Since(start)
	// The old leader names its successor once it has heard from it, and
	// waits for that at most two election timeouts (1 s by default): only
	// a slower handover may leave the successor unnamed.
	switch want := "leadership moved from " + leader.ID + " to " + target.ID + "\n"; {
	case code == 0 && out == "leadership moved from "+leader.ID+" to \n" && took >= time.Second:
		t.Logf("transfer-leader took %v and named no successor: the old leader had not heard from it yet", took)
	case code != 0 || out != want:
		t.Fatalf("transfer-leader --to %s: exit %d, stdout %q (want %q), stderr %q", target.ID, code, out, want, errOut)
	}
	if l := c.WaitForLeader(t, 10*time.Second); l != target {
		t.Fatalf("leader after the transfer is %s, want %s", l.ID, target.ID)
	}
	conn := via.Client(t)
	if _, err := conn.Exec(t.Context(), "CREATE TABLE after_transfer(i INTEGER)"); err != nil {
		t.Fatalf("write after the transfer: %v", err)
	}

	code, out, errOut = cli("--token", testcluster.Token)
	if code != 0 || !strings.HasPrefix(out, "leadership moved from "+target.ID+" to ") || strings.HasSuffix(out, " "+target.ID+"\n") {
		t.Fatalf("transfer-leader to any voter: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown voter", []string{"--token", testcluster.Token, "--to", "nosuch"}, "no such voter"},
		{"wrong token", []string{"--token", "wrong"}, "Authentication failed"},
		// The token reads the status, but moving leadership needs the
		// cluster's node credential.
		{"another cluster's key", []string{"--token", testcluster.Token, "--cluster-key", "00112233445566778899aabbccddeeff"}, "Authentication failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := cli(tc.args...)
			if code != 1 || out != "" || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errOut, tc.want)
			}
		})
	}
}
