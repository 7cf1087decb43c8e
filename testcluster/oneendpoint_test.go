package testcluster_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/testcluster"
	"github.com/duckraft/duckraft/testcluster/endpoint"
)

var oneEndpointRounds = flag.Int("one-endpoint-rounds", 1, "times each node is killed in the one-endpoint tests (a long run: 5)")

// TestOneEndpointNginx puts Debian's nginx, configured as
// deploy/nginx-one-endpoint.conf says (round robin, no stickiness, TLS),
// in front of three duckraftd processes, and runs Go clients of both
// generations through it: reads at every consistency level, single
// writes, transactions, appends and insert streams, while each node in
// turn is killed with SIGKILL and restarted. Every session goes on under
// its id; no acknowledged write is lost or applied twice, no transaction
// applies in part, and no read misses the session's own write.
func TestOneEndpointNginx(t *testing.T) {
	ensureNginx(t)
	c := testcluster.Start(t, 3, testcluster.Options{})
	c.WaitForLeader(t, 30*time.Second)
	lb := startBalancer(t, endpoint.Nginx, c)
	r := runOneEndpoint(t, c, func(g wire.Generation, _ int) client.Options {
		return lb.ClientOptions(testcluster.Token, g)
	}, lb.Server())
	r.check(t)
	if n := lb.Requests(); n < 100 {
		t.Errorf("nginx logged %d Quack requests", n)
	}
}

// TestOneEndpointHAProxy puts Debian's HAProxy, configured as
// deploy/haproxy.cfg says (the affinity cookie, /readyz checked on each
// node's --http address), in front of three duckraftd processes, with
// Go clients that keep cookies, as DuckDB 2.0 does, and Q1 clients that
// keep none, as DuckDB 1.5: the same workload and kills as behind nginx,
// the same guarantees, and the cookie's clients are forwarded between
// nodes only after their node died.
func TestOneEndpointHAProxy(t *testing.T) {
	ensureDebian(t, endpoint.HAProxy)
	c := testcluster.Start(t, 3, testcluster.Options{})
	c.WaitForLeader(t, 30*time.Second)
	lb := startBalancer(t, endpoint.HAProxy, c)
	r := runOneEndpoint(t, c, func(g wire.Generation, _ int) client.Options {
		return lb.ClientOptions(testcluster.Token, g)
	}, lb.Server())
	r.check(t)
	// The cookie keeps a Q3 session on its node: its requests were
	// forwarded only while their node was down, so far fewer than those
	// of the Q1 sessions, which go round robin.
	t.Logf("forwarded requests: %d of sessions that keep the cookie, %d of those that do not", r.forwarded(c, wire.Q3), r.forwarded(c, wire.Q1))
	if q3, q1 := r.forwarded(c, wire.Q3), r.forwarded(c, wire.Q1); q3*4 > q1 {
		t.Errorf("sessions with the affinity cookie were forwarded %d times, those without %d: the cookie does not keep them on their node", q3, q1)
	}
}

// startBalancer runs the balancer kind in front of c's three nodes, as
// deploy/ configures it (endpoint.Start), until the test ends.
func startBalancer(t *testing.T, kind string, c *testcluster.Cluster) *endpoint.Balancer {
	t.Helper()
	var backends []endpoint.Backend
	for _, n := range c.Nodes {
		backends = append(backends, endpoint.Backend{ID: n.ID, QuackAddr: n.QuackAddr, HTTPAddr: n.HTTPAddr})
	}
	lb, err := endpoint.Start(endpoint.Options{Kind: kind, Root: "..", Dir: t.TempDir(), Backends: backends})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lb.Close()
		if t.Failed() {
			t.Logf("--- %s ---\n%s", kind, lb.Log())
		}
	})
	return lb
}

// endpointRun is what a one-endpoint workload saw.
type endpointRun struct {
	mu sync.Mutex
	// acked are the rows whose write was acknowledged; txns the first
	// row of each acknowledged transaction, whose second row is s+1.
	acked map[[2]int64]bool
	txns  map[[2]int64]bool
	// pairs are the first rows of every transaction sent, acknowledged or
	// not: its two rows apply together or not at all.
	pairs    [][2]int64
	failures map[string]int
	ryw      []string
	// successes are the times each worker's statements succeeded; kills
	// when each node was killed.
	successes map[int][]time.Time
	kills     []time.Time
	killed    []string
	// sessions of each worker: its session ids in order, and its
	// generation.
	sessions map[int][]string
	gens     map[int]wire.Generation
	conn     *client.Conn
}

// Workers per generation, and the statements of one round of a worker.
const endpointWorkers = 3

