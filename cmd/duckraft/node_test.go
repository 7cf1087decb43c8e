package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/testcluster"
)

// TestStatusAndNodeRemove runs the operator commands against a real
// 3-node cluster, of duckraftd processes and of in-process daemons: status
// with the global flags before the subcommand and as JSON, the refusals of
// node remove, and a removal that lasts: the removed node stops, and no
// reconciler pass adds it back.
func TestStatusAndNodeRemove(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts testcluster.Options
	}{{"processes", testcluster.Options{}}, {"in-process", testcluster.Options{InProcess: true}}} {
		t.Run(mode.name, func(t *testing.T) { statusAndNodeRemove(t, mode.opts) })
	}
}

func statusAndNodeRemove(t *testing.T, opts testcluster.Options) {
	c := testcluster.Start(t, 3, opts)
	leader := c.WaitForLeader(t, 20*time.Second)
	followers := c.Others(leader)
	victim, via := followers[0], followers[1]
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(args, strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	server := "quack:" + via.QuackAddr

	code, out, errOut := cli("--server", server, "--token", testcluster.Token, "status", "--json")
	if code != 0 {
		t.Fatalf("status --json: exit %d, stderr %q", code, errOut)
	}
	var st nodeapi.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json printed %q: %v", out, err)
	}
	if st.ID != via.ID || st.LeaderID != leader.ID || len(st.Members) != 3 || st.Version == "" || !strings.HasPrefix(st.Engine, "v") {
		t.Fatalf("status --json: %+v", st)
	}
	if code, out, errOut = cli("status", "--token", testcluster.Token, "--server", server); code != 0 || !strings.Contains(out, "leader "+leader.ID) ||
		!strings.Contains(out, "duckraftd "+st.Version+", DuckDB "+st.Engine) {
		t.Fatalf("status, flags after: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"the leader", []string{"node", "remove", leader.ID}, "is the leader"},
		{"an unknown id", []string{"node", "remove", "n42"}, `no member "n42"`},
		{"a wrong token", []string{"node", "remove", victim.ID, "--token", "not-the-token"}, "Authentication failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--server", server, "--token", testcluster.Token}, tc.args...)
			code, out, errOut := cli(args...)
			if code != 1 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errOut, tc.want)
			}
		})
	}

	code, out, errOut = cli("node", "--server", server, "remove", victim.ID, "--token", testcluster.Token)
	if code != 0 || !strings.Contains(out, victim.ID+" removed") {
		t.Fatalf("node remove %s: exit %d, stdout %q, stderr %q", victim.ID, code, out, errOut)
	}
	deadline := time.Now().Add(30 * time.Second)
	for victim.Running() {
		if time.Now().After(deadline) {
			t.Fatalf("%s still runs 30s after its removal:\n%s", victim.ID, victim.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// duckraftd exits cleanly, so that a service manager does not start
	// it again; a daemon in the test process only stops.
	want := "stopped: removed from the cluster"
	if opts.InProcess {
		want = "the leader removes this node from the cluster"
	}
	if !strings.Contains(victim.Log(), want) {
		t.Errorf("%s's log lacks %q:\n%s", victim.ID, want, victim.Log())
	}

	// The reconciler runs every second and on every gossip event: through
	// several passes the removed node must stay out of Raft, and writes
	// must go on with the two voters left.
	conn := via.Client(t)
	for i := range 8 {
		if _, err := conn.Exec(t.Context(), "CREATE OR REPLACE TABLE after_remove AS SELECT "+string(rune('0'+i))+" AS i"); err != nil {
			t.Fatalf("write after the removal: %v", err)
		}
		l := c.WaitForLeader(t, 20*time.Second)
		st, err := l.Status()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range st.Members {
			if m.ID == victim.ID && m.InRaft {
				t.Fatalf("%s is back in the Raft configuration: %+v", victim.ID, st.Members)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	if code, out, errOut = cli("--server", server, "--token", testcluster.Token, "node", "remove", victim.ID); code != 1 || !strings.Contains(errOut, "no member") {
		t.Fatalf("second removal of %s: exit %d, stdout %q, stderr %q", victim.ID, code, out, errOut)
	}
}

// TestNodeRemoveDead: a member that gossip sees dead is removed at once;
// a removal that would leave the live voters short of a majority is
// refused; and a removed node started again rejoins, as docs/cli.md says
// removal means.
func TestNodeRemoveDead(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitForLeader(t, 20*time.Second)
	followers := c.Others(leader)
	dead, alive := followers[0], followers[1]
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args = append([]string{"--server", "quack:" + leader.QuackAddr, "--token", testcluster.Token}, args...)
		code := run(args, strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	dead.Kill()
	waitMember(t, leader, dead.ID, func(m nodeapi.MemberStatus) bool { return m.State == "dead" })

	// {leader, dead} could commit nothing, not even this change.
	if code, out, errOut := cli("node", "remove", alive.ID); code != 1 || !strings.Contains(errOut, "not a majority") {
		t.Fatalf("removal of %s with %s dead: exit %d, stdout %q, stderr %q", alive.ID, dead.ID, code, out, errOut)
	}
	code, out, errOut := cli("node", "remove", dead.ID)
	if code != 0 || !strings.Contains(out, "gossip already saw it dead") {
		t.Fatalf("removal of dead %s: exit %d, stdout %q, stderr %q", dead.ID, code, out, errOut)
	}
	waitMember(t, leader, dead.ID, func(m nodeapi.MemberStatus) bool { return !m.InRaft })
	if _, err := alive.Client(t).Exec(t.Context(), "CREATE TABLE after_dead_removed(i INTEGER)"); err != nil {
		t.Fatalf("write with two voters left: %v", err)
	}

	dead.Restart(t)
	waitMember(t, c.WaitForLeader(t, 20*time.Second), dead.ID, func(m nodeapi.MemberStatus) bool { return m.InRaft })
}

// waitMember waits until the member id, as n reports it, satisfies ok.
func waitMember(t *testing.T, n *testcluster.Node, id string, ok func(nodeapi.MemberStatus) bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last []nodeapi.MemberStatus
	for time.Now().Before(deadline) {
		if st, err := n.Status(); err == nil {
			last = st.Members
			found := false
			for _, m := range st.Members {
				if m.ID == id {
					found = true
					if ok(m) {
						return
					}
				}
			}
			if !found && ok(nodeapi.MemberStatus{ID: id}) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("member %s as %s reports it never got there: %+v", id, n.ID, last)
}
