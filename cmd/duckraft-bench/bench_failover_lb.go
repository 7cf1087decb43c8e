package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/testcluster/endpoint"
)

// bench failover --via measures what the clients of a cluster reached
// through one endpoint see when a node dies: a load balancer, configured as
// deploy/ says, in front of 3 duckraftd processes, and Go clients of both
// generations running reads and single writes through it, while in turn
// the node holding most sessions (not the leader) and the leader are
// killed with SIGKILL, each restarted before the next kill.

// Kinds of kill.
const (
	killHolder = "holder" // the non-leader holding most sessions
	killLeader = "leader"
)

// Issue 32's goal for a node's death behind one endpoint.
const lbGoalP99 = 2 * time.Second

const (
	// lbThink is each client's pause between statements: the load leaves
	// the machine room to restart nodes, and a gap is measured to within
	// a statement plus this.
	lbThink = 20 * time.Millisecond
	// lbSettle is how long the load runs on a whole cluster again before
	// the next kill: longer than nginx's fail_timeout (2 s) and HAProxy's
	// two checks a second apart, so that both send to the node again.
	lbSettle = 3 * time.Second
	// lbWarmup is the load's run before the first kill.
	lbWarmup = 3 * time.Second
)

// lbFailoverResult is bench failover --via's answer.
type lbFailoverResult struct {
	Via       string  `json:"via"`
	Q1Clients int     `json:"q1_clients"`
	Q3Clients int     `json:"q3_clients"`
	DownSec   float64 `json:"down_sec"`
	// Statements counts those that succeeded over the run.
	Statements int      `json:"statements"`
	Kills      []lbKill `json:"kills"`
	// WarmupFailed are statements that failed before the first kill.
	WarmupFailed map[string]int `json:"warmup_failed,omitempty"`
}

// lbKill is what one kill did to the clients, from the kill to the next
// (or the end of the run).
type lbKill struct {
	Kind  string  `json:"kind"`
	Node  string  `json:"node"`
	AtSec float64 `json:"at_sec"`
	// Held counts the clients' sessions the node held just before, as
	// the affinity cookie of their last answers said.
	Held int `json:"sessions_held"`
	// GapsMs are the clients' unavailability (endpoint.Gap), by
	// generation.
	GapsMs map[string][]float64 `json:"gaps_ms"`
	// Failed counts the statements that failed, by generation and code
	// (endpoint.FailureKey).
	Failed map[string]map[string]int `json:"failed,omitempty"`
	// Lost are the sessions that ended: their clients connected again.
	Lost []lostSession `json:"sessions_lost,omitempty"`
	// From the metrics of the nodes that lived, over the node's downtime:
	// requests forwarded by outcome (duckraft_forwarded_requests_total),
	// sessions adopted and lost.
	Forwarded   map[string]float64 `json:"forwarded"`
	Adopted     float64            `json:"adopted"`
	AdoptFailed float64            `json:"adopt_failed"`
	LostCounted float64            `json:"lost_counted"`
}

// lostSession is a session that ended under its client.
type lostSession struct {
	Generation string `json:"generation"`
	Code       string `json:"code"`
	// Held is what the session held when it ended: "open result", or ""
	// for nothing a session may lose (issue 32 allows the loss of a
	// session holding an open result, temporary object or transaction).
	Held string `json:"held,omitempty"`
}

func (l lostSession) allowed() bool { return l.Held != "" }

// balancerKind is --via's balancer: lb means nginx.
func balancerKind(via string) (string, error) {
	switch via {
	case "lb", endpoint.Nginx:
		return endpoint.Nginx, nil
	case endpoint.HAProxy:
		return endpoint.HAProxy, nil
	}
	return "", fmt.Errorf("--via %q: lb (nginx), nginx or haproxy", via)
}

