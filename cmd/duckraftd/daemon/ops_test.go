package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node"
)

// opsGet asks d's operations address for path with the bearer token (none
// when empty) and returns the status code and body.
func opsGet(t *testing.T, d *Daemon, method, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+d.HTTPAddr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp.StatusCode, string(b)
}

// TestOpsEndpointsCredentials: /livez and /readyz answer anyone with no
// more than ok; /metrics and /status refuse a request without the token,
// with another token, or with the token in another scheme, and answer
// the token. The status page is static and answers anyone. Other methods
// and paths, and oversized headers, are refused.
func TestOpsEndpointsCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Raft and gossip")
	}
	const token = "ops-token"
	d, err := Start(Config{ID: "n1", DataDir: t.TempDir(), QuackAddr: freeAddr(t), RaftAddr: freeAddr(t),
		GossipAddr: freeAddr(t), HTTPAddr: "127.0.0.1:0", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.store.WaitForLeader(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Readiness follows the leader, which the store just reported.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := opsGet(t, d, http.MethodGet, ReadyzPath, "")
		if code == http.StatusOK && body == "ok\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz of a single leader: %d %q", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body := opsGet(t, d, http.MethodGet, LivezPath, ""); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/livez: %d %q", code, body)
	}

	for _, path := range []string{MetricsPath, StatusPath} {
		for _, bad := range []struct{ name, header string }{
			{"no credential", ""},
			{"another token", "Bearer ops-tokeN"},
			{"token prefix", "Bearer ops-toke"},
			{"basic scheme", "Basic " + token},
			{"bare token", token},
		} {
			req, _ := http.NewRequest(http.MethodGet, "http://"+d.HTTPAddr()+path, nil)
			if bad.header != "" {
				req.Header.Set("Authorization", bad.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s with %s: %s, want 401", path, bad.name, resp.Status)
			}
			if strings.Contains(string(b), "duckraft_") || strings.Contains(string(b), `"members"`) {
				t.Errorf("%s with %s leaked %q", path, bad.name, b)
			}
		}
	}

	code, body := opsGet(t, d, http.MethodGet, MetricsPath, token)
	if code != http.StatusOK {
		t.Fatalf("/metrics with the token: %d %q", code, body)
	}
	for _, want := range []string{`duckraft_raft_applied_index{node="n1"}`, `duckraft_raft_leader{node="n1"} 1`,
		`duckraft_gossip_members{node="n1",state="alive"} 1`, `duckraft_quack_sessions{node="n1"}`,
		`duckraft_statements_running{node="n1"}`, `duckraft_statements_queued{node="n1"} 0`,
		fmt.Sprintf(`duckraft_statements_running_limit{node="n1"} %d`, node.DefaultMaxRunningStatements()),
		fmt.Sprintf(`duckraft_statements_running_per_client_limit{node="n1"} %d`, node.DefaultMaxRunningStatementsPerClient(node.DefaultMaxRunningStatements())),
		`duckraft_statement_admissions_total{node="n1",outcome="refused"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	code, body = opsGet(t, d, http.MethodGet, StatusPath, token)
	var st Status
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
		t.Fatalf("/status with the token: %d %q (%v)", code, body, err)
	}
	if st.ID != "n1" || st.LeaderID != "n1" || !st.Ready || len(st.Members) != 1 || len(st.LeaderChanges) == 0 {
		t.Fatalf("/status = %+v", st)
	}

	// The page is static and served to anyone: it holds nothing of the
	// node, and forbids loading anything from elsewhere.
	for _, path := range []string{PagePath, "/ui/app.js", "/ui/style.css"} {
		resp, err := http.Get("http://" + d.HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(b) == 0 {
			t.Fatalf("%s: %s", path, resp.Status)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
		if strings.Contains(string(b), `"n1"`) || strings.Contains(string(b), token) {
			t.Errorf("the static %s holds the node's data", path)
		}
	}

	// Headers past the limit are refused before any handler runs.
	req, _ := http.NewRequest(http.MethodGet, "http://"+d.HTTPAddr()+StatusPath, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Padding", strings.Repeat("a", 64<<10))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("64 KiB of headers: %s", resp.Status)
		}
	}

	for _, tc := range []struct{ method, path string }{
		{http.MethodPost, MetricsPath}, {http.MethodDelete, StatusPath}, {http.MethodPost, ReadyzPath},
		{http.MethodGet, "/duckraft/v1/status"},
	} {
		if code, _ := opsGet(t, d, tc.method, tc.path, token); code < 400 {
			t.Errorf("%s %s answered %d", tc.method, tc.path, code)
		}
	}
}
