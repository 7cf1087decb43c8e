package chaos

import (
	"flag"
	"testing"
	"time"
)

var (
	seedFlag     = flag.Int64("seed", 0, "seed of the chaos schedule; TestChaos runs only when it is set (make chaos)")
	durationFlag = flag.Duration("duration", 2*time.Minute, "length of the chaos schedule")
	keepLogsFlag = flag.Bool("keep-logs", false, "keep the nodes' logs even when the run passes")
	votersFlag   = flag.Int("voters", 3, "number of voters in the cluster")
	storeFlag    = flag.String("raft-log-store", "", "the nodes' --raft-log-store (default: duckraftd's)")
)

// TestChaos is make chaos: one seeded, randomized run of faults under the
// workloads, with the report in the log.
func TestChaos(t *testing.T) {
	if *seedFlag == 0 {
		t.Skip("runs with make chaos SEED=… DURATION=…")
	}
	check(t, Run(t, Config{Seed: *seedFlag, Duration: *durationFlag, Voters: *votersFlag, KeepLogs: *keepLogsFlag, LogStore: *storeFlag}))
}

// TestChaosShort is the fixed-seed subset that make test runs: a 20 s
// schedule of faults under the workloads. Every verdict holds but the
// failover targets, which measure the machine as much as the code: make
// test shares it with other packages' tests. Here writes must only resume
// after every leader fault; the figures are logged.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and injects faults for 20 s")
	}
	r := Run(t, Config{Seed: 1, Duration: 20 * time.Second})
	failover := r.failoverVerdict()
	for i, v := range r.Verdicts {
		if v.name == failover.name && !v.ok && !r.writesStopped() {
			t.Logf("seed %d: %s: %s (not a failure here)", r.Seed, v.name, v.detail)
			r.Verdicts[i].ok = true
		}
	}
	check(t, r)
}

// writesStopped reports whether no write was acknowledged after some
// leader fault.
func (r *Report) writesStopped() bool {
	for _, e := range r.Events {
		if e.noAck && e.fault.failover() {
			return true
		}
	}
	return false
}

func check(t *testing.T, r *Report) {
	t.Helper()
	for _, f := range r.Failures() {
		t.Errorf("seed %d: %s", r.Seed, f)
	}
}