// benchFailoverVia runs bench failover --via: kills of each kind, with
// clients sessions split between Q1 and Q3.
func benchFailoverVia(bf benchFlags, via string, clients, kills int, down, timeout time.Duration, stdout, stderr io.Writer) error {
	kind, err := balancerKind(via)
	if err != nil {
		return err
	}
	if len(bf.servers.List()) > 0 {
		return errors.New("--via needs a local cluster: it kills and restarts the nodes' processes")
	}
	if clients < 2 || kills < 1 || down <= 0 {
		return errors.New("--via wants --clients ≥ 2 (split between Q1 and Q3), --kills ≥ 1 and --down > 0")
	}
	if systems, err := parseSystems(bf.systems, ""); err != nil || len(systems) != 1 || systems[0].String() != "duckraft-3" {
		return errors.New("--via runs duckraft-3: deploy/'s configurations name three nodes")
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	dir, cleanup, err := benchWorkDir("duckraft-bench-failover-lb-")
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Fprintln(stderr, "bench: starting duckraft-3 with operations addresses")
	nodes, err := startBenchNodes(bf.daemon, dir, benchToken, 3, true, strings.Fields(bf.daemonFlags)...)
	if err != nil {
		return err
	}
	defer func() { stopBenchCluster(nodes) }()
	lbDir := filepath.Join(dir, kind)
	if err := os.Mkdir(lbDir, 0o700); err != nil {
		return err
	}
	var backends []endpoint.Backend
	for _, n := range nodes {
		backends = append(backends, endpoint.Backend{ID: n.id, QuackAddr: n.quack, HTTPAddr: n.http})
	}
	fmt.Fprintf(stderr, "bench: starting %s in front of them\n", kind)
	lb, err := endpoint.Start(endpoint.Options{Kind: kind, Root: root, Dir: lbDir, Backends: backends})
	if err != nil {
		return err
	}
	defer lb.Close()

	ctx := context.Background()
	setup, err := client.Connect(ctx, lb.Server(), lb.ClientOptions(benchToken, wire.Q1))
	if err != nil {
		return fmt.Errorf("connect through %s: %w", kind, err)
	}
	_, err = setup.Exec(ctx, "CREATE TABLE lbbench(w INTEGER, s BIGINT)")
	setup.Close()
	if err != nil {
		return err
	}

	res := &lbFailoverResult{Via: kind, Q1Clients: (clients + 1) / 2, Q3Clients: clients / 2, DownSec: down.Seconds()}
	rep := &benchReport{Bench: "failover-lb", Machine: describeMachine(ctx, ""), FailoverLB: res}
	start := time.Now()
	stop := make(chan struct{})
	workers := make([]*lbClient, clients)
	var wg sync.WaitGroup
	for i := range workers {
		g := wire.Q1
		if i >= res.Q1Clients {
			g = wire.Q3
		}
		c := &lbClient{w: i, gen: g}
		c.opts = holderRecorded(lb.ClientOptions(benchToken, g), &c.holder)
		workers[i] = c
		wg.Go(func() { c.run(lb.Server(), timeout, stop) })
	}
	cl := &lbCluster{nodes: nodes, token: benchToken, clients: workers}
	var killed []time.Time
	err = func() error {
		time.Sleep(lbWarmup)
		for round := range kills {
			for _, what := range []string{killHolder, killLeader} {
				fmt.Fprintf(stderr, "bench: kill %d of %d: the %s\n", len(killed)+1, 2*kills, what)
				k, at, err := cl.kill(what, down, start, stderr)
				if err != nil {
					return fmt.Errorf("round %d, %s kill: %w", round+1, what, err)
				}
				res.Kills = append(res.Kills, k)
				killed = append(killed, at)
			}
		}
		return nil
	}()
	close(stop)
	wg.Wait()
	if err != nil {
		return withLogTail(err, dir)
	}
	end := time.Now()
	for i := range res.Kills {
		until := end
		if i+1 < len(killed) {
			until = killed[i+1]
		}
		res.Kills[i].measure(workers, killed[i], until)
	}
	res.WarmupFailed = map[string]int{}
	for _, w := range workers {
		res.Statements += len(w.successes)
		for _, f := range w.failures {
			if f.at.Before(killed[0]) {
				res.WarmupFailed[f.key]++
			}
		}
	}
	return rep.print(stdout, bf.json)
}

// repoRoot is the repository the benchmark runs in, which holds deploy/:
// the working directory or the nearest above it that does.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "deploy", "haproxy.cfg")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("--via reads the balancers' configurations from deploy/: run it in duckraft's repository, not in %s", dir)
		}
	}
}

