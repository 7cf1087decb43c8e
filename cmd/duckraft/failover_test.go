package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

// syncBuffer is a bytes.Buffer the CLI writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// failoverBound is how long a statement may take across a failover on a
// loaded machine: a new connection, settings replayed, perhaps an election.
const failoverBound = 60 * time.Second

// TestShellFailsOver runs the shell with --server a,b,c against three
// duckraftd processes and kills them under it: a read after SIGKILL of its
// node runs on the next, with the session's settings applied again; a
// restarted node's "Invalid connection id" opens a new session; a write
// in flight when its node dies is not run again, and the user is told its
// outcome is unknown. Before, a second --server replaced the first, and
// after a restart every statement failed until the user quit.
func TestShellFailsOver(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	var servers []string
	for _, n := range c.Nodes {
		servers = append(servers, "quack:"+n.QuackAddr)
	}
	in, feed := io.Pipe()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		// --keep-going: a script piped in stops at its first failed
		// statement otherwise, and this one goes on past a write of
		// unknown outcome, as a user at the shell would.
		done <- run([]string{"--server", strings.Join(servers, ","), "--token", testcluster.Token, "--format", "csv", "--keep-going"}, in, &out, &errb)
	}()
	t.Cleanup(func() {
		feed.Close()
		select {
		case <-done:
		case <-time.After(failoverBound):
			t.Error("the shell did not end at the end of its input")
		}
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
		}
	})
	marks := 0
	// step runs sql and waits until its output shows want.
	step := func(sql, want string) {
		t.Helper()
		marks++
		mark := fmt.Sprintf("mark%d", marks)
		fmt.Fprintf(feed, "%s\nSELECT '%s' AS m;\n", sql, mark)
		deadline := time.Now().Add(failoverBound)
		for !strings.Contains(out.String(), mark) {
			if time.Now().After(deadline) {
				t.Fatalf("%q: no answer within %v", sql, failoverBound)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if want != "" && !strings.Contains(out.String(), want) {
			t.Fatalf("%q: output lacks %q", sql, want)
		}
	}

	step("CREATE TABLE t AS SELECT 7 AS x;", "")
	step("SET TimeZone = 'America/New_York';", "")
	c.Nodes[0].Kill()
	step("SELECT 'tz ' || current_setting('TimeZone') AS tz, sum(x) AS s FROM t;", "tz America/New_York,7")
	if !strings.Contains(errb.String(), "reconnected to "+servers[1]) {
		t.Fatalf("stderr does not tell of the failover to %s: %q", servers[1], errb.String())
	}

	// The node the shell is on restarts (after the first, through which
	// it rejoins): it forgot the session.
	c.Nodes[0].Restart(t)
	c.WaitForMembers(t, 3, failoverBound)
	c.Nodes[1].Restart(t)
	c.WaitForMembers(t, 3, failoverBound)
	c.WaitForVoters(t, 3, failoverBound)
	step("SELECT 'tz ' || current_setting('TimeZone') AS tz2;", "tz America/New_York")

	// A write in flight when its node dies: outcome unknown, not retried.
	before := errb.String()
	fmt.Fprintln(feed, "INSERT INTO t SELECT i FROM range(300000000) r(i);")
	time.Sleep(time.Second)
	// The shell is still on the node that restarted.
	c.Nodes[1].Kill()
	deadline := time.Now().Add(failoverBound)
	for !strings.Contains(strings.TrimPrefix(errb.String(), before), "may or may not have been applied") {
		if time.Now().After(deadline) {
			t.Fatalf("no word of the write's unknown outcome within %v: %q", failoverBound, strings.TrimPrefix(errb.String(), before))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The shell goes on, on the next node; which may still be applying the
	// write, so the read asks for no freshness.
	step("SET duckraft_consistency = 'any';", "")
	step("SELECT 'still here' AS m2;", "still here")
}
