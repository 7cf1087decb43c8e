// Package hunter looks for writes that leave a duckraft cluster's replicas
// different: it generates write statements from DuckDB's own function list
// (every volatile or clock-reading scalar, every macro, DuckDB's own
// included, and every table function, under each name DuckDB resolves to
// it) in every place of a write where DuckDB evaluates an expression, sends them to a real 3-node cluster with a
// seeded random generator, and after every statement waits until all
// nodes reach the leader's applied index and compares their state hashes.
//
// A refused statement is fine and counted by reason; a divergence, a node
// that dies, a statement that hangs or a node that stops applying is a
// finding, reported with the seed and the statements that led to it.
package hunter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/testcluster"
)

// Config is one hunt.
type Config struct {
	// Seed decides the statements and the nodes they are sent to.
	Seed int64
	// Statements is how many statements to send (besides Setup), Accepted
	// how many accepted ones to reach; the hunt ends at the first of them
	// that is set, or after Duration when that is set; with none set it
	// sends nothing. A third of the statements are harmless writes, so
	// Accepted alone also ends.
	Statements int
	Accepted   int
	Duration   time.Duration
	// KeepGoing makes the hunt carry on after a divergence: it drops every
	// object, creates the base tables again and goes on, to find more
	// classes in one run. A crash or a hang still ends it.
	KeepGoing bool
	// RestoreEvery, when set, stops a follower every RestoreEvery
	// statements for a while, long enough for the leader to compact its
	// log, so that it catches up from a snapshot: the state rowid writes
	// must survive.
	RestoreEvery int
	// Skip names placements to leave out, to hunt past a known finding.
	Skip []string
}

// Timeouts. A statement is cheap (tables of a few hundred rows): one that
// runs past stmtTimeout hangs. Replicas apply each entry within
// convergeTimeout on a loaded 2-core machine, or something is stuck.
const (
	stmtTimeout     = 60 * time.Second
	convergeTimeout = 60 * time.Second
	history         = 25
)

// clusterArgs make the nodes snapshot and compact their logs often, so that
// a follower stopped for RestoreEvery/2 statements catches up from a
// snapshot.
var clusterArgs = []string{"--snapshot-threshold", "64", "--trailing-logs", "16", "--snapshot-interval", "500ms"}

// hunt is a running hunt.
type hunt struct {
	t     testing.TB
	cfg   Config
	c     *testcluster.Cluster
	conns map[*testcluster.Node]*client.Conn
	gen   *Generator
	route *rand.Rand
	rep   *Report
	last  []Sent
	down  *testcluster.Node
	upAt  int
}

// Sent is one statement as sent: to which node, and what it answered.
type Sent struct {
	Statement
	Node string
	Err  string
}

func (s Sent) String() string {
	if s.Err == "" {
		return fmt.Sprintf("[%s, accepted] %s;", s.Node, s.SQL)
	}
	return fmt.Sprintf("[%s, refused: %s] %s;", s.Node, firstLine(s.Err), s.SQL)
}

