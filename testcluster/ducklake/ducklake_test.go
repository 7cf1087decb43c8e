package ducklake

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/testcluster"
)

var (
	longDuration   = flag.Duration("ducklake.duration", 0, "length of the long DuckLake run (make ducklake); 0 skips it")
	longCommitters = flag.Int("ducklake.committers", 4, "committers of the long run")
	longCommits    = flag.Int("ducklake.commits", 0, "end the long run once this many commits were acknowledged (0: run for its duration)")
	longKillEvery  = flag.Duration("ducklake.kill-every", 20*time.Second, "SIGKILL the leader this often in the long run (0: never)")
	longReaders    = flag.Int("ducklake.readers", 2, "time-travel readers of the long run")
	longVoters     = flag.Int("ducklake.voters", 3, "voters of the long run's cluster")
	longTarget     = flag.String("ducklake.target", "cluster", "catalog of the long run: cluster, or duckdb (a DuckDB file in the test process, for comparison)")
	longModes      = flag.String("ducklake.modes", "", "modes of the long run's clients, comma-separated (autocommit, transactional, transactional-one-text; default all)")
)

// parseModes reads -ducklake.modes.
func parseModes(t *testing.T, s string) []Mode {
	t.Helper()
	var out []Mode
	for _, name := range strings.Split(s, ",") {
		if name == "" {
			continue
		}
		m, ok := map[string]Mode{"autocommit": Autocommit, "transactional": Transactional, "transactional-one-text": TransactionalOneText}[name]
		if !ok {
			t.Fatalf("unknown mode %q", name)
		}
		out = append(out, m)
	}
	return out
}

// clusterConfig points a workload at c: client i starts on the leader if i
// is even, on a follower if odd, and moves to the next node after each
// failure; the oracle reads strongly.
func clusterConfig(t *testing.T, c *testcluster.Cluster, cfg Config) Config {
	t.Helper()
	leader := c.WaitForLeader(t, 20*time.Second)
	var order []*testcluster.Node
	order = append(order, leader)
	order = append(order, c.Others(leader)...)
	cfg.Dial = func(ctx context.Context, client, reconnect int) (Backend, error) {
		n := order[(client%2+reconnect)%len(order)]
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return DialQuack(dctx, n.QuackAddr, testcluster.Token)
	}
	cfg.Oracle = func(ctx context.Context) (Backend, error) {
		last := errors.New("no node is running")
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			q, err := DialQuack(dctx, n.QuackAddr, testcluster.Token)
			cancel()
			if err != nil {
				last = err
				continue
			}
			if _, err := q.Query(ctx, "SET duckraft_consistency = 'strong'"); err != nil {
				q.Close()
				last = err
				continue
			}
			return q, nil
		}
		return nil, last
	}
	data, err := OpenData(filepath.Join(t.TempDir(), "lake"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { data.Close() })
	cfg.Data = data
	return cfg
}

// killLeaders SIGKILLs the leader every every (at most max times, 0: no
// bound), and restarts it after a pause; it runs on the test's goroutine.
// killed, if set, receives the time of each kill.
func killLeaders(t *testing.T, c *testcluster.Cluster, first, every time.Duration, max int, killed *atomic.Int64) func(context.Context) {
	return func(ctx context.Context) {
		next := time.After(first)
		for kills := 0; max == 0 || kills < max; kills++ {
			select {
			case <-ctx.Done():
				return
			case <-next:
			}
			next = time.After(every)
			l := c.Leader()
			if l == nil {
				continue
			}
			t.Logf("SIGKILL the leader %s", l.ID)
			l.Kill()
			if killed != nil {
				killed.Store(time.Now().UnixNano())
			}
			select {
			case <-ctx.Done():
			case <-time.After(3 * time.Second):
			}
			l.Restart(t)
		}
	}
}

func checkRun(t *testing.T, ctx context.Context, cfg Config, rec *Record, err error) *Report {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	rep := Check(ctx, cfg, rec)
	t.Log("\n" + rep.String())
	if len(rep.Failures) > 0 {
		dumpEvents(t, rec)
	}
	for _, f := range rep.Failures {
		t.Error(f)
	}
	return rep
}

// TestDuckLakeShort is the harness in make test: 4 committers (two on the
// leader, two on a follower, in the three modes) and 2 readers for a few
// seconds on a 3-node cluster whose leader is killed once.
func TestDuckLakeShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := testcluster.Start(t, 3, testcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The run goes on until commits were acknowledged after the kill:
	// the lake stays writable once a new leader is elected.
	var killed atomic.Int64
	cfg := clusterConfig(t, c, Config{Committers: 4, Readers: 2, Duration: 12 * time.Second, Seed: 1, ExpireKeep: 40,
		Until: func(rec *Record) bool {
			k := killed.Load()
			return k != 0 && rec.AckedAfter(time.Unix(0, k)) >= 4
		}})
	rec, err := Run(ctx, cfg, killLeaders(t, c, 4*time.Second, time.Hour, 1, &killed))
	checkRun(t, ctx, cfg, rec, err)
	if k := killed.Load(); k == 0 || rec.AckedAfter(time.Unix(0, k)) < 4 {
		t.Errorf("%d commits were acknowledged after the leader was killed, want 4", rec.AckedAfter(time.Unix(0, k)))
	}
	c.WaitConverged(t, time.Minute)
}