// lbCluster is the local cluster bench failover --via kills nodes of,
// and the clients whose sessions it holds.
type lbCluster struct {
	nodes   []*benchNode
	token   string
	clients []*lbClient
}

// kill waits until the cluster is whole, kills the node what names with
// SIGKILL, lets the load run on the others for down, and restarts it.
func (c *lbCluster) kill(what string, down time.Duration, start time.Time, stderr io.Writer) (lbKill, time.Time, error) {
	if err := c.waitWhole(120 * time.Second); err != nil {
		return lbKill{}, time.Time{}, err
	}
	leader, err := c.leader()
	if err != nil {
		return lbKill{}, time.Time{}, err
	}
	sessions := map[string]int{}
	for _, w := range c.clients {
		if h, _ := w.holder.Load().(string); h != "" {
			sessions[h]++
		}
	}
	target := leader
	if what == killHolder {
		target = nil
		for _, n := range c.nodes {
			if n != leader && (target == nil || sessions[n.id] > sessions[target.id]) {
				target = n
			}
		}
	}
	var others []*benchNode
	for _, n := range c.nodes {
		if n != target {
			others = append(others, n)
		}
	}
	before, err := c.moves(others)
	if err != nil {
		return lbKill{}, time.Time{}, err
	}
	fmt.Fprintf(stderr, "bench: SIGKILL %s (%s, %d sessions)\n", target.id, what, sessions[target.id])
	at := time.Now()
	if err := target.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return lbKill{}, time.Time{}, err
	}
	target.cmd.Wait()
	time.Sleep(down)
	after, err := c.moves(others)
	if err != nil {
		return lbKill{}, time.Time{}, err
	}
	k := lbKill{Kind: what, Node: target.id, AtSec: at.Sub(start).Seconds(), Held: sessions[target.id], Forwarded: map[string]float64{}}
	for key, v := range after {
		d := v - before[key]
		switch key {
		case "adopted":
			k.Adopted = d
		case "adopt_failed":
			k.AdoptFailed = d
		case "lost":
			k.LostCounted = d
		default:
			k.Forwarded[key] = d
		}
	}
	if err := target.restart(others[0].gossip); err != nil {
		return lbKill{}, time.Time{}, err
	}
	if err := c.waitWhole(120 * time.Second); err != nil {
		return lbKill{}, time.Time{}, err
	}
	time.Sleep(lbSettle)
	return k, at, nil
}

// restart starts the node again with its data directory, joining gossip
// through join: the first node bootstrapped alone and names no other.
func (n *benchNode) restart(join string) error {
	args := slices.Clone(n.args)
	if i := slices.Index(args, "--join"); i >= 0 {
		args[i+1] = join
	} else {
		args = append(args, "--join", join)
	}
	logf, err := daemonLog(n.dir)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(n.daemon, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restart %s: %w", n.id, err)
	}
	n.cmd = cmd
	return nil
}

// waitWhole waits until every node is ready (/readyz) and votes.
func (c *lbCluster) waitWhole(timeout time.Duration) error {
	var why string
	ok := pollUntil(timeout, 200*time.Millisecond, func() bool {
		for _, n := range c.nodes {
			if code, _, err := c.get(n, "/readyz"); err != nil || code != http.StatusOK {
				why = fmt.Sprintf("%s not ready (%d, %v)", n.id, code, err)
				return false
			}
		}
		l, err := c.leader()
		if err != nil {
			why = err.Error()
			return false
		}
		st, err := nodeStatus(l.quack, c.token)
		if _, voting := raftCounts(st); err != nil || voting != len(c.nodes) {
			why = fmt.Sprintf("%d of %d nodes vote (%v)", voting, len(c.nodes), err)
			return false
		}
		return true
	})
	if !ok {
		return fmt.Errorf("the cluster was not whole again within %s: %s", timeout, why)
	}
	return nil
}

