package hunter

import (
	"flag"
	"strings"
	"testing"
	"time"
)

var (
	seedFlag       = flag.Int64("seed", 0, "seed of the hunt; TestHunt runs only when it is set (make fuzz-sql)")
	statementsFlag = flag.Int("statements", 0, "statements to send (0: no bound)")
	acceptedFlag   = flag.Int("accepted", 10000, "accepted statements to reach (0: no bound)")
	durationFlag   = flag.Duration("duration", 0, "longest hunt (0: until -statements)")
	keepGoingFlag  = flag.Bool("keep-going", false, "go on after a divergence, to find more classes in one run")
	restoreFlag    = flag.Int("restore-every", 1000, "stop a follower every this many statements so that it catches up from a snapshot (0: never)")
	skipFlag       = flag.String("skip", "", "comma-separated placements to leave out, to hunt past a known finding")
)

// TestHunt is make fuzz-sql: a long seeded hunt with the report in the log.
func TestHunt(t *testing.T) {
	if *seedFlag == 0 {
		t.Skip("runs with make fuzz-sql SEED=… ACCEPTED=… STATEMENTS=… HUNT_DURATION=…")
	}
	check(t, Run(t, Config{Seed: *seedFlag, Statements: *statementsFlag, Accepted: *acceptedFlag, Duration: *durationFlag,
		KeepGoing: *keepGoingFlag, RestoreEvery: *restoreFlag, Skip: skipped()}))
}

// TestHuntShort is the fixed-seed hunt make test runs: 300 statements and
// one follower restore, at most 3 minutes of statements on a loaded 2-core
// machine.
func TestHuntShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster and sends 300 statements")
	}
	check(t, Run(t, Config{Seed: 1, Statements: 300, RestoreEvery: 150, Duration: 3 * time.Minute}))
}

func skipped() []string {
	if *skipFlag == "" {
		return nil
	}
	return strings.Split(*skipFlag, ",")
}

func check(t *testing.T, r *Report) {
	t.Helper()
	t.Log("\n" + r.String())
	for _, f := range r.Findings {
		t.Errorf("seed %d: %s: %s", r.Seed, f.Kind, f.Detail)
	}
}
