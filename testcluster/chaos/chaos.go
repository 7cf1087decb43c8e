// Package chaos runs workloads against a real duckraft cluster while a
// seeded schedule kills, stops, pauses and partitions its nodes, then
// checks what clients were told against what the cluster holds: no
// acknowledged write lost or applied twice, strong reads linearizable, bank
// totals conserved, sessions reading their own writes, replicas converged.
package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/testcluster"
)

// Config configures a run.
type Config struct {
	// Seed decides the fault schedule and the workloads' choices.
	Seed int64
	// Duration is the length of the fault schedule (holds and calms); the
	// run takes longer by the restarts, the warm-up and the checks.
	Duration time.Duration
	// Voters is the cluster size (default 3).
	Voters int
	// Pace is the longest pause a client takes between operations
	// (default 5 ms): it keeps a 2-core machine responsive.
	Pace time.Duration
	// CheckTimeout bounds the linearizability check (default 2 min).
	CheckTimeout time.Duration
	// DumpDir receives the register history when it is not
	// linearizable (default: a new directory under the system temp dir).
	DumpDir string
	// KeepLogs copies the nodes' logs to DumpDir even when the run passes,
	// to study a slow failover that broke no verdict.
	KeepLogs bool
	// LogStore is the nodes' --raft-log-store ("": duckraftd's default),
	// so that the kills test each store's crash recovery.
	LogStore string
}

func (c *Config) setDefaults() {
	if c.Duration <= 0 {
		c.Duration = 2 * time.Minute
	}
	if c.Voters <= 0 {
		c.Voters = 3
	}
	if c.Pace <= 0 {
		c.Pace = 5 * time.Millisecond
	}
	if c.CheckTimeout <= 0 {
		c.CheckTimeout = 2 * time.Minute
	}
	if c.DumpDir == "" {
		c.DumpDir = filepath.Join(os.TempDir(), fmt.Sprintf("duckraft-chaos-seed-%d", c.Seed))
	}
}

// Run starts a cluster, runs the workloads under the seed's fault
// schedule, heals everything, and checks. It logs the report (also when
// the run stops early) and returns it; the caller decides what fails.
func Run(t *testing.T, cfg Config) *Report {
	t.Helper()
	cfg.setDefaults()
	r := &Report{Seed: cfg.Seed, Duration: cfg.Duration, Plan: plan(cfg.Seed, cfg.Duration)}
	args := []string{"--memory-limit", nodeMemory}
	if cfg.LogStore != "" {
		args = append(args, "--raft-log-store", cfg.LogStore)
	}
	c := testcluster.Start(t, cfg.Voters, testcluster.Options{Proxy: true, Args: args})
	var lag *lagSampler
	defer func() {
		if r.Failed() || t.Failed() || cfg.KeepLogs {
			r.LogDir = dumpLogs(c, lag, cfg.DumpDir)
		}
		t.Log("\n" + r.String())
	}()

	setup := c.WaitForLeader(t, 20*time.Second).Client(t)
	for _, sql := range schema {
		if err := exec(context.Background(), setup, sql); err != nil {
			t.Fatalf("setup %q: %v", sql, err)
		}
	}

	rec := newRecorder()
	r.Start = rec.start
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	wl := startWorkloads(ctx, cfg.Seed, c.Nodes, rec, cfg.Pace)
	lag = startLagSampler(ctx, c, rec.start)

	ch := &chaos{t: t, c: c, rec: rec, lag: lag}
	time.Sleep(2 * time.Second) // warm-up: the report's figures start from a working cluster
	for i, s := range r.Plan {
		if ev := ch.run(s); ev != nil {
			ev.step = i + 1
			r.Events = append(r.Events, *ev)
		}
	}
	time.Sleep(time.Second)
	stop()
	wl.wait()
	lag.stop()
	r.Elapsed = time.Duration(rec.now())

	// Everything back: heal, resume, restart.
	c.Heal()
	for _, n := range c.Nodes {
		if n.Paused() {
			n.Resume()
		}
		if !n.Running() {
			n.Restart(t)
		}
	}
	c.WaitForLeader(t, 20*time.Second)
	hash := c.WaitConverged(t, 60*time.Second)
	r.Verdicts = append(r.Verdicts, verdict{name: "replicas converged", ok: true, detail: "state hash " + hash})

	r.collect(rec, lag, c.LinkStats())
	r.Verdicts = append(r.Verdicts, finalChecks(t, c, wl)...)
	r.Verdicts = append(r.Verdicts,
		violations(rec, "bank", "bank totals conserved at every read"),
		violations(rec, "session", "sessions read their own writes"),
		linearizable(wl.history(), cfg.CheckTimeout, cfg.DumpDir),
		impossibleWritesRefused(r.Events),
		r.failoverVerdict())
	return r
}