// runOneEndpoint runs the workload through the endpoint server with
// endpointWorkers workers of each generation, each with the options
// optsFor gives, while each node of c in turn is killed and restarted,
// then reads the table back through the endpoint.
func runOneEndpoint(t *testing.T, c *testcluster.Cluster, optsFor func(wire.Generation, int) client.Options, server string) *endpointRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	setup, err := client.Connect(ctx, server, optsFor(wire.Q1, -1))
	if err != nil {
		t.Fatalf("connect through the endpoint: %v", err)
	}
	t.Cleanup(func() { setup.Close() })
	if _, err := setup.Exec(ctx, "CREATE TABLE acked(w INTEGER, s BIGINT)"); err != nil {
		t.Fatal(err)
	}
	r := &endpointRun{acked: map[[2]int64]bool{}, txns: map[[2]int64]bool{}, failures: map[string]int{},
		successes: map[int][]time.Time{}, sessions: map[int][]string{}, gens: map[int]wire.Generation{}, conn: setup}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 2 * endpointWorkers {
		g := wire.Q1
		if i >= endpointWorkers {
			g = wire.Q3
		}
		r.gens[i] = g
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.worker(t, i, g, server, optsFor(g, i), stop)
		}()
	}
	time.Sleep(3 * time.Second)
	rounds := *oneEndpointRounds
	for round := range rounds {
		for _, n := range c.Nodes {
			if testing.Short() && (round > 0 || n != c.Nodes[0]) {
				continue
			}
			r.mu.Lock()
			r.kills = append(r.kills, time.Now())
			r.killed = append(r.killed, n.ID)
			r.mu.Unlock()
			n.Kill()
			time.Sleep(4 * time.Second)
			n.Restart(t)
			c.WaitForVoters(t, 3, 60*time.Second)
			waitReady(t, n)
			time.Sleep(3 * time.Second)
		}
	}
	close(stop)
	wg.Wait()
	return r
}