// leader is the node the live nodes name leader.
func (c *lbCluster) leader() (*benchNode, error) {
	for _, n := range c.nodes {
		if st, err := nodeStatus(n.quack, c.token); err == nil {
			if l := leaderOf(st, c.nodes); l != nil {
				return l, nil
			}
		}
	}
	return nil, errors.New("no node names a leader")
}

// moves sums the session-move counters of nodes: forwards by outcome,
// adoptions and lost sessions.
func (c *lbCluster) moves(nodes []*benchNode) (map[string]float64, error) {
	out := map[string]float64{}
	for _, n := range nodes {
		body, err := c.scrape(n)
		if err != nil {
			return nil, err
		}
		for _, o := range []string{"relayed", "retried", "lost", "canceled"} {
			out[o] += metricSum(body, "duckraft_forwarded_requests_total", `outcome="`+o+`"`)
		}
		out["adopted"] += metricSum(body, "duckraft_sessions_adopted_total", `outcome="ok"`)
		out["adopt_failed"] += metricSum(body, "duckraft_sessions_adopted_total", `outcome="error"`)
		out["lost"] += metricSum(body, "duckraft_sessions_lost_total")
	}
	return out, nil
}

func (c *lbCluster) scrape(n *benchNode) (string, error) {
	code, body, err := c.get(n, "/metrics")
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("answered %d", code)
	}
	if err != nil {
		return "", fmt.Errorf("%s /metrics: %w", n.id, err)
	}
	return body, nil
}

// get asks n's operations address for path, with the token.
func (c *lbCluster) get(n *benchNode, path string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.http+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// metricSum sums the series of metric name in a Prometheus text body whose
// labels include each of labels (`outcome="ok"`).
func metricSum(body, name string, labels ...string) float64 {
	var sum float64
	for line := range strings.Lines(body) {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		var set string
		if rest[0] == '{' {
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				continue
			}
			set, rest = rest[:end+1], rest[end+1:]
		}
		if slices.ContainsFunc(labels, func(l string) bool { return !strings.Contains(set, l) }) {
			continue
		}
		if f := strings.Fields(rest); len(f) > 0 {
			v, _ := strconv.ParseFloat(f[0], 64)
			sum += v
		}
	}
	return sum
}

// lbClient is one client through the balancer: a session of generation
// gen, opened again when one ends.
type lbClient struct {
	w    int
	gen  wire.Generation
	opts client.Options
	// holder is the node holding the session, from the affinity cookie
	// of its last answer.
	holder    atomic.Value
	successes []time.Time
	failures  []lbFailure
	lost      []lbLost
}

// holderRecorded are opts with a transport that stores in holder the node
// each answer's affinity cookie names: every node sets it to the node
// holding the session, whichever node answered. The cookie is only read;
// whether the client keeps it is opts' jar's business.
func holderRecorded(opts client.Options, holder *atomic.Value) client.Options {
	var jar http.CookieJar
	var base http.RoundTripper = &http.Transport{TLSClientConfig: opts.TLSConfig, MaxIdleConnsPerHost: 16,
		IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	if opts.HTTPClient != nil {
		jar, base = opts.HTTPClient.Jar, opts.HTTPClient.Transport
	}
	opts.HTTPClient = &http.Client{Jar: jar, Transport: &cookieWatch{base: base, holder: holder}}
	return opts
}

type cookieWatch struct {
	base   http.RoundTripper
	holder *atomic.Value
}

func (c *cookieWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err == nil {
		for _, ck := range resp.Cookies() {
			if ck.Name == node.AffinityCookie {
				c.holder.Store(ck.Value)
			}
		}
	}
	return resp, err
}

type lbFailure struct {
	at  time.Time
	key string
}

type lbLost struct {
	at time.Time
	lostSession
}

// run sends statements until stop: a write of one row, a read of the
// client's rows and a read over every row, in turn.
func (c *lbClient) run(server string, timeout time.Duration, stop <-chan struct{}) {
	var conn *client.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		case <-time.After(lbThink):
		}
		if conn == nil {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			var err error
			conn, err = client.Connect(ctx, server, c.opts)
			cancel()
			if err != nil {
				c.failures = append(c.failures, lbFailure{time.Now(), "connect: " + endpoint.FailureKey(err)})
				continue
			}
		}
		held, err := c.statement(conn, seq, timeout)
		if err == nil {
			c.successes = append(c.successes, time.Now())
			continue
		}
		now := time.Now()
		c.failures = append(c.failures, lbFailure{now, endpoint.FailureKey(err)})
		if endpoint.SessionEnded(err) {
			c.lost = append(c.lost, lbLost{now, lostSession{Generation: fmt.Sprintf("Q%d", c.gen), Code: endpoint.Code(err), Held: held}})
			conn.Close()
			conn = nil
		}
	}
}

