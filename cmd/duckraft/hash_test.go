package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/testcluster"
)

// TestHash prints each member's state hash on a real cluster: equal on
// every node once writes have replicated.
func TestHash(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitForLeader(t, 20*time.Second)
	conn := leader.Client(t)
	if _, err := conn.Exec(t.Context(), "CREATE TABLE h AS SELECT * FROM range(1000) r(i)"); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(t, 30*time.Second)
	var stdout, stderr bytes.Buffer
	code := run([]string{"hash", "--server", "quack:" + leader.QuackAddr, "--token", testcluster.Token},
		strings.NewReader(""), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header and 3 members, got:\n%s", stdout.String())
	}
	hashes := map[string]bool{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != 4 || f[2] != "1000" {
			t.Fatalf("member line %q: want ID, applied index, 1000 rows, hash", l)
		}
		hashes[f[3]] = true
	}
	if len(hashes) != 1 {
		t.Fatalf("converged members print different hashes:\n%s", stdout.String())
	}

	stdout.Reset()
	stderr.Reset()
	code = run([]string{"hash", "--server", "quack:" + leader.QuackAddr, "--token", "wrong"}, strings.NewReader(""), &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "Authentication failed") {
		t.Fatalf("wrong token: exit %d, stderr %q", code, stderr.String())
	}
}

// Two members at one applied index with different hashes make the command
// fail with exit status 3.
func TestHashReportsDivergence(t *testing.T) {
	var addr string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == nodeapi.StatusPath:
			json.NewEncoder(w).Encode(nodeapi.Status{ID: "n1", Members: []nodeapi.MemberStatus{
				{ID: "n1", Role: "voter", QuackAddr: addr}, {ID: "n2", Role: "voter", QuackAddr: addr}}})
		case r.URL.Path == nodeapi.HashPath:
			// Each request gets another hash: the two members differ.
			json.NewEncoder(w).Encode(nodeapi.StateHash{Index: 9, Hash: time.Now().String(), Rows: 1})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	addr = strings.TrimPrefix(srv.URL, "http://")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"hash", "--server", "quack:" + addr, "--token", "t"}, strings.NewReader(""), &stdout, &stderr); code != 3 {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 3", code, stdout.String(), stderr.String())
	}
}
