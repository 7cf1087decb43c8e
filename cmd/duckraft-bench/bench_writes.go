package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// benchNode is one duckraftd process started by a benchmark.
type benchNode struct {
	id, quack string
	// http is the node's operations address; "" when it serves none.
	http string
	cmd  *exec.Cmd
	// gossip, daemon, args and dir start it again (bench failover --via).
	gossip, daemon, dir string
	args                []string
}

// startBenchCluster starts n duckraftd processes on loopback, the first
// bootstrapping and the others joining it, and waits until all of them
// vote: a member joins as a non-voter and is promoted once caught up, and
// until then the cluster could not elect a leader without the first. The
// daemons log to dir/duckraftd.log, so that no Raft line reaches the
// benchmark's output. Each gets the extra flags.
func startBenchCluster(daemon, dir, token string, n int, extra ...string) ([]*benchNode, error) {
	return startBenchNodes(daemon, dir, token, n, false, extra...)
}

// startBenchNodes is startBenchCluster, with each node serving its
// operations address (/readyz, /metrics) when withHTTP.
func startBenchNodes(daemon, dir, token string, n int, withHTTP bool, extra ...string) ([]*benchNode, error) {
	logf, err := daemonLog(dir)
	if err != nil {
		return nil, err
	}
	// Each child holds its own descriptor of the file.
	defer logf.Close()
	var nodes []*benchNode
	firstGossip := ""
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("n%d", i+1)
		quack, raftAddr, gossip := mustFreeAddr(), mustFreeAddr(), mustFreeAddr()
		httpAddr, httpFlag := "", "off"
		if withHTTP {
			httpAddr = mustFreeAddr()
			httpFlag = httpAddr
		}
		args := []string{"--id", id, "--data", filepath.Join(dir, id), "--quack", quack, "--raft", raftAddr,
			"--gossip", gossip, "--token", token, "--http", httpFlag, "--log-level", "warn"}
		if i == 0 {
			firstGossip = gossip
		} else {
			args = append(args, joinArgs(firstGossip, filepath.Join(dir, "n1"))...)
		}
		args = append(args, extra...)
		cmd := exec.Command(daemon, args...)
		cmd.Stdout, cmd.Stderr = io.Discard, logf
		if err := cmd.Start(); err != nil {
			stopBenchCluster(nodes)
			return nil, fmt.Errorf("start %s: %w", daemon, err)
		}
		nodes = append(nodes, &benchNode{id: id, quack: quack, http: httpAddr, cmd: cmd, gossip: gossip, daemon: daemon, dir: dir, args: args})
		if err := waitForServer(quack, token, 30*time.Second); err != nil {
			stopBenchCluster(nodes)
			return nil, withLogTail(err, dir)
		}
	}
	formed := pollUntil(60*time.Second, 200*time.Millisecond, func() bool {
		st, err := nodeStatus(nodes[0].quack, token)
		if err != nil {
			return false
		}
		l := leaderOf(st, nodes)
		if l == nil {
			return false
		}
		lst, err := nodeStatus(l.quack, token)
		_, voting := raftCounts(lst)
		return err == nil && voting == n
	})
	if !formed {
		stopBenchCluster(nodes)
		return nil, withLogTail(fmt.Errorf("cluster of %d did not form within 60s", n), dir)
	}
	return nodes, nil
}

// joinArgs are the flags of a daemon that joins the cluster the first
// one, with data directory firstData, bootstrapped: its gossip address
// and the cluster key it generated there (which the joiner reads from
// that file: the first node is up, so the file is in place).
func joinArgs(firstGossip, firstData string) []string {
	return []string{"--join", firstGossip, "--cluster-key-file", filepath.Join(firstData, "cluster.key")}
}