// statement runs the client's statement seq; held says what the session
// held when it failed.
func (c *lbClient) statement(conn *client.Conn, seq int, timeout time.Duration) (held string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var sql string
	switch seq % 3 {
	case 0:
		_, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO lbbench VALUES (%d, %d)", c.w, seq))
		return "", err
	case 1:
		sql = fmt.Sprintf("SELECT count(*) FROM lbbench WHERE w = %d", c.w)
	default:
		sql = "SELECT max(s) FROM lbbench"
	}
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		return "open result", err
	}
	return "", nil
}

// measure fills k with what the workers saw from the kill at at until the
// next kill.
func (k *lbKill) measure(workers []*lbClient, at, until time.Time) {
	k.GapsMs = map[string][]float64{}
	k.Failed = map[string]map[string]int{}
	for _, w := range workers {
		g := fmt.Sprintf("Q%d", w.gen)
		if gap, ok := endpoint.Gap(w.successes, at); ok {
			k.GapsMs[g] = append(k.GapsMs[g], float64(gap.Microseconds())/1000)
		}
		for _, f := range w.failures {
			if !f.at.Before(at) && f.at.Before(until) {
				if k.Failed[g] == nil {
					k.Failed[g] = map[string]int{}
				}
				k.Failed[g][f.key]++
			}
		}
		for _, l := range w.lost {
			if !l.at.Before(at) && l.at.Before(until) {
				k.Lost = append(k.Lost, l.lostSession)
			}
		}
	}
	for _, g := range k.GapsMs {
		slices.Sort(g)
	}
}

// lbRow is one line of the summary: the kills of a kind, for the clients
// of a generation.
type lbRow struct {
	kind, gen         string
	kills, clients    int
	p50, p99, max     time.Duration
	lost, lostAllowed int
	failed            map[string]int
}