// dumpLogs writes every node's full log into dir, to read a failing run
// by wall-clock time against the report; it returns dir, or why not.
func dumpLogs(c *testcluster.Cluster, lag *lagSampler, dir string) string {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Sprintf("(not written: %v)", err)
	}
	if lag != nil {
		lag.mu.Lock()
		timeline := lag.timeline.String()
		lag.mu.Unlock()
		if err := os.WriteFile(filepath.Join(dir, "status.tsv"), []byte(timeline), 0o644); err != nil {
			return fmt.Sprintf("(not written: %v)", err)
		}
	}
	for _, n := range c.Nodes {
		if err := os.WriteFile(filepath.Join(dir, n.ID+".log"), []byte(n.Log()), 0o644); err != nil {
			return fmt.Sprintf("(not written: %v)", err)
		}
	}
	return dir
}

// finalChecks reads every node's tables after convergence: the appends
// against what clients were told, the bank's total.
func finalChecks(t *testing.T, c *testcluster.Cluster, wl *workloads) []verdict {
	t.Helper()
	clients := wl.appended()
	var out []verdict
	for _, n := range c.Nodes {
		conn := n.Client(t)
		if err := exec(context.Background(), conn, "SET duckraft_consistency = 'any'"); err != nil {
			t.Fatalf("%s: %v", n.ID, err)
		}
		held, err := appendsHeld(conn)
		if err != nil {
			t.Fatalf("%s: read appends: %v", n.ID, err)
		}
		out = append(out, checkAppends(n.ID, clients, held))
		row, err := queryRow(context.Background(), conn, "SELECT CAST(sum(balance) AS BIGINT), count(*) FROM bank")
		if err != nil {
			t.Fatalf("%s: read bank: %v", n.ID, err)
		}
		out = append(out, verdict{name: "bank total on " + n.ID, ok: row[0] == bankAccounts*bankBalance && row[1] == bankAccounts,
			detail: fmt.Sprintf("%d over %d accounts", row[0], row[1])})
	}
	return out
}

func appendsHeld(conn *client.Conn) (appendCounts, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := conn.Query(ctx, "SELECT id, count(*) FROM appends GROUP BY id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	held := appendCounts{}
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			return nil, err
		}
		id, ok1 := v[0].(int64)
		n, ok2 := v[1].(int64)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("appends row %T, %T", v[0], v[1])
		}
		held[id] = int(n)
	}
	return held, rows.Err()
}

func violations(rec *recorder, checker, name string) verdict {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	v := rec.violations[checker]
	if len(v) == 0 {
		return verdict{name: name, ok: true, detail: "no violation"}
	}
	d := fmt.Sprintf("%d violations, first: %s", len(v), v[0])
	if len(v) > 1 {
		d += "; last: " + v[len(v)-1]
	}
	return verdict{name: name, detail: d}
}

// chaos executes schedule steps against a cluster.
type chaos struct {
	t   *testing.T
	c   *testcluster.Cluster
	rec *recorder
	lag *lagSampler
}

