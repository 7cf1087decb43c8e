package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/duckraft/duckraft/cmd/internal/clusterctl"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// benchToken is the token of the clusters the benchmarks start themselves.
const benchToken = "bench-token-0123456789"

// benchFlags are the flags every benchmark shares: where to send the load,
// as pgbench takes a host, and how to print the result.
type benchFlags struct {
	servers clusterctl.Servers
	token   string
	json    bool
	daemon  string
	// daemonFlags are extra duckraftd flags for the local clusters.
	daemonFlags string
	systems     string
	pg          string
}

func (b *benchFlags) register(fs *flag.FlagSet, defaultSystems string) {
	fs.Var(&b.servers, "server", "a node or router of a running deployment, quack:HOST[:PORT] (repeatable or comma-separated; clients spread over them); without it the benchmark starts local clusters")
	fs.StringVar(&b.token, "token", os.Getenv("DUCKRAFT_TOKEN"), "token for --server (env DUCKRAFT_TOKEN); it needs the admin role for failover --mode transfer")
	fs.BoolVar(&b.json, "json", false, "print the result as JSON instead of a Markdown table")
	fs.StringVar(&b.daemon, "duckraftd", "bin/duckraftd", "duckraftd binary for the local clusters")
	fs.StringVar(&b.daemonFlags, "duckraftd-flags", "", "extra flags for every duckraftd of the local clusters, space-separated (--memory-limit 512MB, say)")
	fs.StringVar(&b.systems, "systems", defaultSystems, "systems to compare, comma-separated: duckraft-N (a local N-node cluster), duckdb (in-process), postgres (needs --pg); bench writes also duckraft-N-pinned (the leader alone on one CPU); ignored with --server")
	fs.StringVar(&b.pg, "pg", os.Getenv("DUCKRAFT_BENCH_PG"), "PostgreSQL connection string of a peer to run side by side (env DUCKRAFT_BENCH_PG; scripts/bench-peers.sh starts one)")
}

// errBadSystem is returned for a --systems entry the benchmark cannot run.
var errBadSystem = errors.New("unknown system")

// benchSystem is one entry of --systems.
type benchSystem struct {
	kind  string // duckraft, duckdb or postgres
	nodes int    // duckraft: the local cluster's size
	// pinned: the cluster's leader runs alone on one CPU (bench writes
	// only; pinnedSuffix).
	pinned bool
}

func (s benchSystem) String() string {
	if s.kind == "duckraft" {
		name := fmt.Sprintf("duckraft-%d", s.nodes)
		if s.pinned {
			name += pinnedSuffix
		}
		return name
	}
	return s.kind
}

// parseSystems parses --systems; postgres is added when a DSN is given.
func parseSystems(list, pg string) ([]benchSystem, error) {
	return parseSystemList(list, pg, false)
}

// parseSystemList is parseSystems, accepting duckraft-N-pinned (N ≥ 2)
// when pinned.
func parseSystemList(list, pg string, pinned bool) ([]benchSystem, error) {
	var out []benchSystem
	seen := map[string]bool{}
	add := func(s benchSystem) {
		if !seen[s.String()] {
			seen[s.String()] = true
			out = append(out, s)
		}
	}
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
		case f == "duckdb", f == "postgres":
			add(benchSystem{kind: f})
		case strings.HasPrefix(f, "duckraft-"):
			size, pin := strings.CutSuffix(strings.TrimPrefix(f, "duckraft-"), pinnedSuffix)
			n, err := strconv.Atoi(size)
			if err != nil || n < 1 || n > 9 {
				return nil, fmt.Errorf("--systems: %q: %w (duckraft-N takes 1 to 9 nodes)", f, errBadSystem)
			}
			if pin && !pinned {
				return nil, fmt.Errorf("--systems: %q: %w (only bench writes pins a leader)", f, errBadSystem)
			}
			if pin && n < 2 {
				return nil, fmt.Errorf("--systems: %q: %w (a pinned cluster needs followers: duckraft-N-pinned takes 2 to 9 nodes)", f, errBadSystem)
			}
			add(benchSystem{kind: "duckraft", nodes: n, pinned: pin})
		default:
			return nil, fmt.Errorf("--systems: %q: %w (duckraft-N, duckdb or postgres)", f, errBadSystem)
		}
	}
	if pg != "" {
		add(benchSystem{kind: "postgres"})
	}
	if seen["postgres"] && pg == "" {
		return nil, errors.New("--systems postgres needs --pg (scripts/bench-peers.sh starts one)")
	}
	if len(out) == 0 {
		return nil, errors.New("--systems: nothing to run")
	}
	return out, nil
}