// TestDuckLakeLong is make ducklake: the long run, with a leader SIGKILL
// every -ducklake.kill-every.
func TestDuckLakeLong(t *testing.T) {
	if *longDuration == 0 {
		t.Skip("runs with make ducklake DUCKLAKE_DURATION=…")
	}
	ctx := context.Background()
	cfg := Config{Committers: *longCommitters, Readers: *longReaders, Duration: *longDuration,
		Commits: *longCommits, Seed: time.Now().UnixNano(), Modes: parseModes(t, *longModes)}
	if *longTarget == "duckdb" {
		cfg = localConfig(t, cfg)
		rec, err := Run(ctx, cfg, nil)
		checkRun(t, ctx, cfg, rec, err)
		return
	}
	c := testcluster.Start(t, *longVoters, testcluster.Options{})
	cfg = clusterConfig(t, c, cfg)
	var faults func(context.Context)
	if *longKillEvery > 0 && *longVoters > 1 {
		faults = killLeaders(t, c, *longKillEvery, *longKillEvery, 0, nil)
	}
	rec, err := Run(ctx, cfg, faults)
	checkRun(t, ctx, cfg, rec, err)
	c.WaitConverged(t, 2*time.Minute)
}

// TestDuckLakeReferenceDuckDB runs the workload against a DuckDB database
// in this process, the single server a catalog would otherwise live on:
// the checkers must pass there too, or they check the harness rather than
// duckraft.
func TestDuckLakeReferenceDuckDB(t *testing.T) {
	ctx := context.Background()
	cfg := localConfig(t, Config{Committers: 4, Readers: 1, Duration: 4 * time.Second, Seed: 2, ExpireKeep: 40})
	rec, err := Run(ctx, cfg, nil)
	rep := checkRun(t, ctx, cfg, rec, err)
	if rep.Landed <= cfg.Committers {
		t.Errorf("%d commits landed: no more than the tables' creations", rep.Landed)
	}
}

// A run with Commits set ends once that many commits were acknowledged,
// long before its Duration: the committers stop there, and the readers
// and faults must stop with them (make ducklake's long run went on reading
// and killing leaders until its duration was over).
func TestRunEndsAtCommits(t *testing.T) {
	ctx := context.Background()
	cfg := localConfig(t, Config{Committers: 2, Readers: 1, Duration: 10 * time.Minute, Commits: 10, Seed: 3})
	faultsEnded := make(chan struct{})
	rec, err := Run(ctx, cfg, func(ctx context.Context) {
		defer close(faultsEnded)
		<-ctx.Done()
	})
	rep := checkRun(t, ctx, cfg, rec, err)
	<-faultsEnded
	if rec.Elapsed >= cfg.Duration {
		t.Errorf("the run lasted %v, its whole duration: it did not end at %d commits", rec.Elapsed, cfg.Commits)
	}
	if rep.Acked < cfg.Commits {
		t.Errorf("%d commits acknowledged, want at least %d", rep.Acked, cfg.Commits)
	}
}

// dumpEvents writes the run's events to a file for study.
func dumpEvents(t *testing.T, rec *Record) {
	f, err := os.CreateTemp("", "ducklake-events-*.json")
	if err != nil {
		t.Log(err)
		return
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, e := range rec.Events {
		enc.Encode(e)
	}
	t.Logf("events in %s", f.Name())
}

// localConfig points a workload at a DuckDB file in the test process. It
// runs the transactional modes only: in autocommit a batch that fails half
// way stays half applied on a single DuckDB (quack.json: "A failed
// client-side commit batch is not atomic on the quack server").
func localConfig(t *testing.T, cfg Config) Config {
	t.Helper()
	dir := t.TempDir()
	db, err := engine.Open(filepath.Join(dir, "catalog.duckdb"), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	data, err := OpenData(filepath.Join(dir, "lake"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { data.Close() })
	local := func(context.Context) (Backend, error) { return NewLocal(db) }
	cfg.Data, cfg.Oracle = data, local
	cfg.Dial = func(ctx context.Context, _, _ int) (Backend, error) { return local(ctx) }
	var modes []Mode
	for _, m := range cfg.Modes {
		if m != Autocommit {
			modes = append(modes, m)
		}
	}
	if len(modes) == 0 {
		modes = []Mode{Transactional, TransactionalOneText}
	}
	cfg.Modes = modes
	return cfg
}

// TestHistoryMatchesExpected checks the checker: the digests of the
// commits up to each snapshot equal those of the rows they leave, and a
// row missing or doubled changes the digest.
func TestHistoryMatchesExpected(t *testing.T) {
	events := []Event{
		{Table: "t", Landed: true, SID: 1, Inserted: []int64{1, 2, 3}},
		{Table: "t", Landed: false, SID: 2, Inserted: []int64{9}},
		{Table: "t", Landed: true, SID: 3, Deleted: []int64{2}},
		{Table: "u", Landed: true, SID: 4, Inserted: []int64{7}},
		{Table: "t", Landed: true, SID: 5, Inserted: []int64{4}},
	}
	h := newHistory(events)
	for at := int64(0); at <= 6; at++ {
		want := expected(events, "t", at)
		if got := h.at("t", at); got != digestOf(want) {
			t.Errorf("at %d: digest %+v, want that of %v", at, got, want)
		}
	}
	full := expected(events, "t", 5)
	if digestOf(full[1:]) == h.at("t", 5) || digestOf(append(full, full[0])) == h.at("t", 5) {
		t.Error("a missing or doubled row leaves the digest unchanged")
	}
}