// Run starts a 3-node cluster and hunts on it as cfg says. The report
// holds what was found; Run fails t only when it cannot hunt.
func Run(t testing.TB, cfg Config) *Report {
	t.Helper()
	h := start(t, cfg)
	funcs, err := LoadFunctions(context.Background(), h.conn(h.c.Nodes[0]))
	if err != nil {
		t.Fatal(err)
	}
	h.gen = NewGenerator(cfg.Seed, funcs, cfg.Skip...)
	h.rep.Functions = len(funcs)
	began := time.Now()
	finished := false
	defer func() {
		if finished {
			return
		}
		// The harness failed the test and ended it (a node that does not
		// start again fails Restart): print what the hunt saw up to there.
		h.rep.Elapsed = time.Since(began)
		h.rep.Findings = append(h.rep.Findings, *h.finding(Crash, "the hunt stopped at the harness's error above (a node that did not start again?)"))
		t.Log("\n" + h.rep.String())
	}()
	for i := 0; !h.done(i, time.Since(began)); i++ {
		if i > 0 && i%progressEvery == 0 {
			t.Logf("hunter: %d statements, %d accepted, %d findings, %.1f statements/s",
				i, h.rep.Accepted, len(h.rep.Findings), float64(i)/time.Since(began).Seconds())
		}
		h.restoreEvent(i)
		st := h.gen.Next()
		f := h.send(st)
		h.gen.Result(st, h.last[len(h.last)-1].Err == "")
		if f != nil {
			h.rep.Findings = append(h.rep.Findings, *f)
			// A long hunt reports each finding as it comes, not only at
			// its end.
			t.Logf("hunter: finding %d at statement %d: %s: %s", len(h.rep.Findings), i, f.Kind, f.Detail)
			if f.Kind != Divergence || !cfg.KeepGoing || !h.reset() {
				break
			}
		}
	}
	if len(h.rep.Findings) == 0 {
		// The statements after the last accepted one were not checked.
		if f := h.converge(); f != nil {
			h.rep.Findings = append(h.rep.Findings, *f)
		}
	}
	h.rep.Elapsed = time.Since(began)
	finished = true
	return h.rep
}

// done reports whether a hunt that sent sent statements in elapsed has
// reached one of its bounds.
func (h *hunt) done(sent int, elapsed time.Duration) bool {
	cfg := h.cfg
	if cfg.Statements == 0 && cfg.Accepted == 0 && cfg.Duration == 0 {
		return true
	}
	return cfg.Statements > 0 && sent >= cfg.Statements ||
		cfg.Accepted > 0 && h.rep.Accepted >= cfg.Accepted ||
		cfg.Duration > 0 && elapsed >= cfg.Duration
}

// progressEvery is how often a hunt logs how far it got.
const progressEvery = 500

// start starts the cluster, creates the base tables and checks that the
// nodes agree.
func start(t testing.TB, cfg Config) *hunt {
	t.Helper()
	c := testcluster.Start(t, 3, testcluster.Options{Args: clusterArgs})
	h := &hunt{t: t, cfg: cfg, c: c, conns: map[*testcluster.Node]*client.Conn{},
		route: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x726f757465)),
		rep:   newReport(cfg.Seed)}
	leader := c.WaitForLeader(t, 20*time.Second)
	for _, sql := range Setup {
		if _, err := h.conn(leader).Exec(context.Background(), sql); err != nil {
			t.Fatalf("hunter setup %q: %v", sql, err)
		}
	}
	if f := h.converge(); f != nil {
		t.Fatalf("hunter: cluster differs after setup: %s", f.Detail)
	}
	return h
}

// conn returns the session on n, connecting when there is none.
func (h *hunt) conn(n *testcluster.Node) *client.Conn {
	if c := h.conns[n]; c != nil {
		return c
	}
	c := n.Client(h.t)
	h.conns[n] = c
	return c
}

// send sends st to a running node picked at random and checks the cluster
// after it when it was accepted, then keeps its tables small (bound). A statement the server answered with an
// error is not checked on its own: what it may have changed (a command
// that failed on apply, or anything a refusal should have stopped) is in
// the state the next accepted statement's check compares, and its history
// names it. Checks cost five statements each, so this about doubles the
// hunt's speed.
func (h *hunt) send(st Statement) *Finding {
	running := h.running()
	n := running[h.route.IntN(len(running))]
	ctx, cancel := context.WithTimeout(context.Background(), stmtTimeout)
	began := time.Now()
	_, err := h.conn(n).Exec(ctx, st.SQL)
	h.rep.ExecTime += time.Since(began)
	cancel()
	sent := Sent{Statement: st, Node: n.ID}
	if err != nil {
		sent.Err = err.Error()
	}
	h.last = append(h.last, sent)
	if len(h.last) > history {
		h.last = h.last[1:]
	}
	h.rep.count(sent)
	var serr *client.ServerError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return h.finding(Hang, fmt.Sprintf("no answer from %s within %v", n.ID, stmtTimeout))
	case err != nil && !errors.As(err, &serr):
		// Not an answer from the server: the connection broke.
		h.conns[n] = nil
	}
	if f := h.crashed(); f != nil {
		return f
	}
	if err != nil {
		return nil
	}
	defer func(began time.Time) { h.rep.CheckTime += time.Since(began) }(time.Now())
	if f := h.converge(); f != nil {
		return f
	}
	return h.bound(sent)
}