// parseCounts parses a comma-separated list of positive counts.
func parseCounts(name, list string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 4096 {
			return nil, fmt.Errorf("--%s: bad count %q (1 to 4096)", name, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// deployment is a duckraft deployment under load: a running one named by
// --server, or a local cluster the benchmark started (nodes set).
type deployment struct {
	name    string
	servers []string // client addresses, quack:HOST:PORT
	token   string
	tls     bool
	nodes   []*benchNode // local clusters only
}

// remoteDeployment checks the servers parse and answer their status.
func remoteDeployment(servers []string, token string) (*deployment, error) {
	d := &deployment{name: "duckraft (" + strings.Join(servers, ", ") + ")", servers: servers, token: token}
	for _, s := range servers {
		_, tls, err := clusterctl.APIAddr(s)
		if err != nil {
			return nil, err
		}
		d.tls = tls
	}
	if _, err := d.status(apiAddr(servers[0])); err != nil {
		return nil, fmt.Errorf("status of %s: %w", servers[0], err)
	}
	return d, nil
}

// localDeployment starts an n-node cluster under dir; its logs go to a file
// there, never to the benchmark's output.
func localDeployment(bf benchFlags, dir string, n int) (*deployment, error) {
	nodes, err := startBenchCluster(bf.daemon, dir, benchToken, n, strings.Fields(bf.daemonFlags)...)
	if err != nil {
		return nil, err
	}
	d := &deployment{name: fmt.Sprintf("duckraft-%d", n), token: benchToken, nodes: nodes}
	for _, nd := range nodes {
		d.servers = append(d.servers, "quack:"+nd.quack)
	}
	return d, nil
}

// toLeader points every client of a local cluster at its leader.
func (d *deployment) toLeader() error {
	st, err := nodeStatus(d.nodes[0].quack, d.token)
	if err != nil {
		return err
	}
	l := leaderOf(st, d.nodes)
	if l == nil {
		return fmt.Errorf("%s: no leader", d.name)
	}
	d.servers = []string{"quack:" + l.quack}
	return nil
}

// localCluster starts the one duckraft-N cluster of at least minNodes nodes
// that --systems names, for the benchmark what, in a work directory of its
// own; stop ends the cluster and removes the directory.
func localCluster(bf benchFlags, what string, minNodes int, stderr io.Writer) (d *deployment, stop func(), err error) {
	systems, err := parseSystems(bf.systems, "")
	if err != nil {
		return nil, nil, err
	}
	if len(systems) != 1 || systems[0].kind != "duckraft" || systems[0].nodes < minNodes {
		return nil, nil, fmt.Errorf("--systems: %s needs one duckraft-N cluster of %d nodes or more", what, minNodes)
	}
	dir, cleanup, err := benchWorkDir("duckraft-bench-" + what + "-")
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(stderr, "bench: starting %s\n", systems[0])
	if d, err = localDeployment(bf, dir, systems[0].nodes); err != nil {
		cleanup()
		return nil, nil, err
	}
	return d, func() { d.close(); cleanup() }, nil
}

func (d *deployment) close() {
	if d.nodes != nil {
		stopBenchCluster(d.nodes)
	}
}

func (d *deployment) api() *nodeapi.Client { return &nodeapi.Client{Token: d.token, TLS: d.tls} }

func (d *deployment) status(addr string) (nodeapi.Status, error) {
	return clusterctl.Status(d.api(), addr)
}

// nodeStatus fetches the status of a node of a local cluster (plain HTTP).
func nodeStatus(addr, token string) (nodeapi.Status, error) {
	return clusterctl.Status(&nodeapi.Client{Token: token}, addr)
}

// apiAddr is the node API's HOST:PORT of one of a deployment's servers,
// which remoteDeployment checked parse (a local cluster's are loopback
// addresses it made itself).
func apiAddr(server string) string {
	addr, _, err := clusterctl.APIAddr(server)
	if err != nil {
		return server
	}
	return addr
}

func (d *deployment) connect(ctx context.Context, i int) (*client.Conn, error) {
	s := d.servers[i%len(d.servers)]
	c, err := client.Connect(ctx, s, client.Options{Token: d.token, Generation: wire.Q1})
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", s, err)
	}
	return c, nil
}

// exec runs one statement on a fresh session.
func (d *deployment) exec(ctx context.Context, sql string) error {
	c, err := d.connect(ctx, 0)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Exec(ctx, sql)
	return err
}

// members are the data nodes (not routers) the first server knows, with
// the leader's ID.
func (d *deployment) members() ([]nodeapi.MemberStatus, string, error) {
	st, err := d.status(apiAddr(d.servers[0]))
	if err != nil {
		return nil, "", err
	}
	var out []nodeapi.MemberStatus
	for _, m := range st.Members {
		if m.Role != "router" && m.QuackAddr != "" {
			out = append(out, m)
		}
	}
	return out, st.LeaderID, nil
}

// benchWorkDir is a temporary directory removed by the returned function.
func benchWorkDir(prefix string) (string, func(), error) {
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}

// daemonLogName is the file in a local cluster's work directory that its
// daemons log to.
const daemonLogName = "duckraftd.log"

// daemonLog opens the file the local cluster's daemons in dir log to.
func daemonLog(dir string) (io.WriteCloser, error) {
	return os.OpenFile(filepath.Join(dir, daemonLogName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// withLogTail adds the last 20 lines of the daemons' log in dir to err: the
// work directory is removed when the benchmark ends.
func withLogTail(err error, dir string) error {
	var tail string
	if b, rerr := os.ReadFile(filepath.Join(dir, daemonLogName)); rerr != nil {
		tail = rerr.Error()
	} else {
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		tail = strings.Join(lines[max(0, len(lines)-20):], "\n")
	}
	return fmt.Errorf("%w; the daemons' log ends:\n%s", err, tail)
}

// pollUntil calls f every interval until it returns true or timeout passes.
func pollUntil(timeout, interval time.Duration, f func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if f() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
}
