package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
)

// BenchmarkWritePhases accounts for where a single-row write's time goes
// at 1 client, phase by phase, for each duckraftd binary named in
// $DUCKRAFTD_PHASES (name=path, comma-separated; default: $DUCKRAFTD as
// "this"), side by side: every binary runs a 3-node cluster (Raft and
// DuckDB fsync on, as duckraftd starts by default), all up at once, and
// the binaries take turns in rounds so that the machine's load leans on
// none of them. It changes nothing in duckraftd: the phases are the
// client's own clock and what the nodes already measure and serve on
// /metrics, read before and after each round, so that a phase is its sum
// over the round's writes divided by their count:
//
//   - the Quack request on the leader, arrival to answer written
//     (duckraft_quack_request_duration_seconds);
//   - on the leader, hashicorp/raft's commit time from handing the entry
//     to its log to knowing it committed (raft_commit_duration_seconds): the leader's
//     own log write first (raft_leader_dispatch_duration_seconds, raft-boltdb's two
//     fsyncs), then the faster follower's answer, within which that
//     follower writes its log (raft_rpc_append_entries_store_duration_seconds on the
//     followers, whose mean covers the slower one too);
//   - the hand-over to the FSM (raft_fsm_enqueue_duration_seconds) and the FSM's apply of
//     the entry to DuckDB on the leader (raft_fsm_apply_batch_duration_seconds);
//   - the rest of the leader's request, which is routing: decoding,
//     classifying, the determinism decision, the proposal queue and
//     encoding the answer;
//   - the client's round trip beyond the leader's request time: its own
//     encoding and decoding and the loopback HTTP hop.
//
// A router-only round trip (SET duckraft_consistency, answered by the
// router without DuckDB or Raft) is timed too, as the floor of any
// statement's request.
//
// Each statement shape is timed: the bench's literal INSERT, which the
// leader's binder skips (routing/analyze's LiteralInsert), and one with an
// expression, which the binder judges. Run it with
//
//	DUCKRAFTD_PHASES=before=/tmp/old/duckraftd,after=$PWD/bin/duckraftd \
//	  go test -tags duckdb_arrow -run '^$' -bench WritePhases -benchtime 1x ./cmd/duckraft-bench
func BenchmarkWritePhases(b *testing.B) {
	bins := phaseBinaries(b)
	writes := 400
	if s := os.Getenv("DUCKRAFT_PHASE_WRITES"); s != "" {
		var err error
		if writes, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	const rounds = 3
	token := "phases-token"
	var clusters []*phaseCluster
	defer func() {
		for _, c := range clusters {
			c.stop()
		}
	}()
	for _, bin := range bins {
		c, err := startPhaseCluster(bin[0], bin[1], b.TempDir(), token)
		if err != nil {
			b.Fatal(err)
		}
		clusters = append(clusters, c)
	}
	shapes := []struct{ name, stmt string }{
		{"literal INSERT", "INSERT INTO bench VALUES (%d, %d, 'payload-%[1]d-%[2]d')"},
		{"INSERT with an expression", "INSERT INTO bench VALUES (%d, %d, 'payload-' || %[1]d || '-' || %[2]d)"},
	}
	for range b.N {
		results := map[string]map[string]*phaseSums{}
		for round := range rounds {
			for _, shape := range shapes {
				for i := range clusters {
					// Rotate the order each round.
					c := clusters[(i+round)%len(clusters)]
					s, err := c.round(token, shape.stmt, writes)
					if err != nil {
						b.Fatalf("%s, %s: %v", c.name, shape.name, err)
					}
					if results[shape.name] == nil {
						results[shape.name] = map[string]*phaseSums{}
					}
					if results[shape.name][c.name] == nil {
						results[shape.name][c.name] = &phaseSums{}
					}
					results[shape.name][c.name].add(s)
				}
			}
		}
		var names []string
		for _, c := range clusters {
			names = append(names, c.name)
		}
		for _, shape := range shapes {
			fmt.Fprint(os.Stdout, phaseTable(shape.name, names, results[shape.name], rounds, writes))
		}
	}
}

func phaseBinaries(b *testing.B) [][2]string {
	spec := os.Getenv("DUCKRAFTD_PHASES")
	if spec == "" {
		d := os.Getenv("DUCKRAFTD")
		if d == "" {
			b.Skip("set DUCKRAFTD or DUCKRAFTD_PHASES to the duckraftd binaries to measure")
		}
		spec = "this=" + d
	}
	var out [][2]string
	for _, part := range strings.Split(spec, ",") {
		name, path, ok := strings.Cut(part, "=")
		if !ok {
			b.Fatalf("DUCKRAFTD_PHASES: %q is not name=path", part)
		}
		out = append(out, [2]string{name, path})
	}
	return out
}

// phaseCluster is one binary's 3-node cluster with the nodes' /metrics
// addresses.
type phaseCluster struct {
	name   string
	nodes  []*benchNode
	http   map[string]string // node id → operations address
	leader *benchNode
	rounds int // rounds run so far, to keep the rows distinct
}

func startPhaseCluster(name, daemon, dir, token string) (*phaseCluster, error) {
	logf, err := daemonLog(dir)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	c := &phaseCluster{name: name, http: map[string]string{}}
	firstGossip := ""
	for i := range 3 {
		id := fmt.Sprintf("n%d", i+1)
		quack, raftAddr, gossip, ops := mustFreeAddr(), mustFreeAddr(), mustFreeAddr(), mustFreeAddr()
		args := []string{"--id", id, "--data", filepath.Join(dir, id), "--quack", quack, "--raft", raftAddr,
			"--gossip", gossip, "--token", token, "--http", ops, "--log-level", "warn"}
		if i == 0 {
			firstGossip = gossip
		} else {
			args = append(args, joinArgs(firstGossip, filepath.Join(dir, "n1"))...)
		}
		cmd := exec.Command(daemon, args...)
		cmd.Stdout, cmd.Stderr = io.Discard, logf
		if err := cmd.Start(); err != nil {
			c.stop()
			return nil, fmt.Errorf("start %s: %w", daemon, err)
		}
		c.nodes = append(c.nodes, &benchNode{id: id, quack: quack, cmd: cmd})
		c.http[id] = ops
		if err := waitForServer(quack, token, 30*time.Second); err != nil {
			c.stop()
			return nil, err
		}
	}
	formed := pollUntil(60*time.Second, 200*time.Millisecond, func() bool {
		st, err := nodeStatus(c.nodes[0].quack, token)
		if err != nil {
			return false
		}
		if c.leader = leaderOf(st, c.nodes); c.leader == nil {
			return false
		}
		lst, err := nodeStatus(c.leader.quack, token)
		_, voting := raftCounts(lst)
		return err == nil && voting == 3
	})
	if !formed {
		c.stop()
		return nil, fmt.Errorf("%s: the cluster did not form within 60s", name)
	}
	ctx := context.Background()
	conn, err := client.Connect(ctx, "quack:"+c.leader.quack, client.Options{Token: token, Generation: wire.Q1})
	if err != nil {
		c.stop()
		return nil, err
	}
	defer conn.Close()
	if _, err := conn.Exec(ctx, benchTableSQL); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (c *phaseCluster) stop() { stopBenchCluster(c.nodes) }

// phaseSums are one or more rounds' totals, in milliseconds, over writes.
type phaseSums struct {
	writes  int
	client  float64   // the client's time per write, summed
	lat     []float64 // each write's client time
	setTrip float64   // the router-only round trips, summed
	sets    int
	// metric sums and counts of the round, by name: the leader's and,
	// prefixed "follower:", the followers'.
	sum, count map[string]float64
}

func (s *phaseSums) add(o *phaseSums) {
	if s.sum == nil {
		s.sum, s.count = map[string]float64{}, map[string]float64{}
	}
	s.writes += o.writes
	s.client += o.client
	s.lat = append(s.lat, o.lat...)
	s.setTrip += o.setTrip
	s.sets += o.sets
	for k, v := range o.sum {
		s.sum[k] += v
	}
	for k, v := range o.count {
		s.count[k] += v
	}
}

// mean is a metric's mean over the rounds, in milliseconds.
func (s *phaseSums) mean(name string) float64 {
	if s.count[name] == 0 {
		return 0
	}
	return s.sum[name] / s.count[name]
}

// leaderMetrics and followerMetrics are the /metrics series a round
// reads: histograms with _sum and _count, in seconds (scrape converts
// them to milliseconds).
var (
	leaderMetrics   = []string{"duckraft_quack_request_duration_seconds", "raft_commit_duration_seconds", "raft_leader_dispatch_duration_seconds", "raft_fsm_enqueue_duration_seconds", "raft_fsm_apply_batch_duration_seconds"}
	followerMetrics = []string{"raft_rpc_append_entries_store_duration_seconds", "raft_fsm_apply_batch_duration_seconds"}
)

// round runs measure, again when leadership moved meanwhile (the loaded
// machine can delay heartbeats past the election timeout): the leader's
// series are then another node's, and its writes were forwarded.
func (c *phaseCluster) round(token, stmt string, writes int) (*phaseSums, error) {
	for attempt := 0; ; attempt++ {
		st, err := nodeStatus(c.nodes[0].quack, token)
		if err != nil {
			return nil, err
		}
		if c.leader = leaderOf(st, c.nodes); c.leader == nil {
			return nil, fmt.Errorf("%s: no leader", c.name)
		}
		s, err := c.measure(token, stmt, writes)
		if err != nil {
			return nil, err
		}
		if s.count["raft_commit_duration_seconds"] >= float64(writes) || attempt == 4 {
			return s, nil
		}
	}
}

// measure sends writes single-row writes of stmt (a format of the
// client's row number and sequence) from one client to the leader, then
// as many router-only round trips, and returns what the client and the
// nodes measured meanwhile.
func (c *phaseCluster) measure(token, stmt string, writes int) (*phaseSums, error) {
	ctx := context.Background()
	conn, err := client.Connect(ctx, "quack:"+c.leader.quack, client.Options{Token: token, Generation: wire.Q1})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// Warm the session and the statement's path.
	for i := range 20 {
		if _, err := conn.Exec(ctx, fmt.Sprintf(stmt, -1, c.rounds*10000+i)); err != nil {
			return nil, err
		}
	}
	before, err := c.scrape(token)
	if err != nil {
		return nil, err
	}
	s := &phaseSums{writes: writes}
	c.rounds++
	for i := range writes {
		t0 := time.Now()
		if _, err := conn.Exec(ctx, fmt.Sprintf(stmt, c.rounds, i)); err != nil {
			return nil, err
		}
		d := float64(time.Since(t0).Microseconds()) / 1000
		s.client += d
		s.lat = append(s.lat, d)
	}
	after, err := c.scrape(token)
	if err != nil {
		return nil, err
	}
	for range writes {
		t0 := time.Now()
		if _, err := conn.Exec(ctx, "SET duckraft_consistency = 'session'"); err != nil {
			return nil, err
		}
		s.setTrip += float64(time.Since(t0).Microseconds()) / 1000
		s.sets++
	}
	s.sum, s.count = map[string]float64{}, map[string]float64{}
	for k := range after.sum {
		s.sum[k] = after.sum[k] - before.sum[k]
		s.count[k] = after.count[k] - before.count[k]
	}
	return s, nil
}

type scraped struct{ sum, count map[string]float64 }

// legacyNames are the names builds before the renamed raft series
// (cmd/duckraftd/daemon/libmetrics.go) exported, as go-metrics summaries
// in milliseconds, so that DUCKRAFTD_PHASES can compare such a build with
// a newer one.
var legacyNames = map[string]string{
	"raft_commitTime":                  "raft_commit_duration_seconds",
	"raft_leader_dispatchLog":          "raft_leader_dispatch_duration_seconds",
	"raft_fsm_enqueue":                 "raft_fsm_enqueue_duration_seconds",
	"raft_fsm_applyBatch":              "raft_fsm_apply_batch_duration_seconds",
	"raft_rpc_appendEntries_storeLogs": "raft_rpc_append_entries_store_duration_seconds",
}

// cutSuffix cuts the first of suffixes that name ends with.
func cutSuffix(name string, suffixes ...string) (base, suffix string, ok bool) {
	for _, s := range suffixes {
		if b, found := strings.CutSuffix(name, s); found {
			return b, s, true
		}
	}
	return name, "", false
}

// scrape reads the leader's and the followers' series, the Quack request
// time of the statement messages only (not a session's connect and
// disconnect), converted to milliseconds.
func (c *phaseCluster) scrape(token string) (*scraped, error) {
	out := &scraped{sum: map[string]float64{}, count: map[string]float64{}}
	for _, n := range c.nodes {
		names, prefix := followerMetrics, "follower:"
		if n == c.leader {
			names, prefix = leaderMetrics, ""
		}
		req, _ := http.NewRequest("GET", "http://"+c.http[n.id]+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s /metrics: %w", n.id, err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "#") {
				continue
			}
			series, value, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			name, labels, _ := strings.Cut(series, "{")
			if name == "duckraft_quack_request_duration_seconds_sum" || name == "duckraft_quack_request_duration_seconds_count" {
				if strings.Contains(labels, `type="CONNECTION_REQUEST"`) || strings.Contains(labels, `type="DISCONNECT_MESSAGE"`) {
					continue
				}
			}
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				continue
			}
			inMillis := false
			if base, suffix, ok := cutSuffix(name, "_sum", "_count"); ok && legacyNames[base] != "" {
				name, inMillis = legacyNames[base]+suffix, true
			}
			for _, m := range names {
				switch name {
				case m + "_sum":
					if strings.HasSuffix(m, "_seconds") && !inMillis {
						v *= 1000
					}
					out.sum[prefix+m] += v
				case m + "_count":
					out.count[prefix+m] += v
				}
			}
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// phaseTable writes one statement shape's accounting, a column per
// binary and a ratio column for each against the first.
func phaseTable(shape string, names []string, res map[string]*phaseSums, rounds, writes int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n#### %s, 1 client, %d rounds of %d writes per binary\n\n", shape, rounds, writes)
	fmt.Fprintf(&b, "| phase (mean ms per write) | %s |", strings.Join(names, " | "))
	for _, n := range names[1:] {
		fmt.Fprintf(&b, " %s / %s |", n, names[0])
	}
	b.WriteString("\n|---|")
	for range 2*len(names) - 1 {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	row := func(label string, f func(s *phaseSums) float64) {
		fmt.Fprintf(&b, "| %s |", label)
		var vals []float64
		for _, n := range names {
			v := f(res[n])
			vals = append(vals, v)
			fmt.Fprintf(&b, " %.2f |", v)
		}
		for _, v := range vals[1:] {
			if vals[0] > 0 && v >= 0 {
				fmt.Fprintf(&b, " %.2f |", v/vals[0])
			} else {
				b.WriteString(" |")
			}
		}
		b.WriteString("\n")
	}
	clientMean := func(s *phaseSums) float64 { return s.client / float64(s.writes) }
	// A write may take more than one Quack request.
	request := func(s *phaseSums) float64 {
		return s.sum["duckraft_quack_request_duration_seconds"] / float64(s.writes)
	}
	commit := func(s *phaseSums) float64 { return s.mean("raft_commit_duration_seconds") }
	enqueue := func(s *phaseSums) float64 { return s.mean("raft_fsm_enqueue_duration_seconds") }
	apply := func(s *phaseSums) float64 { return s.mean("raft_fsm_apply_batch_duration_seconds") }
	dispatch := func(s *phaseSums) float64 { return s.mean("raft_leader_dispatch_duration_seconds") }
	row("client: the write's round trip (mean)", clientMean)
	row("client: p50", func(s *phaseSums) float64 {
		l := slices.Clone(s.lat)
		slices.Sort(l)
		return l[len(l)/2]
	})
	row("client and loopback HTTP beyond the leader's request", func(s *phaseSums) float64 { return clientMean(s) - request(s) })
	row("leader: the Quack requests, arrival to answer", request)
	row("· routing: decode, classify, decide, propose queue, answer (the rest)", func(s *phaseSums) float64 {
		return request(s) - commit(s) - enqueue(s) - apply(s)
	})
	row("· Raft commit (raft_commit_duration_seconds)", commit)
	row("·· leader's log write, 2 fsyncs (raft_leader_dispatch_duration_seconds)", dispatch)
	row("·· then the faster follower's answer (commit − the leader's log write)", func(s *phaseSums) float64 {
		return commit(s) - dispatch(s)
	})
	row("··· within it, a follower's log write, 2 fsyncs (raft_rpc_append_entries_store_duration_seconds, mean of both)", func(s *phaseSums) float64 {
		return s.mean("follower:raft_rpc_append_entries_store_duration_seconds")
	})
	row("· hand-over to the FSM (raft_fsm_enqueue_duration_seconds)", enqueue)
	row("· FSM applies the entry to DuckDB on the leader (raft_fsm_apply_batch_duration_seconds)", apply)
	row("followers' FSM apply: not waited for, but on the same cores (raft_fsm_apply_batch_duration_seconds)", func(s *phaseSums) float64 {
		return s.mean("follower:raft_fsm_apply_batch_duration_seconds")
	})
	row("router-only round trip: SET duckraft_consistency (floor of any request)", func(s *phaseSums) float64 {
		return s.setTrip / float64(s.sets)
	})
	row("Quack requests per write", func(s *phaseSums) float64 {
		return s.count["duckraft_quack_request_duration_seconds"] / float64(s.writes)
	})
	row("log entries per write on the leader (raft_commit_duration_seconds count / writes)", func(s *phaseSums) float64 {
		return s.count["raft_commit_duration_seconds"] / float64(s.writes)
	})
	return b.String()
}
