package testcluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/cmd/duckraftd/daemon"
	"github.com/duckraft/duckraft/testcluster"
)

// metric reads series from n's /metrics, failing the test if it cannot.
func metric(t *testing.T, n *testcluster.Node, series string) float64 {
	t.Helper()
	v, err := n.Metric(series)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// waitFor polls cond every 100 ms until it holds or timeout passes, and
// then fails the test with what describe says.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("within %v: %s", timeout, describe())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMetricsFollowWrites runs a known workload through a follower of a
// 3-node cluster, of duckraftd processes and of in-process daemons (which
// share one process and so one go-metrics global, but each has its own
// registry), and checks that each node's
// /metrics follows it: N writes move the follower's write counter by
// exactly N and its PREPARE count by at least N, a read is counted at its
// level with the node that served it, a failed statement is counted as an
// error, bytes and the open session are counted, every node's applied index
// moves by at least N, a snapshot is measured, and raft's own metrics come
// through go-metrics' sink.
func TestMetricsFollowWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	inBothModes(t, testcluster.Options{}, metricsFollowWrites)
}

func metricsFollowWrites(t *testing.T, opts testcluster.Options) {
	if opts.InProcess {
		opts.Configure = func(c *daemon.Config) {
			c.SnapshotThreshold = 16
			c.SnapshotInterval = 500 * time.Millisecond
		}
	} else {
		opts.Args = []string{"--snapshot-threshold", "16", "--snapshot-interval", "500ms"}
	}
	c := testcluster.Start(t, 3, opts)
	l := c.WaitForLeader(t, 20*time.Second)
	f := c.Others(l)[0]
	conn := f.Client(t)
	exec(t, conn, "CREATE TABLE m(i INTEGER)")

	writes := fmt.Sprintf(`duckraft_writes_total{node="%s",outcome="ok"}`, f.ID)
	prepares := fmt.Sprintf(`duckraft_quack_requests_total{node="%s",outcome="ok",type="PREPARE_REQUEST"}`, f.ID)
	before, prepBefore := metric(t, f, writes), metric(t, f, prepares)
	applied := map[string]float64{}
	for _, n := range c.Nodes {
		applied[n.ID] = metric(t, n, fmt.Sprintf(`duckraft_raft_applied_index{node="%s"}`, n.ID))
	}
	const n = 40
	for i := range n {
		exec(t, conn, fmt.Sprintf("INSERT INTO m VALUES (%d)", i))
	}
	if got := metric(t, f, writes) - before; got != n {
		t.Errorf("%d writes moved %s by %v", n, writes, got)
	}
	if got := metric(t, f, prepares) - prepBefore; got < n {
		t.Errorf("%d writes moved %s by %v", n, prepares, got)
	}
	buildInfo := regexp.MustCompile(`(?m)^duckraft_build_info\{engine="v[0-9][^"]*",goversion="[^"]+",node="` + f.ID + `",version="[^"]+"\} 1$`)
	if _, body, err := f.OpsGet(daemon.MetricsPath, true); err != nil || !buildInfo.MatchString(body) {
		t.Errorf("%s's /metrics says no build (%v):\n%s", f.ID, err, grep(body, "duckraft_build_info"))
	}
	for _, node := range c.Nodes {
		series := fmt.Sprintf(`duckraft_raft_applied_index{node="%s"}`, node.ID)
		waitFor(t, 30*time.Second, func() bool {
			v, err := node.Metric(series)
			return err == nil && v-applied[node.ID] >= n
		}, func() string { return fmt.Sprintf("%s did not move by %d from %v", series, n, applied[node.ID]) })
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, err := queryInt(ctx, conn, "SELECT count(*) FROM m"); err != nil || got != n {
		t.Fatalf("count = %d, %v", got, err)
	}
	code, body, err := f.OpsGet(daemon.MetricsPath, true)
	if err != nil || code != http.StatusOK {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	read := false
	for _, served := range c.Nodes {
		series := fmt.Sprintf(`duckraft_reads_total{level="session",node="%s",outcome="ok",served_by="%s"}`, f.ID, served.ID)
		if v, err := testcluster.MetricIn(body, series); err == nil && v >= 1 {
			read = true
		}
	}
	if !read {
		t.Errorf("the session read is not counted in %s's /metrics:\n%s", f.ID, grep(body, "duckraft_reads_total"))
	}
	// A failed statement is an error of kind statement; bytes and the
	// open session are counted.
	if _, err := queryInt(ctx, conn, "SELECT count(*) FROM no_such_table"); err == nil {
		t.Fatal("a read of a missing table succeeded")
	}
	code, body, err = f.OpsGet(daemon.MetricsPath, true)
	if err != nil || code != http.StatusOK {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	for _, tc := range []struct {
		series string
		min    float64
	}{
		{fmt.Sprintf(`duckraft_errors_total{kind="statement",node="%s"}`, f.ID), 1},
		{fmt.Sprintf(`duckraft_quack_requests_total{node="%s",outcome="error",type="PREPARE_REQUEST"}`, f.ID), 1},
		{fmt.Sprintf(`duckraft_quack_received_bytes_total{node="%s"}`, f.ID), 40 * 20},
		{fmt.Sprintf(`duckraft_quack_sent_bytes_total{node="%s"}`, f.ID), 40 * 20},
		{fmt.Sprintf(`duckraft_quack_sessions{node="%s"}`, f.ID), 1},
		{fmt.Sprintf(`duckraft_quack_request_duration_seconds_count{node="%s",type="PREPARE_REQUEST"}`, f.ID), n},
	} {
		if v, err := testcluster.MetricIn(body, tc.series); err != nil || v < tc.min {
			t.Errorf("%s = %v (%v), want at least %v", tc.series, v, err, tc.min)
		}
	}
	// Raft's and memberlist's metrics reach /metrics through the go-metrics sink, renamed.
	for _, name := range []string{"raft_commit_duration_seconds_count", "memberlist_gossip_duration_seconds_count"} {
		code, body, _ := l.OpsGet(daemon.MetricsPath, true)
		if code != http.StatusOK || !strings.Contains(body, "\n"+name) {
			t.Errorf("the leader's /metrics has no %s series", name)
		}
	}
	// 40 entries past a threshold of 16: some node persisted a snapshot.
	waitFor(t, 30*time.Second, func() bool {
		for _, node := range c.Nodes {
			if v, err := node.Metric(fmt.Sprintf(`duckraft_snapshot_duration_seconds_count{node="%s"}`, node.ID)); err == nil && v >= 1 {
				return true
			}
		}
		return false
	}, func() string { return "no node measured a snapshot" })
}

// grep returns the lines of s that contain sub.
func grep(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return strings.Join(out, "\n")
}

// TestReadyzFollowsReplicaLag checks that a router is ready once it knows
// a leader, then cuts a read replica off from Raft while
// writes go on: gossip still tells it how far the others got, so its lag
// rises past --max-staleness and its /readyz answers 503, while the
// leader's stays 200; healed, it catches up and answers 200 again. Then the
// replica is frozen with SIGSTOP: the leader's /status shows its lag rise
// with every write, and once it runs again it is ready again.
func TestReadyzFollowsReplicaLag(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	const staleness = 5
	c := testcluster.Start(t, 3, testcluster.Options{Replicas: 1, Proxy: true,
		Args: []string{"--max-staleness", fmt.Sprint(staleness)}})
	l := c.WaitForLeader(t, 20*time.Second)
	r := c.Nodes[3]
	conn := l.Client(t)
	exec(t, conn, "CREATE TABLE lag(i INTEGER)")

	readyz := func(n *testcluster.Node) (int, string) {
		code, body, err := n.OpsGet(daemon.ReadyzPath, false)
		if err != nil {
			return 0, err.Error()
		}
		return code, body
	}
	waitReady := func(n *testcluster.Node, want int) {
		t.Helper()
		var code int
		var body string
		waitFor(t, 60*time.Second, func() bool {
			code, body = readyz(n)
			return code == want
		}, func() string { return fmt.Sprintf("%s /readyz answered %d %q, want %d", n.ID, code, body, want) })
	}
	waitReady(r, http.StatusOK)

	// A router is ready once it knows the leader, and shows its metrics
	// and status only to the token.
	router := c.StartRouter(t)
	waitFor(t, 30*time.Second, func() bool {
		code, _, err := router.OpsGet(daemon.ReadyzPath, false)
		return err == nil && code == http.StatusOK
	}, func() string { return "the router's /readyz did not answer 200" })
	// The router keeps the leader changes it sees through gossip.
	waitFor(t, 30*time.Second, func() bool {
		code, body, err := router.OpsGet(daemon.StatusPath, true)
		var st daemon.Status
		if err != nil || code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
			return false
		}
		n := len(st.LeaderChanges)
		return n > 0 && st.LeaderChanges[n-1].Leader == l.ID
	}, func() string {
		_, body, err := router.OpsGet(daemon.StatusPath, true)
		return fmt.Sprintf("the router's /status names no leader change to %s: %s %v", l.ID, body, err)
	})
	for _, path := range []string{daemon.MetricsPath, daemon.StatusPath} {
		if code, body, err := router.OpsGet(path, false); err != nil || code != http.StatusUnauthorized {
			t.Errorf("the router's %s without the token: %d %q %v", path, code, body, err)
		}
		if code, _, err := router.OpsGet(path, true); err != nil || code != http.StatusOK {
			t.Errorf("the router's %s with the token: %d %v", path, code, err)
		}
	}

	c.Isolate(r)
	const writes = 30
	for i := range writes {
		exec(t, conn, fmt.Sprintf("INSERT INTO lag VALUES (%d)", i))
	}
	waitReady(r, http.StatusServiceUnavailable)
	if _, body := readyz(r); !strings.HasPrefix(body, "not ready: ") || len(body) > 200 {
		t.Errorf("a replica behind explains itself as %q", body)
	}
	lagSeries := fmt.Sprintf(`duckraft_apply_lag{node="%s"}`, r.ID)
	waitFor(t, 30*time.Second, func() bool {
		v, err := r.Metric(lagSeries)
		return err == nil && v > staleness
	}, func() string { v, err := r.Metric(lagSeries); return fmt.Sprintf("%s = %v (%v)", lagSeries, v, err) })
	if code, body := readyz(l); code != http.StatusOK {
		t.Errorf("the leader is not ready: %d %q", code, body)
	}

	c.Heal()
	waitReady(r, http.StatusOK)
	if v := metric(t, r, lagSeries); v > staleness {
		t.Errorf("ready with %s = %v", lagSeries, v)
	}

	r.Pause()
	for i := range writes {
		exec(t, conn, fmt.Sprintf("INSERT INTO lag VALUES (%d)", writes+i))
	}
	waitFor(t, 30*time.Second, func() bool {
		st, err := l.OpsStatus()
		if err != nil {
			return false
		}
		for _, m := range st.Members {
			if m.ID == r.ID {
				return m.Lag >= writes
			}
		}
		return false
	}, func() string {
		st, err := l.OpsStatus()
		return fmt.Sprintf("the leader's /status: %+v, %v", st.Members, err)
	})
	r.Resume()
	waitReady(r, http.StatusOK)
	c.WaitConverged(t, 60*time.Second)
}

// TestLagHasOneMeaning checks that every place that shows a member's lag
// says the same: the leader's commit index less the member's applied
// index, 0 on an idle cluster, the leader's row too, even when the log
// ends in a new leader's no-op, which the FSM never applies (status showed
// LAG 1 on every member then, /status and the metric 0). A member removed
// from Raft is shown as removed while gossip still lists it.
func TestLagHasOneMeaning(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := testcluster.Start(t, 3, testcluster.Options{Args: []string{"--reap-after", "3s"}})
	l := c.WaitForLeader(t, 20*time.Second)
	exec(t, l.Client(t), "CREATE TABLE idle(i INTEGER)")
	exec(t, l.Client(t), "INSERT INTO idle VALUES (1)")
	// The new leader commits a no-op, the log's last entry.
	next := c.Others(l)[0]
	if _, err := l.TransferLeadership(next.ID); err != nil {
		t.Fatalf("transfer leadership: %v", err)
	}
	l = c.WaitForLeader(t, 20*time.Second)

	idle := func() string {
		for _, n := range c.Nodes {
			st, err := n.OpsStatus()
			if err != nil {
				return fmt.Sprintf("%s /status: %v", n.ID, err)
			}
			if st.Lag != 0 {
				return fmt.Sprintf("%s /status lag %d", n.ID, st.Lag)
			}
			for _, m := range st.Members {
				if m.Lag != 0 {
					return fmt.Sprintf("%s /status shows %s (applied %d, commit %d) lag %d", n.ID, m.ID, m.Applied, st.Commit, m.Lag)
				}
			}
			if v, err := n.Metric(fmt.Sprintf(`duckraft_apply_lag{node="%s"}`, n.ID)); err != nil || v != 0 {
				return fmt.Sprintf("%s duckraft_apply_lag = %v (%v)", n.ID, v, err)
			}
		}
		return ""
	}
	var why string
	waitFor(t, 30*time.Second, func() bool { why = idle(); return why == "" }, func() string { return "idle cluster: " + why })

	// A killed voter is reaped after 3 s; the others show it removed, not
	// as a voter, as long as gossip lists it.
	gone := c.Others(l)[0]
	gone.Kill()
	var last []string
	waitFor(t, 60*time.Second, func() bool {
		st, err := l.OpsStatus()
		if err != nil {
			return false
		}
		last = last[:0]
		for _, m := range st.Members {
			last = append(last, fmt.Sprintf("%s %s %s in_raft=%v", m.ID, m.Role, m.State, m.InRaft))
			if m.ID == gone.ID && m.Role == "removed" && !m.InRaft {
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("%s killed and reaped; the leader shows %v", gone.ID, last) })
}