// stopBenchCluster ends the daemons, resuming any the failover benchmark
// stopped so that SIGTERM reaches them.
func stopBenchCluster(nodes []*benchNode) {
	for _, n := range nodes {
		n.cmd.Process.Signal(syscall.SIGCONT)
		n.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, n := range nodes {
		n.cmd.Wait()
	}
}

// raftCounts counts the members in st's Raft configuration, and those of
// them that vote.
func raftCounts(st nodeapi.Status) (members, voting int) {
	for _, m := range st.Members {
		if m.InRaft {
			members++
			if m.Voter {
				voting++
			}
		}
	}
	return members, voting
}

func leaderOf(st nodeapi.Status, nodes []*benchNode) *benchNode {
	for _, n := range nodes {
		if n.id == st.LeaderID {
			return n
		}
	}
	return nil
}

// writePoint is one system at one client count.
type writePoint struct {
	System   string  `json:"system"`
	Clients  int     `json:"clients"`
	Writes   int     `json:"writes"`
	TxPerSec float64 `json:"tx_per_sec"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	Errors   int     `json:"errors"`
	// Busy counts the transactions dqlite refused at once with "database
	// is locked" because another one was writing: apart from Errors, as
	// they are neither writes nor failures of the cluster. Only dqlite
	// has them.
	Busy int `json:"busy_errors,omitempty"`
	// PerEntry is the writes per Raft log entry: how well the leader
	// batches. Only duckraft has it.
	PerEntry float64 `json:"writes_per_raft_entry,omitempty"`
	// LeaderCPUMs is the CPU time (user plus system, all threads) the
	// leader's duckraftd process spent per acknowledged write, in
	// milliseconds: what a write costs the node that bounds the cluster's
	// write rate. It counts all the process did in the round, heartbeats
	// and gossip too, which weigh most at few clients. Only local clusters
	// have it, and only when leadership stayed put.
	LeaderCPUMs float64 `json:"leader_cpu_ms_per_write,omitempty"`
}

// writeSystem is one system bench writes loads: sessions gives n sessions,
// each running one autocommitted statement per call.
type writeSystem struct {
	name     string
	sessions func(ctx context.Context, n int) ([]func(sql string) error, func(), error)
	// point, when set, measures a client count in place of sessions: for
	// a peer whose own tool runs the load (dqlite).
	point func(ctx context.Context, n int, d time.Duration) (writePoint, error)
	// commit, when set, is the Raft commit index, to count writes per entry.
	commit func() (uint64, error)
	// leaderCPU, when set, is the ID of the leader and the CPU time its
	// process has used so far.
	leaderCPU func() (id string, cpu time.Duration, err error)
	// pin, when set, runs before each client count: it puts the leader
	// alone on a CPU (pinnedSuffix) and returns what gives the benchmark's
	// process its CPUs back afterwards.
	pin   func() (restore func(), err error)
	close func()
}

const benchTableSQL = "CREATE TABLE IF NOT EXISTS bench(thread INTEGER, seq BIGINT, payload VARCHAR)"

// duckraftWriteSystem loads a deployment: client i talks to server i mod
// len(servers).
func duckraftWriteSystem(ctx context.Context, d *deployment) (*writeSystem, error) {
	if err := d.exec(ctx, benchTableSQL); err != nil {
		return nil, fmt.Errorf("%s: create bench table: %w", d.name, err)
	}
	s := &writeSystem{
		name: d.name,
		sessions: func(ctx context.Context, n int) ([]func(string) error, func(), error) {
			conns := make([]*client.Conn, 0, n)
			closeAll := func() {
				for _, c := range conns {
					c.Close()
				}
			}
			var out []func(string) error
			for i := range n {
				c, err := d.connect(ctx, i)
				if err != nil {
					closeAll()
					return nil, nil, err
				}
				conns = append(conns, c)
				out = append(out, func(sql string) error { _, err := c.Exec(ctx, sql); return err })
			}
			return out, closeAll, nil
		},
		commit: func() (uint64, error) {
			st, err := d.status(apiAddr(d.servers[0]))
			return st.Commit, err
		},
		close: d.close,
	}
	if d.nodes != nil {
		s.leaderCPU = d.leaderCPU
	}
	return s, nil
}

// leaderCPU is the ID of a local cluster's leader and the CPU time its
// process has used so far.
func (d *deployment) leaderCPU() (string, time.Duration, error) {
	l, err := d.leader()
	if err != nil {
		return "", 0, err
	}
	cpu, err := processCPU(l.cmd.Process.Pid)
	return l.id, cpu, err
}

// leader is a local cluster's leader, as its first server knows it.
func (d *deployment) leader() (*benchNode, error) {
	st, err := d.status(apiAddr(d.servers[0]))
	if err != nil {
		return nil, err
	}
	l := leaderOf(st, d.nodes)
	if l == nil {
		return nil, fmt.Errorf("%s: no leader", d.name)
	}
	return l, nil
}

// pinLeader returns the pin of a pinned local cluster: the clients were
// pointed at the leader when it started (toLeader), so a leader that has
// changed since is an error rather than a figure of the wrong node.
func (d *deployment) pinLeader() (func() (func(), error), error) {
	p, err := newCPUPinning()
	if err != nil {
		return nil, err
	}
	return func() (func(), error) {
		l, err := d.leader()
		if err != nil {
			return nil, err
		}
		if "quack:"+l.quack != d.servers[0] {
			return nil, fmt.Errorf("%s: the leader moved away from the node the clients use", d.name)
		}
		var others []int
		for _, n := range d.nodes {
			if n != l {
				others = append(others, n.cmd.Process.Pid)
			}
		}
		return p.pin(l.cmd.Process.Pid, others)
	}, nil
}

// benchWrites measures single-row INSERT transactions per second, p50 and
// p99 at each client count, on each system side by side: the client
// counts run in turn, every system at one count before the next count, so
// that a drift in the machine's load leans on none of them.
func benchWrites(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("duckraft-bench writes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bf benchFlags
	bf.register(fs, "duckraft-3,duckraft-1,duckdb")
	dur := fs.Duration("duration", 5*time.Second, "measuring time per system and client count")
	clients := fs.String("clients", "1,8,64", "client counts")
	fs.StringVar(clients, "threads", "1,8,64", "the same as --clients")
	via := fs.String("via", "leader", "local clusters: send every client to the leader, or spread them over all nodes (followers forward writes)")
	dqlite := fs.String("dqlite", os.Getenv("DUCKRAFT_BENCH_DQLITE"), "directory of a dqlite cluster to run side by side, as scripts/bench-dqlite.sh start DIR made it (env DUCKRAFT_BENCH_DQLITE); adds dqlite to --systems")
	if err := fs.Parse(args); err != nil {
		return err
	}
	counts, err := parseCounts("clients", *clients)
	if err != nil {
		return err
	}
	if *dur <= 0 {
		return errors.New("--duration must be positive")
	}
	if *via != "leader" && *via != "spread" {
		return fmt.Errorf("--via %q: leader or spread", *via)
	}
	ctx := context.Background()
	// dqlite is a system of bench writes only: the other benchmarks'
	// --systems do not know it.
	withDqlite := *dqlite != ""
	var rest []string
	for _, s := range strings.Split(bf.systems, ",") {
		if strings.TrimSpace(s) == "dqlite" {
			withDqlite = true
		} else {
			rest = append(rest, s)
		}
	}
	if withDqlite && *dqlite == "" {
		return errors.New("--systems dqlite needs --dqlite (scripts/bench-dqlite.sh starts one)")
	}
	if withDqlite && len(bf.servers.List()) > 0 {
		return errors.New("--dqlite runs beside local systems, not with --server")
	}
	bf.systems = strings.Join(rest, ",")
	var systems []*writeSystem
	if !withDqlite || strings.Trim(bf.systems, ", ") != "" || bf.pg != "" {
		systems, err = openWriteSystems(ctx, &bf, *via == "spread", stderr)
	}
	if err == nil && withDqlite {
		var s *writeSystem
		if s, err = openDqliteWrites(*dqlite); err == nil {
			systems = append(systems, s)
		}
	}
	defer func() {
		for _, s := range systems {
			s.close()
		}
	}()
	if err != nil {
		return err
	}
	rep := &benchReport{Bench: "writes", Machine: describeMachine(ctx, bf.pg), DurationSec: dur.Seconds()}
	if withDqlite {
		rep.Machine.Dqlite = dqliteVersion(ctx)
	}
	prog := newBenchProgress(stderr, time.Duration(len(counts)*len(systems))**dur)
	defer prog.finish()
	for _, n := range counts {
		for _, s := range systems {
			prog.begin(fmt.Sprintf("writes: %s, %d clients", s.name, n), *dur)
			p, err := writePointOf(ctx, s, n, *dur)
			prog.end()
			if err != nil {
				return fmt.Errorf("%s at %d clients: %w", s.name, n, err)
			}
			rep.Writes = append(rep.Writes, p)
		}
	}
	prog.finish()
	return rep.print(stdout, bf.json)
}

// openWriteSystems opens --server's deployment, or the local systems of
// --systems, their clients on the leader unless spread, as PostgreSQL's
// are on its primary; on error it returns those opened so far, to be
// closed.
func openWriteSystems(ctx context.Context, bf *benchFlags, spread bool, stderr io.Writer) ([]*writeSystem, error) {
	var out []*writeSystem
	if servers := bf.servers.List(); len(servers) > 0 {
		d, err := remoteDeployment(servers, bf.token)
		if err != nil {
			return nil, err
		}
		s, err := duckraftWriteSystem(ctx, d)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		if bf.pg != "" {
			p, err := openPGWrites(ctx, bf.pg)
			if err != nil {
				return out, err
			}
			out = append(out, p)
		}
		return out, nil
	}
	list, err := parseSystemList(bf.systems, bf.pg, true)
	if err != nil {
		return nil, err
	}
	for _, sys := range list {
		if sys.pinned && spread {
			return out, fmt.Errorf("%s: a pinned cluster takes its clients on the leader, not --via spread", sys)
		}
		fmt.Fprintf(stderr, "bench: starting %s\n", sys)
		var s *writeSystem
		switch sys.kind {
		case "duckraft":
			dir, cleanup, err := benchWorkDir("duckraft-bench-writes-")
			if err != nil {
				return out, err
			}
			d, err := localDeployment(*bf, dir, sys.nodes)
			if err != nil {
				cleanup()
				return out, err
			}
			d.name = sys.String()
			if !spread {
				if err := d.toLeader(); err != nil {
					d.close()
					cleanup()
					return out, err
				}
			}
			s, err = duckraftWriteSystem(ctx, d)
			if err == nil && sys.pinned {
				s.pin, err = d.pinLeader()
			}
			if err != nil {
				d.close()
				cleanup()
				return out, err
			}
			s.close = func() { d.close(); cleanup() }
		case "duckdb":
			dir, cleanup, err := benchWorkDir("duckraft-bench-duckdb-")
			if err != nil {
				return out, err
			}
			l, err := openLocalDuckDB(filepath.Join(dir, "local.duckdb"))
			if err != nil {
				cleanup()
				return out, err
			}
			s = l.writeSystem()
			s.close = func() { l.Close(); cleanup() }
		case "postgres":
			if s, err = openPGWrites(ctx, bf.pg); err != nil {
				return out, err
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// writePointOf runs n sessions of s for d.
func writePointOf(ctx context.Context, s *writeSystem, n int, d time.Duration) (writePoint, error) {
	if s.point != nil {
		return s.point(ctx, n, d)
	}
	sessions, closeAll, err := s.sessions(ctx, n)
	if err != nil {
		return writePoint{}, err
	}
	defer closeAll()
	var before uint64
	if s.commit != nil {
		if before, err = s.commit(); err != nil {
			return writePoint{}, err
		}
	}
	if s.pin != nil {
		restore, err := s.pin()
		if err != nil {
			return writePoint{}, err
		}
		defer restore()
	}
	var leader string
	var cpuBefore time.Duration
	if s.leaderCPU != nil {
		if leader, cpuBefore, err = s.leaderCPU(); err != nil {
			return writePoint{}, err
		}
	}
	r := runClients(n, d, func(i, seq int) error { return sessions[i](insertRow(i, seq)) })
	p := writePoint{System: s.name, Clients: n, Writes: r.writes, TxPerSec: r.rate, P50Ms: ms(r.p50), P99Ms: ms(r.p99), Errors: r.errors}
	if s.commit != nil {
		after, err := s.commit()
		if err != nil {
			return writePoint{}, err
		}
		p.PerEntry = float64(r.writes) / float64(max(after-before, 1))
	}
	if s.leaderCPU != nil {
		// A leader that changed mid-round has no per-write figure: its
		// CPU time covers only part of the writes.
		if now, cpuAfter, err := s.leaderCPU(); err == nil && now == leader && r.writes > 0 {
			p.LeaderCPUMs = ms(cpuAfter-cpuBefore) / float64(r.writes)
		}
	}
	if r.writes == 0 {
		return p, fmt.Errorf("no write succeeded (%d errors; last: %v)", r.errors, r.lastErr)
	}
	return p, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type roundResult struct {
	writes   int
	rate     float64
	p50, p99 time.Duration
	errors   int
	lastErr  error
}

// insertRow is the statement client i sends as its seq-th transaction.
func insertRow(i, seq int) string {
	return fmt.Sprintf("INSERT INTO bench VALUES (%d, %d, 'payload-%d-%d')", i, seq, i, seq)
}

// runClients calls write(i, seq) in a closed loop from threads goroutines
// for d and summarizes the latencies of the calls that succeeded.
func runClients(threads int, d time.Duration, write func(i, seq int) error) roundResult {
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	var lastErr error
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for i := 0; i < threads; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var mine []time.Duration
			bad := 0
			var last error
			for seq := 0; time.Now().Before(stop); seq++ {
				t0 := time.Now()
				if err := write(i, seq); err != nil {
					bad++
					last = err
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += bad
			if last != nil {
				lastErr = last
			}
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(lat) == 0 {
		return roundResult{errors: errs, lastErr: lastErr}
	}
	slices.Sort(lat)
	return roundResult{
		writes:  len(lat),
		rate:    float64(len(lat)) / elapsed.Seconds(),
		p50:     lat[len(lat)/2],
		p99:     lat[len(lat)*99/100],
		errors:  errs,
		lastErr: lastErr,
	}
}
