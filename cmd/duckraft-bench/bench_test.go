package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

func TestParseSystems(t *testing.T) {
	for _, tc := range []struct {
		list, pg string
		want     string // the systems joined by commas, or the error's text
	}{
		{"duckraft-3,duckraft-1,duckdb", "", "duckraft-3,duckraft-1,duckdb"},
		{"duckraft-3, duckdb ,duckraft-3", "", "duckraft-3,duckdb"},
		{"duckraft-1", "postgres://x", "duckraft-1,postgres"},
		{"postgres,duckdb", "postgres://x", "postgres,duckdb"},
		{"postgres", "", "needs --pg"},
		{"duckraft-0", "", "unknown system"},
		{"duckraft-x", "", "unknown system"},
		{"mysql", "", "unknown system"},
		{"", "", "nothing to run"},
		{"duckraft-3-pinned", "", "only bench writes pins"},
	} {
		got, err := parseSystems(tc.list, tc.pg)
		if s := parsed(got, err); !strings.Contains(s, tc.want) {
			t.Errorf("parseSystems(%q, %q) = %q, want %q", tc.list, tc.pg, s, tc.want)
		}
		if strings.Contains(tc.want, "unknown") && !errors.Is(err, errBadSystem) {
			t.Errorf("parseSystems(%q): %v is not errBadSystem", tc.list, err)
		}
	}
}

// TestParseWriteSystems: bench writes also takes a pinned cluster, which
// needs followers to keep off the leader's CPU.
func TestParseWriteSystems(t *testing.T) {
	for _, tc := range []struct {
		list, want string
	}{
		{"duckraft-3,duckraft-3-pinned", "duckraft-3,duckraft-3-pinned"},
		{"duckraft-2-pinned, duckraft-2-pinned", "duckraft-2-pinned"},
		{"duckraft-1-pinned", "needs followers"},
		{"duckraft-pinned", "unknown system"},
		{"duckraft-3-pinnedx", "unknown system"},
	} {
		if s := parsed(parseSystemList(tc.list, "", true)); !strings.Contains(s, tc.want) {
			t.Errorf("parseSystemList(%q) = %q, want %q", tc.list, s, tc.want)
		}
	}
}

// parsed is what a parse of --systems gave: the systems joined by commas,
// or the error's text.
func parsed(got []benchSystem, err error) string {
	if err != nil {
		return err.Error()
	}
	var names []string
	for _, s := range got {
		names = append(names, s.String())
	}
	return strings.Join(names, ",")
}