// waitReady waits until n answers its status.
func waitReady(t *testing.T, n *testcluster.Node) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := n.Status(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come back within 60s", n.ID)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var endpointLevels = []string{"session", "strong", "bounded", "any"}

// worker runs rounds of statements in its session until stop: a
// consistency level, a write and, at session and strong levels, a read of
// it, every third round a transaction of two rows, every fourth an append
// of ten rows (an insert stream in Q3).
func (r *endpointRun) worker(t *testing.T, w int, g wire.Generation, server string, opts client.Options, stop chan struct{}) {
	connect := func() *client.Conn {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			conn, err := client.Connect(ctx, server, opts)
			cancel()
			if err == nil {
				r.mu.Lock()
				r.sessions[w] = append(r.sessions[w], conn.ID())
				r.mu.Unlock()
				return conn
			}
			r.fail("connect", err)
			select {
			case <-stop:
				return nil
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	conn := connect()
	if conn == nil {
		return
	}
	defer func() { conn.Close() }()
	run := func(sql string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := conn.Exec(ctx, sql)
		r.result(w, sql, err)
		return err
	}
	for round := int64(0); ; round++ {
		select {
		case <-stop:
			return
		default:
		}
		s := round * 100
		level := endpointLevels[round%int64(len(endpointLevels))]
		if err := run("SET duckraft_consistency = '" + level + "'"); err != nil {
			// The session's level is unknown now (a SET whose node died
			// while it ran may have taken effect or not): this round's
			// reads could not be checked at it.
			if endpoint.SessionEnded(err) {
				conn = connect()
				if conn == nil {
					return
				}
			}
			continue
		}
		if run(fmt.Sprintf("INSERT INTO acked VALUES (%d, %d)", w, s)) == nil {
			r.ack(w, s)
			if level == "session" || level == "strong" {
				r.readOwn(t, conn, w, s, level)
			}
		} else {
			run("SELECT count(*) FROM acked")
		}
		if round%3 == 2 {
			r.mu.Lock()
			r.pairs = append(r.pairs, [2]int64{int64(w), s + 1})
			r.mu.Unlock()
			ok := run("BEGIN") == nil &&
				run(fmt.Sprintf("INSERT INTO acked VALUES (%d, %d)", w, s+1)) == nil &&
				run(fmt.Sprintf("INSERT INTO acked VALUES (%d, %d)", w, s+2)) == nil &&
				run("COMMIT") == nil
			if ok {
				r.mu.Lock()
				r.txns[[2]int64{int64(w), s + 1}] = true
				r.mu.Unlock()
				r.ack(w, s+1)
				r.ack(w, s+2)
			} else {
				// Whatever failed, the transaction ends here; with none
				// open, ROLLBACK fails, which does not matter.
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				conn.Exec(ctx, "ROLLBACK")
				cancel()
			}
		}
		if round%4 == 3 {
			var ws, ss []any
			for k := range int64(10) {
				ws, ss = append(ws, int32(w)), append(ss, s+10+k)
			}
			wv, _ := wire.NewVector(wire.LogicalType{ID: wire.TypeInteger}, ws)
			sv, _ := wire.NewVector(wire.LogicalType{ID: wire.TypeBigInt}, ss)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := conn.Append(ctx, "main", "acked", &wire.DataChunk{Rows: 10, Columns: []*wire.Vector{wv, sv}})
			cancel()
			r.result(w, "APPEND", err)
			if err == nil {
				for k := range int64(10) {
					r.ack(w, s+10+k)
				}
			}
		}
	}
}

// readOwn reads the row (w, s) the session just wrote: it must be there.
func (r *endpointRun) readOwn(t *testing.T, conn *client.Conn, w int, s int64, level string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := conn.Query(ctx, fmt.Sprintf("SELECT count(*) FROM acked WHERE w = %d AND s = %d", w, s))
	if err == nil {
		var v []any
		if rows.Next() {
			v, err = rows.Values()
		}
		if err == nil {
			err = rows.Err()
		}
		rows.Close()
		if err == nil && (len(v) != 1 || fmt.Sprint(v[0]) != "1") {
			r.mu.Lock()
			r.ryw = append(r.ryw, fmt.Sprintf("worker %d, %s read of its row %d in session %s at %s: %v", w, level, s, conn.ID(), time.Now().Format("15:04:05.000"), v))
			r.mu.Unlock()
		}
	}
	r.result(w, "read own write", err)
}

func (r *endpointRun) ack(w int, s int64) {
	r.mu.Lock()
	r.acked[[2]int64{int64(w), s}] = true
	r.mu.Unlock()
}

// result records a statement's outcome.
func (r *endpointRun) result(w int, what string, err error) {
	if err == nil {
		r.mu.Lock()
		r.successes[w] = append(r.successes[w], time.Now())
		r.mu.Unlock()
		return
	}
	r.fail(what, err)
}

func (r *endpointRun) fail(what string, err error) {
	r.mu.Lock()
	r.failures[endpoint.FailureKey(err)]++
	r.mu.Unlock()
}

// forwarded counts the requests the nodes forwarded for the sessions of
// generation g.
func (r *endpointRun) forwarded(c *testcluster.Cluster, g wire.Generation) int {
	n := 0
	for _, nd := range c.Nodes {
		for _, line := range strings.Split(nd.Log(), "\n") {
			if !strings.Contains(line, "quack request forwarded") {
				continue
			}
			for w, ids := range r.sessions {
				if r.gens[w] != g {
					continue
				}
				for _, id := range ids {
					if strings.Contains(line, id) {
						n++
					}
				}
			}
		}
	}
	return n
}

// check reads the table back and prints and checks what the run saw.
func (r *endpointRun) check(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := r.conn.Exec(ctx, "SET duckraft_consistency = 'strong'"); err != nil {
		t.Fatal(err)
	}
	rows, err := r.conn.Query(ctx, "SELECT w, s, count(*) FROM acked GROUP BY ALL")
	if err != nil {
		t.Fatal(err)
	}
	count := map[[2]int64]int64{}
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		count[[2]int64{int64(v[0].(int32)), v[1].(int64)}] = v[2].(int64)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	var lostRows, dups, partial []string
	for k := range r.acked {
		if count[k] == 0 {
			lostRows = append(lostRows, fmt.Sprint(k))
		}
	}
	for k, n := range count {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("%v ×%d", k, n))
		}
	}
	for _, p := range r.pairs {
		a, b := count[p], count[[2]int64{p[0], p[1] + 1}]
		if (a == 0) != (b == 0) {
			partial = append(partial, fmt.Sprint(p))
		}
	}
	continued := 0
	for _, ids := range r.sessions {
		if len(ids) == 1 {
			continued++
		}
	}
	statements := 0
	for _, s := range r.successes {
		statements += len(s)
	}
	t.Logf("%d sessions, %d continued under their id through every kill; %d statements succeeded", len(r.sessions), continued, statements)
	var codes []string
	for code, n := range r.failures {
		codes = append(codes, fmt.Sprintf("%d × %s", n, code))
	}
	slices.Sort(codes)
	t.Logf("statements failed: %d kinds\n  %s", len(codes), strings.Join(codes, "\n  "))
	for i, k := range r.kills {
		var gaps []time.Duration
		for _, s := range r.successes {
			if gap, ok := endpoint.Gap(s, k); ok {
				gaps = append(gaps, gap)
			}
		}
		slices.Sort(gaps)
		if len(gaps) == 0 {
			t.Errorf("kill of %s: no session succeeded on both sides of it", r.killed[i])
			continue
		}
		t.Logf("kill of %s: client-visible unavailability over %d sessions: p50 %v, p99 %v", r.killed[i], len(gaps),
			endpoint.Percentile(gaps, 0.5).Round(time.Millisecond), endpoint.Percentile(gaps, 0.99).Round(time.Millisecond))
	}
	t.Logf("acknowledged rows %d: lost %d, duplicated %d; transactions in part %d; read-your-writes violations %d",
		len(r.acked), len(lostRows), len(dups), len(partial), len(r.ryw))
	if len(lostRows)+len(dups)+len(partial)+len(r.ryw) > 0 {
		t.Errorf("lost %v\nduplicated %v\ntransactions in part %v\nread-your-writes violations %v", lostRows, dups, partial, r.ryw)
	}
	if continued < len(r.sessions)/2 {
		t.Errorf("only %d of %d sessions continued under their id", continued, len(r.sessions))
	}
	if len(r.acked) < 50 {
		t.Errorf("only %d rows acknowledged: the workload hardly ran", len(r.acked))
	}
}