// run injects one step's fault, holds it, repairs it and waits out the
// calm. It returns what happened, or nil if the step found no leader to
// aim at.
func (ch *chaos) run(s step) *event {
	ch.t.Helper()
	leader := ch.waitLeader(10 * time.Second)
	if leader == nil {
		return &event{fault: s.Fault, skipped: "no leader within 10 s"}
	}
	followers := ch.c.Others(leader)
	picked := followers[s.Pick%len(followers)]
	target := leader
	if !s.Fault.onLeader() {
		target = picked
	}
	ev := &event{fault: s.Fault, node: target.ID, at: ch.rec.now(), hold: s.Hold}
	ch.lag.fault(target.ID, true)
	switch s.Fault {
	case killLeader, killFollower:
		target.Kill()
		time.Sleep(s.Hold)
		target.Restart(ch.t)
	case stopLeader:
		target.Stop()
		time.Sleep(s.Hold)
		target.Restart(ch.t)
	case pauseLeader, pauseFollower:
		target.Pause()
		time.Sleep(s.Hold)
		target.Resume()
	case isolateLeader, isolateFollower, flapLeader:
		ch.c.Isolate(target)
		time.Sleep(s.Hold)
		ch.c.Heal()
	case silenceLeader, silenceFollower:
		ch.c.IsolateSilently(target)
		time.Sleep(s.Hold)
		ch.c.Heal()
	case pressureLeader, pressureFollower:
		ctx, cancel := context.WithTimeout(context.Background(), s.Hold)
		ran, failed := pressure(ctx, target)
		cancel()
		ev.detail = fmt.Sprintf("%d reads, %d of them refused or interrupted", ran, failed)
	case impossibleWrite:
		target = picked
		ev.node = target.ID
		ev.detail = tryImpossibleWrite(context.Background(), target)
		time.Sleep(s.Hold)
	case hostileLeader:
		ctx, cancel := context.WithTimeout(context.Background(), s.Hold)
		ev.detail = hostile(ctx, target)
		cancel()
	case transferLeader:
		if now, err := target.TransferLeadership(picked.ID); err != nil {
			ev.detail = fmt.Sprintf("transfer to %s failed: %v", picked.ID, err)
		} else {
			ev.detail = "to " + now
		}
		time.Sleep(s.Hold)
	}
	time.Sleep(s.Calm)
	ch.lag.fault(target.ID, false)
	return ev
}

// waitLeader polls for a leader without failing the test: a step that
// finds none is skipped and reported.
func (ch *chaos) waitLeader(timeout time.Duration) *testcluster.Node {
	deadline := time.Now().Add(timeout)
	for {
		if l := ch.c.Leader(); l != nil {
			return l
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lagSampler polls every node's applied index against the leader's commit
// index, separately for nodes under a fault (down, paused, cut off or
// catching up since) and the others.
type lagSampler struct {
	mu       sync.Mutex
	faulted  map[string]bool
	healthy  uint64 // largest lag of a node not under a fault
	any      uint64 // largest lag of any answering node
	healthyN string
	timeline strings.Builder // one line per node per sample, kept with the logs
	start    time.Time
	done     chan struct{}
	stopped  chan struct{}
}

func startLagSampler(ctx context.Context, c *testcluster.Cluster, start time.Time) *lagSampler {
	l := &lagSampler{faulted: map[string]bool{}, start: start, done: make(chan struct{}), stopped: make(chan struct{})}
	l.timeline.WriteString("seconds\tnode\tstate\tapplied\tcommit\terror\n")
	go func() {
		defer close(l.stopped)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-l.done:
				return
			case <-tick.C:
				l.sample(c)
			}
		}
	}()
	return l
}

func (l *lagSampler) fault(id string, on bool) {
	l.mu.Lock()
	l.faulted[id] = on
	l.mu.Unlock()
}

func (l *lagSampler) sample(c *testcluster.Cluster) {
	type obs struct {
		id      string
		applied uint64
	}
	var seen []obs
	var commit uint64
	var lines strings.Builder
	for _, n := range c.Nodes {
		if !n.Running() || n.Paused() {
			continue
		}
		at := time.Since(l.start).Seconds()
		st, err := n.Status()
		if err != nil {
			fmt.Fprintf(&lines, "%.2f\t%s\t\t\t\t%v\n", at, n.ID, err)
			continue
		}
		fmt.Fprintf(&lines, "%.2f\t%s\t%s\t%d\t%d\t\n", at, n.ID, st.State, st.Applied, st.Commit)
		if st.State == "Leader" {
			commit = max(commit, st.Commit)
		}
		seen = append(seen, obs{n.ID, st.Applied})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timeline.WriteString(lines.String())
	for _, o := range seen {
		if o.applied >= commit {
			continue
		}
		lag := commit - o.applied
		l.any = max(l.any, lag)
		if !l.faulted[o.id] && lag > l.healthy {
			l.healthy, l.healthyN = lag, o.id
		}
	}
}

func (l *lagSampler) stop() {
	close(l.done)
	<-l.stopped
}