func TestParseCounts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"1,8,64", []int{1, 8, 64}, true},
		{" 2 , 4", []int{2, 4}, true},
		{"0", nil, false},
		{"1,,2", nil, false},
		{"-3", nil, false},
		{"99999", nil, false},
		{"eight", nil, false},
	} {
		got, err := parseCounts("clients", tc.in)
		if (err == nil) != tc.ok || (tc.ok && !equalInts(got, tc.want)) {
			t.Errorf("parseCounts(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLongestGapAfter(t *testing.T) {
	for _, tc := range []struct {
		name        string
		acks        []float64
		event       float64
		last, first float64
	}{
		{"gap at the event", []float64{1, 2, 3, 4.9, 5}, 3.5, 3, 4.9},
		{"a longer gap later counts", []float64{1, 3.6, 3.7, 6.5, 6.6}, 3.5, 3.7, 6.5},
		{"a gap before the event does not", []float64{1, 3, 3.6, 3.7}, 3.5, 3, 3.6},
		{"nothing before the event", []float64{4, 4.2}, 1, 1, 4},
		{"nothing after the event", []float64{1, 2}, 3, 0, 0},
		{"no acks", nil, 3, 0, 0},
	} {
		last, first := longestGapAfter(tc.acks, tc.event)
		if last != tc.last || first != tc.first {
			t.Errorf("%s: longestGapAfter = %v, %v; want %v, %v", tc.name, last, first, tc.last, tc.first)
		}
	}
}

func TestTimeline(t *testing.T) {
	tl := timeline([]float64{0.05, 0.15, 0.16, 0.99, 5}, []float64{0.5}, 100*time.Millisecond, time.Second)
	if len(tl) != 11 {
		t.Fatalf("%d buckets, want 11", len(tl))
	}
	want := map[int][2]int{0: {1, 0}, 1: {2, 0}, 5: {0, 1}, 9: {1, 0}, 10: {1, 0}}
	for i, b := range tl {
		w := want[i]
		if b.Acks != w[0] || b.Errors != w[1] {
			t.Errorf("bucket %d: %d acks, %d errors; want %v", i, b.Acks, b.Errors, w)
		}
	}
}

func samplePoints() []writePoint {
	var ps []writePoint
	for _, c := range []struct {
		clients         int
		duckraft, pgTPS float64
		p50             float64
	}{{1, 300, 1000, 2.5}, {8, 900, 2000, 8}, {64, 2500, 5000, 25}} {
		ps = append(ps,
			writePoint{System: "duckraft-3", Clients: c.clients, TxPerSec: c.duckraft, P50Ms: c.p50, P99Ms: c.p50 * 3, Writes: 100, PerEntry: 1.5},
			writePoint{System: "duckdb", Clients: c.clients, TxPerSec: 700, P50Ms: 1.2, P99Ms: 4, Writes: 100},
			writePoint{System: "postgres", Clients: c.clients, TxPerSec: c.pgTPS, P50Ms: 0.6, P99Ms: 2, Writes: 100},
			writePoint{System: "dqlite", Clients: c.clients, TxPerSec: 250 / float64(c.clients), P50Ms: 3, P99Ms: 9, Writes: 100, Busy: 10000 * (c.clients - 1)})
	}
	return ps
}

// sampleIngest is a bench ingest run: one node near issue 33's goal,
// three nodes past theirs.
func sampleIngest() *ingestResult {
	return &ingestResult{Rows: 1000, Bytes: 150000, Runs: 1, Points: []ingestPoint{
		{System: "duckdb", Mode: modeCTAS, Client: "in-process appender", Seconds: 1, RowsPerSec: 1000, MBPerSec: 0.15},
		{System: "duckraft-1", Mode: modeCTAS, Client: "Go client, Q1 APPEND", Seconds: 2, RowsPerSec: 500, MBPerSec: 0.08, VsLocal: 0.5, ApplyLagSec: 0.01},
		{System: "duckraft-1", Mode: modeCTAS, Client: "Go client, Q3 SEND_DATA", Seconds: 1.7, RowsPerSec: 590, MBPerSec: 0.09, VsLocal: 0.59, ApplyLagSec: 0.02},
		{System: "duckraft-3", Mode: modeCTAS, Client: "Go client, Q3 SEND_DATA", Seconds: 2.2, RowsPerSec: 450, MBPerSec: 0.07, VsLocal: 0.45, ApplyLagSec: 0.3},
	}}
}

// TestSummaryGoals marks issue 33's goals from a run's reports, and marks
// them not measured where the run lacks a peer or a benchmark.
func TestSummaryGoals(t *testing.T) {
	want := []struct {
		measured string
		met      bool
	}{
		{"2.50 ms", false},
		{"300 against 250: 1.20×", true},
		{"900 against 2000: 0.45×", false},
		{"2500 against 5000: 0.50×", false},
		{"0.59× (CREATE TABLE AS, Go client, Q3 SEND_DATA)", false},
		{"0.45× (CREATE TABLE AS, Go client, Q3 SEND_DATA)", true},
		{"0.300 s at most", true},
	}
	goals := summaryGoals(sampleReports())
	if len(goals) != len(want) {
		t.Fatalf("%d goals, want %d: %+v", len(goals), len(want), goals)
	}
	for i, g := range goals {
		if g.measured != want[i].measured || g.met != want[i].met {
			t.Errorf("goal %q: %q met %v, want %q met %v", g.text, g.measured, g.met, want[i].measured, want[i].met)
		}
	}
	// Only duckraft-3 and DuckDB wrote, and nothing was ingested: the
	// goals against peers are not measured, and none is met.
	var ps []writePoint
	for _, p := range samplePoints() {
		if p.System == "duckraft-3" || p.System == "duckdb" {
			ps = append(ps, p)
		}
	}
	goals = summaryGoals([]*benchReport{{Bench: "writes", Writes: ps}})
	for i, g := range goals {
		if i == 0 {
			if g.measured != "2.50 ms" {
				t.Errorf("goal %q: %q", g.text, g.measured)
			}
			continue
		}
		if g.measured != notMeasured || g.met {
			t.Errorf("without peers, goal %q: %q met %v", g.text, g.measured, g.met)
		}
	}
}

// TestSummaryGoalsPinned: a pinned cluster's figures stand beside the
// goals' as a hint, and the verdict stays the unpinned cluster's.
func TestSummaryGoalsPinned(t *testing.T) {
	ps := samplePoints()
	for _, c := range []int{1, 8, 64} {
		ps = append(ps, writePoint{System: "duckraft-3-pinned", Clients: c, TxPerSec: 600 * float64(c), P50Ms: 1.5, Writes: 100})
	}
	goals := summaryGoals([]*benchReport{{Bench: "writes", Writes: ps}})
	for i, want := range []struct {
		measured string
		met      bool
	}{
		{"2.50 ms; the leader alone on one CPU (duckraft-3-pinned): 1.50 ms", false},
		{"300 against 250: 1.20×; the leader alone on one CPU (duckraft-3-pinned): 600, 2.40×", true},
		{"900 against 2000: 0.45×; the leader alone on one CPU (duckraft-3-pinned): 4800, 2.40×", false},
		{"2500 against 5000: 0.50×; the leader alone on one CPU (duckraft-3-pinned): 38400, 7.68×", false},
	} {
		if goals[i].measured != want.measured || goals[i].met != want.met {
			t.Errorf("goal %q: %q met %v, want %q met %v", goals[i].text, goals[i].measured, goals[i].met, want.measured, want.met)
		}
	}
	var b strings.Builder
	summaryTable(&b, []*benchReport{{Bench: "writes", Writes: ps}})
	if want := "| | duckraft, 3 nodes | duckraft, 3 nodes, the leader alone on one CPU | DuckDB file, in-process |"; !strings.Contains(b.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, b.String())
	}
}

// TestSummaryTable puts each system of the run in a column, duckraft
// first, with a dash where a benchmark does not run a system.
func TestSummaryTable(t *testing.T) {
	var b strings.Builder
	summaryTable(&b, sampleReports())
	got := b.String()
	for _, want := range []string{
		"| | duckraft, 3 nodes | duckraft, 1 node | DuckDB file, in-process | PostgreSQL, synchronous standby | dqlite, 3 voters |\n|---|---|---|---|---|---|\n",
		"| single-row write transactions, 1 client: tx/s, p50 | 300, 2.5 ms | – | 700, 1.2 ms | 1000, 0.6 ms | 250, 3.0 ms |\n",
		"| single-row write transactions, 64 clients: tx/s, p50 | 2500, 25.0 ms | – | 700, 1.2 ms | 5000, 0.6 ms | 4, 3.0 ms (+126000 busy/s) |\n",
		"| bulk read, `SELECT *` of 1000 lineitem rows: M rows/s | – | 2.00 | – | 1.00 | – |\n",
		"| ingest, 1000 lineitem rows in one transaction: M rows/s (× the DuckDB file) | 0.00 (0.45×) | 0.00 (0.59×) | 0.00 | – | – |\n",
		"| failover, leader killed under 8 writing clients: ms without an acknowledged write | 1250 | – | – | – | – |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

func TestGoalRatio(t *testing.T) {
	for _, tc := range []struct {
		ratio, goal float64
		want        string
	}{
		{0.95, 0.9, "**0.95** of straight (goal ≥ 0.9: met)"},
		{0.9, 0.9, "**0.90** of straight (goal ≥ 0.9: met)"},
		{0.88, 0.9, "**0.88** of straight (goal ≥ 0.9: **not met**)"},
		{0.8999, 0.9, "**0.89** of straight (goal ≥ 0.9: **not met**)"},
	} {
		if got := goalRatio(tc.ratio, tc.goal, "straight"); got != tc.want {
			t.Errorf("goalRatio(%v, %v) = %q, want %q", tc.ratio, tc.goal, got, tc.want)
		}
	}
}

func TestSpliceSection(t *testing.T) {
	section := genBegin + "\nNEW\n" + genEnd + "\n"
	for _, tc := range []struct{ name, doc, want string }{
		{"empty", "", "# Benchmarks\n\n" + section},
		{"before the first section", "# B\n\nintro\n\n## Old\n\nold text\n", "# B\n\nintro\n\n" + section + "\n## Old\n\nold text\n"},
		{"replaces the old one", "# B\n\n" + genBegin + "\nOLD\n" + genEnd + "\n\n## Old\n", "# B\n\n" + section + "\n## Old\n"},
		{"no section", "# B\n\nonly intro\n", "# B\n\nonly intro\n" + section + "\n"},
	} {
		if got := spliceSection(tc.doc, section); got != tc.want {
			t.Errorf("%s: got\n%q\nwant\n%q", tc.name, got, tc.want)
		}
	}
}

func TestDemoteHeadings(t *testing.T) {
	got := demoteHeadings("## bench reads\n\ntext # not a heading\n### 3 voters\n")
	if want := "### bench reads\n\ntext # not a heading\n#### 3 voters\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestProgressBar(t *testing.T) {
	for _, tc := range []struct {
		done, total time.Duration
		want        string
	}{
		{0, time.Second, "[----------]   0% x"},
		{time.Second / 2, time.Second, "[#####-----]  50% x"},
		{2 * time.Second, time.Second, "[##########] 100% x"},
	} {
		if got := progressBar(tc.done, tc.total, "x", 10); got != tc.want {
			t.Errorf("progressBar(%v, %v) = %q, want %q", tc.done, tc.total, got, tc.want)
		}
	}
	// Off a terminal, each step is one line and nothing is redrawn.
	var buf bytes.Buffer
	p := newBenchProgress(&buf, time.Second)
	p.begin("step one", time.Second)
	p.end()
	p.finish()
	if got := buf.String(); got != "bench: step one\n" {
		t.Fatalf("progress off a terminal wrote %q", got)
	}
}

// sampleReports are one report of each benchmark, as their JSON would be.
func sampleReports() []*benchReport {
	m := machineInfo{CPU: "Test CPU", Cores: 2, RAMGiB: 4, Kernel: "Linux 6", Go: "go1.26", DuckDB: "v2.0.0", Postgres: "15.18", Date: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	fo := &failoverResult{Mode: "kill", System: "duckraft-3", Clients: 8, OldLeader: "n1", NewLeader: "n2", EventSec: 3,
		LastAckSec: 2.95, FirstAckSec: 4.2, UnavailableMs: 1250, Writes: 900, Errors: 3, BucketMs: 100,
		Timeline: timeline([]float64{0.1, 1, 2, 2.95, 4.2, 5}, []float64{3.01}, 100*time.Millisecond, 6*time.Second)}
	lag := &lagResult{System: "duckraft-3", Clients: 16, TxPerSec: 800, IntervalMs: 100, Leader: "n1",
		Samples: []lagSample{{Sec: 0.1, Commit: 10, Lag: map[string]uint64{"n2": 1, "n3": 0}}, {Sec: 0.2, Commit: 20, Lag: map[string]uint64{"n2": 3, "n3": 2}}}}
	lag.Followers = summarizeLag(lag.Samples)
	return []*benchReport{
		{Bench: "writes", Machine: m, DurationSec: 5, Writes: samplePoints()},
		{Bench: "bulk", Machine: m, Bulk: &bulkResult{Rows: 1000, Runs: 3, Paths: []bulkPoint{
			{Path: "duckraft-1 over Quack", System: "duckraft-1", Seconds: 0.5, RowsPerSec: 2e6, MBPerSec: 200, ClientRSS: 50 << 20, ServerRSS: 100 << 20},
			{Path: "postgres over pgx", System: "postgres", Seconds: 1, RowsPerSec: 1e6, MBPerSec: 100, ClientRSS: 30 << 20}}}},
		{Bench: "failover", Machine: m, Failover: fo},
		{Bench: "lag", Machine: m, Lag: lag},
		{Bench: "failover-lb", Machine: m, FailoverLB: sampleLB()},
		{Bench: "ingest", Machine: m, Ingest: sampleIngest()},
	}
}

// sampleLB is a bench failover --via run: a holder kill and a leader kill,
// one of whose Q1 clients waited 2.5 s and lost its session.
func sampleLB() *lbFailoverResult {
	return &lbFailoverResult{Via: "nginx", Q1Clients: 2, Q3Clients: 2, DownSec: 5, Statements: 1000, Kills: []lbKill{
		{Kind: killHolder, Node: "n2", AtSec: 3, Held: 2, GapsMs: map[string][]float64{"Q1": {100, 300}, "Q3": {50, 200}},
			Failed: map[string]map[string]int{"Q1": {"transport: HTTP 502": 2}}, Forwarded: map[string]float64{"relayed": 150, "retried": 2}, Adopted: 2},
		{Kind: killLeader, Node: "n1", AtSec: 14, Held: 1, GapsMs: map[string][]float64{"Q1": {1200, 2500}, "Q3": {900, 1000}},
			Failed:    map[string]map[string]int{"Q1": {"session_lost": 1, "request_lost": 3}, "Q3": {"request_lost": 1}},
			Lost:      []lostSession{{Generation: "Q1", Code: "session_lost"}},
			Forwarded: map[string]float64{"relayed": 80}, Adopted: 1},
	}}
}

func TestSummarizeLag(t *testing.T) {
	got := sampleReports()[3].Lag.Followers
	if len(got) != 2 || got[0].ID != "n2" || got[0].Mean != 2 || got[0].Max != 3 || got[1].ID != "n3" || got[1].Max != 2 {
		t.Fatalf("summaries %+v", got)
	}
}

// TestReportJSONAndDoc writes each sample report as bench NAME --json
// would, reads it back as bench report does, and renders the section and
// its plots: every plot is a non-empty PNG the section links to.
func TestReportJSONAndDoc(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for _, r := range sampleReports() {
		var buf bytes.Buffer
		if err := r.print(&buf, true); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, r.Bench+".json")
		if err := os.WriteFile(f, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		var md bytes.Buffer
		if err := r.print(&md, false); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(md.String(), "| ") || !strings.Contains(md.String(), "Machine: Test CPU, 2 cores") {
			t.Errorf("%s as Markdown has no table or no machine line:\n%s", r.Bench, md.String())
		}
	}
	reads := filepath.Join(dir, "reads.md")
	if err := os.WriteFile(reads, []byte("## bench reads: a table\n\n| a |\n|---|\n| 1 |\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files = append(files, reads)
	doc := filepath.Join(dir, "docs", "benchmarks.md")
	if err := os.MkdirAll(filepath.Dir(doc), 0o755); err != nil {
		t.Fatal(err)
	}
	old := "# Benchmarks\n\nIntro.\n\n## Hand-written, older\n\nkept\n"
	if err := os.WriteFile(doc, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "docs", "img")
	var stdout, stderr bytes.Buffer
	for range 2 { // the second run replaces the first's section
		if code := run(append([]string{"report", "--doc", doc, "--img", img}, files...), &stdout, &stderr); code != 0 {
			t.Fatalf("bench report: exit %d: %s", code, stderr.String())
		}
	}
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if strings.Count(got, genBegin) != 1 || !strings.HasSuffix(got, "## Hand-written, older\n\nkept\n") || !strings.HasPrefix(got, "# Benchmarks\n\nIntro.\n\n"+genBegin) {
		t.Fatalf("document after two reports:\n%s", got)
	}
	if !strings.Contains(got, genBegin+"\n## Summary: duckraft beside its peers") || strings.Index(got, "## Summary") > strings.Index(got, "## The same run in detail") {
		t.Errorf("the section does not open with the summary:\n%s", got)
	}
	for _, want := range []string{"| 8 clients: tx/s ≥ 0.5× PostgreSQL's | 900 against 2000: 0.45× | **no** |",
		"| 1 client: tx/s ≥ dqlite's | 300 against 250: 1.20× | **yes** |",
		"| 64 | 2500 | 700 | 5000 | 4 | 0.50 |", "kvwrite", "| dqlite | 64 | 4 | 3.00 | 9.00 | 0 (+630000 busy) |",
		"Plots: [writes: tx/s](img/bench-writes-tps.png)", "**1250**", "### bench reads: a table", "shared with other engineers",
		"| leader | Q1 | 1 | 2 | 2500 | **2500** | 2500 | 1 (0) | 3 × request_lost, 1 × session_lost |",
		"no open result, temporary object or transaction: **not met**", "| 1 | holder | n2 | 2 | 3.0 | 100 300 | 50 200 | 2 | 150, 2, 0 | 0 |"} {
		if !strings.Contains(got, want) {
			t.Errorf("document lacks %q", want)
		}
	}
	for _, name := range []string{plotWritesTPS, plotWritesLatency, plotBulk, plotFailover, plotLag} {
		png, err := os.ReadFile(filepath.Join(img, name))
		if err != nil {
			t.Errorf("plot %s: %v", name, err)
			continue
		}
		if len(png) < 1000 || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("plot %s: %d bytes, not a PNG with content", name, len(png))
		}
		if !strings.Contains(got, "](img/"+name+")") {
			t.Errorf("document does not show %s", name)
		}
	}
}

func TestReportRefusesOtherFiles(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"garbage.json": "not json",
		"empty.json":   `{"bench":"writes"}`,
		"other.json":   `{"bench":"nosuch","writes":[{"system":"x"}]}`,
		"blank.md":     "  \n",
		"zero.json":    `{"bench":"writes","writes":[{"system":"x","clients":0,"tx_per_sec":1}]}`,
	} {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		code := run([]string{"report", "--doc", filepath.Join(dir, "doc.md"), "--img", dir, f}, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), name) {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 naming the file", name, code, stderr.String())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "doc.md")); err == nil {
		t.Error("a refused report wrote the document")
	}
}

// TestBenchAgainstServer runs bench writes, lag, failover --mode transfer
// and reads with --server against a real 3-node testcluster for a moment
// each, and checks their output: writes were acknowledged, the lag sampled
// both followers, leadership moved, the scans read every row.
func TestBenchAgainstServer(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitForLeader(t, 20*time.Second)
	var servers []string
	for _, n := range c.Nodes {
		servers = append(servers, "quack:"+n.QuackAddr)
	}
	bench := func(args ...string) benchReport {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(append(args, "--server", strings.Join(servers, ","), "--token", testcluster.Token, "--json"), &stdout, &stderr)
		if code != 0 {
			t.Fatalf("%v: exit %d, stderr %s", args, code, stderr.String())
		}
		var r benchReport
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
			t.Fatalf("%v: output %q: %v", args, stdout.String(), err)
		}
		if hasLogLine(stdout.String() + stderr.String()) {
			t.Errorf("%v: a Raft log line in the output:\n%s%s", args, stdout.String(), stderr.String())
		}
		return r
	}

	w := bench("writes", "--clients", "1,4", "--duration", "1s")
	if len(w.Writes) != 2 {
		t.Fatalf("writes: %d points, want 2: %+v", len(w.Writes), w.Writes)
	}
	for _, p := range w.Writes {
		if p.Writes == 0 || p.TxPerSec <= 0 || p.P50Ms <= 0 || p.P99Ms < p.P50Ms || p.PerEntry <= 0 {
			t.Errorf("writes at %d clients: %+v", p.Clients, p)
		}
		// The leader's process is not the benchmark's to read here.
		if p.LeaderCPUMs != 0 {
			t.Errorf("writes at %d clients against --server report the leader's CPU: %+v", p.Clients, p)
		}
	}
	if w.Machine.DuckDB == "" || w.Machine.Cores == 0 {
		t.Errorf("machine %+v", w.Machine)
	}

	l := bench("lag", "--clients", "4", "--duration", "1s")
	if len(l.Lag.Followers) != 2 || len(l.Lag.Samples) == 0 || l.Lag.Leader != leader.ID {
		t.Errorf("lag: leader %s, %d followers, %d samples; want leader %s and 2 followers", l.Lag.Leader, len(l.Lag.Followers), len(l.Lag.Samples), leader.ID)
	}

	f := bench("failover", "--clients", "4", "--duration", "4s", "--at", "1s")
	fo := f.Failover
	if fo.Mode != "transfer" || fo.OldLeader != leader.ID || fo.NewLeader == "" || fo.NewLeader == leader.ID {
		t.Errorf("failover: %+v", fo)
	}
	if fo.LastAckSec > fo.EventSec+10 || fo.FirstAckSec <= fo.LastAckSec || fo.UnavailableMs <= 0 || fo.Writes == 0 {
		t.Errorf("failover: ack %.2f .. %.2f around %.2f, %.0f ms, %d writes", fo.LastAckSec, fo.FirstAckSec, fo.EventSec, fo.UnavailableMs, fo.Writes)
	}

	var stdout, stderr bytes.Buffer
	code := run([]string{"reads", "--server", servers[1], "--token", testcluster.Token, "--rows", "20000",
		"--clients", "2", "--duration", "1s", "--scans", "1", "--split", "2"}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "| split over 2 node(s) |") || !strings.Contains(stdout.String(), "queries/s") {
		t.Errorf("reads: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	// The table is there now: a run with another --rows is refused, not
	// dropped.
	stdout.Reset()
	stderr.Reset()
	code = run([]string{"bulk", "--server", servers[0], "--token", testcluster.Token, "--rows", "10", "--runs", "1"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "lineitem has 20000 rows") {
		t.Errorf("bulk with another --rows: exit %d, stderr %q", code, stderr.String())
	}

	// A wrong token is refused with a clear error, not a hang.
	stdout.Reset()
	stderr.Reset()
	code = run([]string{"writes", "--server", servers[0], "--token", "wrong", "--duration", "1s", "--clients", "1"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "Authentication failed") {
		t.Errorf("wrong token: exit %d, stderr %q", code, stderr.String())
	}
	// Kill and stop need a process of the benchmark's own.
	stdout.Reset()
	stderr.Reset()
	code = run([]string{"failover", "--server", servers[0], "--token", testcluster.Token, "--mode", "kill"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "only transfer") {
		t.Errorf("failover --mode kill with --server: exit %d, stderr %q", code, stderr.String())
	}
}

// hasLogLine reports whether out holds a line of a daemon's log: slog's
// (level=) or hclog's ([INFO], [WARN]).
func hasLogLine(out string) bool {
	return strings.Contains(out, "level=") || strings.Contains(out, "[INFO]") || strings.Contains(out, "[WARN]")
}

// TestBenchCapLocal runs bench reads --cap on the cluster it starts itself
// (6 data nodes behind bandwidth proxies, and a router) with a small
// table: every scan is reported, both goals are marked, and no daemon's log
// line reaches the output.
func TestBenchCapLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 7 duckraftd processes")
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"reads", "--duckraftd", testcluster.Binary(t), "--cap", "50MB/s", "--rows", "20000", "--scans", "1"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{
		"| straight from a node | uncapped |",
		"| through the router, one node | uncapped |",
		"| through the router, one node | 50MB/s per node |",
		"| through the router, split over 3 | 50MB/s per node |",
		"of straight (goal ≥ 0.9: ",
		"of one node (goal ≥ 2.5: ",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("no %q in the output:\n%s", want, stdout.String())
		}
	}
	if hasLogLine(stdout.String() + stderr.String()) {
		t.Errorf("a daemon's log line in the output:\n%s%s", stdout.String(), stderr.String())
	}
}

// TestBenchFailoverLocal kills the leader of the cluster bench failover
// starts itself soon after it starts: the two nodes left must elect a
// leader, so the bench may begin only once all three vote (new members
// join as non-voters and are promoted once caught up).
func TestBenchFailoverLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 duckraftd processes")
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"failover", "--duckraftd", testcluster.Binary(t), "--clients", "2", "--duration", "8s", "--at", "500ms", "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, stdout.String(), stderr.String())
	}
	var r benchReport
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("output %q: %v", stdout.String(), err)
	}
	fo := r.Failover
	if fo.Mode != "kill" || fo.OldLeader == "" || fo.NewLeader == "" || fo.NewLeader == fo.OldLeader || fo.FirstAckSec <= fo.EventSec {
		t.Errorf("failover: %+v", fo)
	}
}
