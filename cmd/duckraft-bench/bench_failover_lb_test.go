package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
	"github.com/duckraft/duckraft/testcluster/endpoint"
)

// TestLBSummary pools the kills of each kind per generation and weighs
// them against issue 32's goal.
func TestLBSummary(t *testing.T) {
	rows := sampleLB().summary()
	want := []lbRow{
		{kind: killHolder, gen: "Q1", kills: 1, clients: 2, p50: 300 * time.Millisecond, p99: 300 * time.Millisecond, max: 300 * time.Millisecond},
		{kind: killHolder, gen: "Q3", kills: 1, clients: 2, p50: 200 * time.Millisecond, p99: 200 * time.Millisecond, max: 200 * time.Millisecond},
		{kind: killLeader, gen: "Q1", kills: 1, clients: 2, p50: 2500 * time.Millisecond, p99: 2500 * time.Millisecond, max: 2500 * time.Millisecond, lost: 1},
		{kind: killLeader, gen: "Q3", kills: 1, clients: 2, p50: time.Second, p99: time.Second, max: time.Second},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, w := range want {
		g := rows[i]
		g.failed = nil
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("row %d = %+v, want %+v", i, g, w)
		}
	}
	if got := codes(rows[2].failed); got != "3 × request_lost, 1 × session_lost" {
		t.Errorf("leader kill's Q1 failures: %q", got)
	}
	for _, tc := range []struct {
		name string
		edit func([]lbRow)
		met  bool
	}{
		{"as measured", func([]lbRow) {}, false},
		{"fast, but a session lost", func(r []lbRow) { r[2].p99 = lbGoalP99 }, false},
		{"fast, the lost session held a result", func(r []lbRow) { r[2].p99, r[2].lost, r[2].lostAllowed = lbGoalP99, 0, 1 }, true},
		{"no client measured", func(r []lbRow) { r[2].p99, r[2].lost, r[3].clients = lbGoalP99, 0, 0 }, false},
	} {
		r := slices.Clone(rows)
		tc.edit(r)
		if got := goalMet(r); got != tc.met {
			t.Errorf("%s: goal met %v, want %v", tc.name, got, tc.met)
		}
	}
}

func TestMetricSum(t *testing.T) {
	body := `# HELP duckraft_forwarded_requests_total Quack requests …
# TYPE duckraft_forwarded_requests_total counter
duckraft_forwarded_requests_total{node="n1",outcome="relayed"} 12
duckraft_forwarded_requests_total{node="n1",outcome="retried"} 3
duckraft_forwarded_requests_total_extra{node="n1",outcome="relayed"} 100
duckraft_sessions_lost_total{node="n1"} 2
duckraft_quack_sessions 4
duckraft_truncated{node="n1"
duckraft_quack_sessions`
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"duckraft_forwarded_requests_total", nil, 15},
		{"duckraft_forwarded_requests_total", []string{`outcome="relayed"`}, 12},
		{"duckraft_forwarded_requests_total", []string{`node="n1"`, `outcome="retried"`}, 3},
		{"duckraft_forwarded_requests_total", []string{`outcome="lost"`}, 0},
		{"duckraft_sessions_lost_total", nil, 2},
		{"duckraft_quack_sessions", nil, 4},
		{"duckraft_missing", nil, 0},
		{"duckraft_truncated", nil, 0},
	} {
		if got := metricSum(body, tc.name, tc.labels...); got != tc.want {
			t.Errorf("metricSum(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}

// TestBenchFailoverVia runs bench failover --via nginx with one kill of
// each kind against duckraftd processes behind Debian's nginx, and checks
// what it reports: a holder kill, then a leader kill, each measured for
// clients of both generations, and every session the killed holder held
// adopted by a node that lived (or, the rare session opened just before
// the kill and not yet pushed to the others, lost).
func TestBenchFailoverVia(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 duckraftd processes and nginx")
	}
	if _, err := endpoint.EnsureDebian(endpoint.Nginx, "../../scripts"); err != nil {
		t.Skipf("SKIPPED: %v", err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"failover", "--via", "nginx", "--duckraftd", testcluster.Binary(t), "--clients", "4", "--kills", "1",
		"--down", "4s", "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, stdout.String(), stderr.String())
	}
	var r benchReport
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("output %q: %v", stdout.String(), err)
	}
	lb := r.FailoverLB
	if lb == nil || lb.Via != endpoint.Nginx || lb.Q1Clients != 2 || lb.Q3Clients != 2 || len(lb.Kills) != 2 || lb.Statements == 0 {
		t.Fatalf("report: %+v", lb)
	}
	for i, kind := range []string{killHolder, killLeader} {
		k := lb.Kills[i]
		if k.Kind != kind || k.Node == "" || len(k.GapsMs["Q1"]) == 0 || len(k.GapsMs["Q3"]) == 0 {
			t.Errorf("kill %d: %+v, want a %s kill measured for Q1 and Q3 clients", i+1, k, kind)
		}
	}
	if k := lb.Kills[0]; k.Held > 0 && k.Adopted+float64(len(k.Lost)) == 0 {
		t.Errorf("the holder %s held %d of the clients' sessions, and none was adopted or lost: %+v", k.Node, k.Held, k)
	}
	t.Logf("%s", stderr.String())
}