// running returns the nodes that run, in order.
func (h *hunt) running() []*testcluster.Node {
	var out []*testcluster.Node
	for _, n := range h.c.Nodes {
		if n.Running() {
			out = append(out, n)
		}
	}
	return out
}

// crashed reports a node that died without the hunt stopping it.
func (h *hunt) crashed() *Finding {
	for _, n := range h.c.Nodes {
		if n != h.down && !n.Running() {
			return h.finding(Crash, fmt.Sprintf("%s exited; its log ends:\n%s", n.ID, tail(n.Log(), 30)))
		}
	}
	return nil
}

// converge waits until every running node reports its state hash at one
// applied index, then compares the hashes. The leader applied a write
// before it answered, so one index on every node is at or past it. A
// difference at one index is checked twice before it counts.
func (h *hunt) converge() *Finding {
	deadline := time.Now().Add(convergeTimeout)
	var differ string
	for {
		if f := h.crashed(); f != nil {
			return f
		}
		if !h.sameApplied() {
			if time.Now().After(deadline) {
				return h.finding(Stuck, fmt.Sprintf("nodes did not reach one applied index within %v: %s",
					convergeTimeout, h.statuses()))
			}
			time.Sleep(5 * time.Millisecond)
			continue
		}
		idx, hashes, why := h.hashes()
		if why == "" {
			d := differing(hashes)
			switch {
			case d == "":
				return nil
			case differ != "":
				return h.finding(Divergence, fmt.Sprintf("at applied index %d: %s\n%s", idx, d, h.diagnose()))
			}
			differ = d
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if time.Now().After(deadline) {
			return h.finding(Stuck, fmt.Sprintf("nodes applied one index but gave no state hash at one index within %v (%s): %s",
				convergeTimeout, why, h.statuses()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sameApplied reports whether every running node has applied one index: a
// status is cheap, a state hash digests every table, so the hunt waits on
// statuses first.
func (h *hunt) sameApplied() bool {
	nodes := h.running()
	applied := make([]uint64, len(nodes))
	ok := make([]bool, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			st, err := n.Status()
			applied[i], ok[i] = st.Applied, err == nil
		})
	}
	wg.Wait()
	for i := range nodes {
		if !ok[i] || applied[i] != applied[0] {
			return false
		}
	}
	return true
}

// hashes returns every running node's state hash when they all answer at
// one applied index, else why not. The nodes are asked at once: each
// digests every table, and the hunt waits for the slowest.
func (h *hunt) hashes() (uint64, map[string]string, string) {
	type answer struct {
		idx  uint64
		hash string
		err  error
	}
	nodes := h.running()
	if len(nodes) == 0 {
		return 0, nil, "no node is running"
	}
	answers := make([]answer, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			a := &answers[i]
			a.idx, a.hash, a.err = n.StateHash()
		})
	}
	wg.Wait()
	out := map[string]string{}
	for i, a := range answers {
		switch {
		case a.err != nil:
			return 0, nil, a.err.Error()
		case a.idx != answers[0].idx:
			return 0, nil, fmt.Sprintf("%s hashed at index %d, %s at %d", nodes[0].ID, answers[0].idx, nodes[i].ID, a.idx)
		}
		out[nodes[i].ID] = a.hash
	}
	return answers[0].idx, out, ""
}

// differing describes the hashes when they are not all equal, else "".
func differing(hashes map[string]string) string {
	var first string
	same := true
	var parts []string
	for _, id := range sortedKeys(hashes) {
		if first == "" {
			first = hashes[id]
		}
		same = same && hashes[id] == first
		parts = append(parts, id+" "+short(hashes[id]))
	}
	if same {
		return ""
	}
	return strings.Join(parts, ", ")
}

func (h *hunt) statuses() string {
	var parts []string
	for _, n := range h.running() {
		st, err := n.Status()
		if err != nil {
			parts = append(parts, fmt.Sprintf("%s: %v", n.ID, err))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s applied %d commit %d", n.ID, st.State, st.Applied, st.Commit))
	}
	return strings.Join(parts, "; ")
}

// finding records kind with the statements that led to it.
func (h *hunt) finding(kind Kind, detail string) *Finding {
	return &Finding{Kind: kind, Detail: detail, Statements: append([]Sent(nil), h.last...)}
}

// restoreEvent stops a follower at every RestoreEvery-th statement and
// starts it again half way to the next, so that it catches up from a
// snapshot.
func (h *hunt) restoreEvent(i int) {
	every := h.cfg.RestoreEvery
	if every <= 0 || i == 0 {
		return
	}
	switch {
	case h.down == nil && i%every == 0:
		l := h.c.Leader()
		for _, n := range h.c.Nodes {
			if n != l && n.Running() {
				h.down, h.upAt = n, i+every/2
				n.Kill()
				h.conns[n] = nil
				h.rep.Restores++
				return
			}
		}
	case h.down != nil && i >= h.upAt:
		h.down.Restart(h.t)
		h.down = nil
	}
}

// reset drops every object the hunt created and creates the base tables
// again, after a divergence, and reports whether the nodes agree again.
func (h *hunt) reset() bool {
	ctx, cancel := context.WithTimeout(context.Background(), stmtTimeout)
	defer cancel()
	l := h.c.Leader()
	if l == nil {
		return false
	}
	conn := h.conn(l)
	drops, err := objects(ctx, conn)
	if err != nil {
		h.t.Logf("hunter: reset: %v", err)
		return false
	}
	for _, sql := range append(drops, Setup...) {
		if _, err := conn.Exec(ctx, sql); err != nil {
			h.t.Logf("hunter: reset %q: %v", sql, err)
			return false
		}
	}
	if h.gen != nil {
		h.gen.reset()
	}
	h.last = nil
	if f := h.converge(); f != nil {
		h.t.Logf("hunter: still diverged after dropping everything: %s", f.Detail)
		return false
	}
	h.rep.Resets++
	return true
}

// objectsQuery lists the DROP statements for every object clients created.
const objectsQuery = `SELECT 'DROP VIEW IF EXISTS ' || view_name FROM duckdb_views() WHERE NOT internal AND database_name = current_database()
UNION ALL SELECT 'DROP TABLE IF EXISTS ' || table_name || ' CASCADE' FROM duckdb_tables() WHERE NOT internal AND database_name = current_database()
UNION ALL SELECT DISTINCT 'DROP MACRO ' || CASE WHEN function_type = 'table_macro' THEN 'TABLE ' ELSE '' END || 'IF EXISTS ' || function_name
	FROM duckdb_functions() WHERE NOT internal AND function_type IN ('macro', 'table_macro') AND database_name = current_database()
UNION ALL SELECT 'DROP SEQUENCE IF EXISTS ' || sequence_name || ' CASCADE' FROM duckdb_sequences() WHERE database_name = current_database()`

func objects(ctx context.Context, c *client.Conn) ([]string, error) {
	rows, err := queryRows(ctx, c, objectsQuery)
	if err != nil {
		return nil, fmt.Errorf("list objects: %w", err)
	}
	var out []string
	for _, v := range rows {
		if s, ok := v[0].(string); ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// queryRows returns every row sql yields on c.
func queryRows(ctx context.Context, c *client.Conn, sql string) ([][]any, error) {
	rows, err := c.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