// summary pools the kills of each kind, per generation.
func (r *lbFailoverResult) summary() []lbRow {
	var rows []lbRow
	for _, kind := range []string{killHolder, killLeader} {
		for _, gen := range []string{"Q1", "Q3"} {
			row := lbRow{kind: kind, gen: gen, failed: map[string]int{}}
			var gaps []time.Duration
			for _, k := range r.Kills {
				if k.Kind != kind {
					continue
				}
				row.kills++
				for _, ms := range k.GapsMs[gen] {
					gaps = append(gaps, time.Duration(ms*float64(time.Millisecond)))
				}
				for key, n := range k.Failed[gen] {
					row.failed[key] += n
				}
				for _, l := range k.Lost {
					if l.Generation != gen {
						continue
					}
					if l.allowed() {
						row.lostAllowed++
					} else {
						row.lost++
					}
				}
			}
			if row.kills == 0 {
				continue
			}
			slices.Sort(gaps)
			row.clients = len(gaps)
			row.p50, row.p99 = endpoint.Percentile(gaps, 0.5), endpoint.Percentile(gaps, 0.99)
			if len(gaps) > 0 {
				row.max = gaps[len(gaps)-1]
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// goalMet says whether every kind and generation met issue 32's goal:
// p99 within lbGoalP99, and no session lost that held nothing it may
// lose.
func goalMet(rows []lbRow) bool {
	for _, r := range rows {
		if r.clients == 0 || r.p99 > lbGoalP99 || r.lost > 0 {
			return false
		}
	}
	return len(rows) > 0
}

// codes renders failures by code, most first.
func codes(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d × %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}

func millis(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// lbFailoverIntro says what the run measured.
func lbFailoverIntro(r *lbFailoverResult) string {
	how := "round robin with no stickiness, TLS (deploy/nginx-one-endpoint.conf)"
	if r.Via == endpoint.HAProxy {
		how = "the affinity cookie, which the Q3 clients keep and the Q1 clients do not, /readyz checked (deploy/haproxy.cfg)"
	}
	return fmt.Sprintf("Three duckraftd processes behind %s, %s. %d Q1 and %d Q3 Go client sessions run a write of one row, a "+
		"read of their rows and a read over all rows in turn, %s apart, through it. In turn the node holding most sessions (not "+
		"the leader) and the leader get SIGKILL, stay down %.0f s, and are restarted; the next kill waits until the cluster is whole "+
		"again. A client's gap is the time from its last statement that succeeded before the kill to its first after; a session is "+
		"lost when its client must connect again; a statement failed is counted from its kill to the next. Its sessions are the clients' "+
		"sessions the node held, as the affinity cookie of their last answers said; adopted and forwarded are the living nodes' "+
		"metrics over the downtime. "+
		"%d statements succeeded.\n\n", r.Via, how, r.Q1Clients, r.Q3Clients, lbThink, r.DownSec, r.Statements)
}

// failoverLBTables renders the summary, the goal and each kill.
func failoverLBTables(b *strings.Builder, r *lbFailoverResult) {
	rows := r.summary()
	fmt.Fprintln(b, "| kill | clients | kills | gaps | p50 ms | p99 ms | max ms | sessions lost (allowed) | statements failed, by code |")
	fmt.Fprintln(b, "|---|---|---|---|---|---|---|---|---|")
	for _, row := range rows {
		fmt.Fprintf(b, "| %s | %s | %d | %d | %s | **%s** | %s | %d (%d) | %s |\n", row.kind, row.gen, row.kills, row.clients,
			millis(row.p50), millis(row.p99), millis(row.max), row.lost+row.lostAllowed, row.lostAllowed, codes(row.failed))
	}
	verdict := "**not met**"
	if goalMet(rows) {
		verdict = "**met**"
	}
	fmt.Fprintf(b, "\nGoal (issue 32): p99 ≤ %s for every kind of kill and generation, and no session lost that held no open "+
		"result, temporary object or transaction: %s.\n\n", lbGoalP99, verdict)
	fmt.Fprintln(b, "| # | kill | node | its sessions | at s | Q1 gaps ms | Q3 gaps ms | adopted | forwarded: relayed, retried, lost | sessions lost |")
	fmt.Fprintln(b, "|---|---|---|---|---|---|---|---|---|---|")
	for i, k := range r.Kills {
		fmt.Fprintf(b, "| %d | %s | %s | %d | %.1f | %s | %s | %.0f | %.0f, %.0f, %.0f | %d |\n", i+1, k.Kind, k.Node, k.Held, k.AtSec,
			gapList(k.GapsMs["Q1"]), gapList(k.GapsMs["Q3"]), k.Adopted, k.Forwarded["relayed"], k.Forwarded["retried"], k.Forwarded["lost"], len(k.Lost))
	}
	if len(r.WarmupFailed) > 0 {
		fmt.Fprintf(b, "\nBefore the first kill: %s.\n", codes(r.WarmupFailed))
	}
}

func gapList(gaps []float64) string {
	var parts []string
	for _, g := range gaps {
		parts = append(parts, strconv.FormatFloat(g, 'f', 0, 64))
	}
	return strings.Join(parts, " ")
}
