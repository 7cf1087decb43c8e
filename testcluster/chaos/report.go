package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

// Failover targets from the issue: the time from a leader fault to the
// first acknowledged write begun after it.
const (
	maxFailoverMedian = 2 * time.Second
	maxFailoverP99    = 5 * time.Second
)

// Report is what a run did and found.
type Report struct {
	Seed     int64
	Duration time.Duration
	// Start is when the workloads started: event times count from it.
	Start   time.Time
	Elapsed time.Duration
	// LogDir holds the nodes' full logs after a failed run.
	LogDir   string
	Plan     []step
	Events   []event
	Verdicts []verdict

	ops      map[string]int
	errs     map[string]int
	examples map[string]string
	lag      struct {
		healthy, any uint64
		node         string
	}
	links testcluster.LinkStats
}

// event is one executed step; for a leader fault, failover is the time
// from the fault to the first acknowledged write begun after it.
type event struct {
	step     int
	fault    fault
	node     string
	at       int64
	hold     time.Duration
	skipped  string
	failover time.Duration
	noAck    bool
	detail   string // what the fault did, where that varies (transfers)
}

// verdict is one checker's finding.
type verdict struct {
	name   string
	ok     bool
	detail string
	// lost and dup count acknowledged appends lost and applied twice.
	lost, dup int
}

// Failed reports whether any checker found a violation, or none ran: a run
// that stopped before its checks (the cluster did not form, a node did not
// start) proved nothing, and its report must not read as a pass.
func (r *Report) Failed() bool {
	if len(r.Verdicts) == 0 {
		return true
	}
	for _, v := range r.Verdicts {
		if !v.ok {
			return true
		}
	}
	return false
}

// Failures lists the verdicts that failed.
func (r *Report) Failures() []string {
	var out []string
	for _, v := range r.Verdicts {
		if !v.ok {
			out = append(out, v.name+": "+v.detail)
		}
	}
	return out
}

// Failovers returns the measured failover durations: leader killed, cut
// off or blackholed → first acknowledged write.
func (r *Report) Failovers() []time.Duration {
	return r.stalls(func(f fault) bool { return f.failover() })
}

// Stalls returns how long writes stalled after the leader was paused.
func (r *Report) Stalls() []time.Duration {
	return r.stalls(func(f fault) bool { return f == pauseLeader })
}

// Handovers returns how long writes stalled after a planned handover: a
// leadership transfer, or a leader stopped with SIGTERM (which transfers
// leadership before it exits).
func (r *Report) Handovers() []time.Duration {
	return r.stalls(func(f fault) bool { return f == transferLeader || f == stopLeader })
}

func (r *Report) stalls(kind func(fault) bool) []time.Duration {
	var out []time.Duration
	for _, e := range r.Events {
		if e.skipped == "" && kind(e.fault) && !e.noAck {
			out = append(out, e.failover)
		}
	}
	return out
}

// LostAndDuplicated sums lost and duplicated acknowledged appends over all
// nodes.
func (r *Report) LostAndDuplicated() (lost, dup int) {
	for _, v := range r.Verdicts {
		lost += v.lost
		dup += v.dup
	}
	return lost, dup
}

// collect copies the recorder's counts into the report and measures each
// failover.
func (r *Report) collect(rec *recorder, lag *lagSampler, links testcluster.LinkStats) {
	rec.mu.Lock()
	r.ops, r.errs, r.examples = rec.ops, rec.errs, rec.examples
	rec.mu.Unlock()
	lag.mu.Lock()
	r.lag.healthy, r.lag.any, r.lag.node = lag.healthy, lag.any, lag.healthyN
	lag.mu.Unlock()
	r.links = links
	for i := range r.Events {
		e := &r.Events[i]
		if e.skipped != "" || !e.fault.onLeader() {
			continue
		}
		if ret, ok := rec.firstAckAfter(e.at); ok {
			e.failover = time.Duration(ret - e.at)
		} else {
			e.noAck = true
		}
	}
}

// percentile returns the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func (r *Report) failoverVerdict() verdict {
	v := verdict{name: fmt.Sprintf("failover median < %v, p99 < %v", maxFailoverMedian, maxFailoverP99)}
	for _, e := range r.Events {
		if e.noAck && e.fault.failover() {
			v.detail = fmt.Sprintf("no write acknowledged after step %d (%s on %s)", e.step, e.fault, e.node)
			return v
		}
	}
	fo := r.Failovers()
	med, p99 := percentile(fo, 50), percentile(fo, 99)
	v.ok = med < maxFailoverMedian && p99 < maxFailoverP99
	v.detail = fmt.Sprintf("%d failovers, median %v, p99 %v", len(fo), med.Round(time.Millisecond), p99.Round(time.Millisecond))
	return v
}

// String formats the report for a terminal.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "=== duckraft chaos: seed %d, schedule %v, ran %v ===\n", r.Seed, r.Duration, r.Elapsed.Round(time.Second))
	fmt.Fprintf(&b, "rerun: make chaos SEED=%d DURATION=%v\n", r.Seed, r.Duration)
	fmt.Fprintf(&b, "workloads started at %s (event times count from there)\n", r.Start.UTC().Format("15:04:05.000Z"))
	if r.LogDir != "" {
		fmt.Fprintf(&b, "node logs: %s\n", r.LogDir)
	}
	fmt.Fprintf(&b, "\nfaults (%d planned, %d run):\n", len(r.Plan), len(r.Events))
	for _, e := range r.Events {
		switch {
		case e.skipped != "":
			fmt.Fprintf(&b, "  %2d  %-17s skipped: %s\n", e.step, e.fault, e.skipped)
		case e.noAck:
			fmt.Fprintf(&b, "  %2d  %-17s %-3s at %7.2fs hold %-6v  no write acknowledged afterwards%s\n",
				e.step, e.fault, e.node, float64(e.at)/1e9, e.hold, suffix(e.detail))
		case e.fault.onLeader():
			fmt.Fprintf(&b, "  %2d  %-17s %-3s at %7.2fs hold %-6v  first acknowledged write after %v%s\n",
				e.step, e.fault, e.node, float64(e.at)/1e9, e.hold, e.failover.Round(time.Millisecond), suffix(e.detail))
		default:
			fmt.Fprintf(&b, "  %2d  %-17s %-3s at %7.2fs hold %v\n", e.step, e.fault, e.node, float64(e.at)/1e9, e.hold)
		}
	}
	fmt.Fprintf(&b, "\noperations:\n")
	for _, k := range sortedKeys(r.ops) {
		fmt.Fprintf(&b, "  %-36s %7d\n", k, r.ops[k])
	}
	fmt.Fprintf(&b, "\nerrors by kind (expected during faults; only acknowledged results are checked):\n")
	for _, k := range sortedKeys(r.errs) {
		fmt.Fprintf(&b, "  %-20s %6d  e.g. %s\n", k, r.errs[k], r.examples[k])
	}
	fo := r.Failovers()
	fmt.Fprintf(&b, "\nfailover (leader killed, cut off or blackholed → first acknowledged write): %d measured, median %v, p99 %v, max %v\n",
		len(fo), percentile(fo, 50).Round(time.Millisecond), percentile(fo, 99).Round(time.Millisecond),
		percentile(fo, 100).Round(time.Millisecond))
	st := r.Stalls()
	fmt.Fprintf(&b, "leader paused → first acknowledged write: %d measured, median %v, max %v (not a failover target; see docs/reliability.md)\n",
		len(st), percentile(st, 50).Round(time.Millisecond), percentile(st, 100).Round(time.Millisecond))
	ho := r.Handovers()
	fmt.Fprintf(&b, "leader transferred or stopped (planned handover) → first acknowledged write: %d measured, median %v, max %v\n",
		len(ho), percentile(ho, 50).Round(time.Millisecond), percentile(ho, 100).Round(time.Millisecond))
	fmt.Fprintf(&b, "max replication lag: %d entries on a node not under a fault (%s), %d on any node (incl. catching up)\n",
		r.lag.healthy, r.lag.node, r.lag.any)
	fmt.Fprintf(&b, "raft links: %d proxied, %d refused and %d cut by partitions, %d stalled by blackholes\n",
		r.links.Proxied, r.links.Refused, r.links.Cut, r.links.Stalled)
	fmt.Fprintf(&b, "\nverdicts:\n")
	for _, v := range r.Verdicts {
		mark := "PASS"
		if !v.ok {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "  %s  %-40s %s\n", mark, v.name, v.detail)
	}
	lost, dup := r.LostAndDuplicated()
	result := "PASS"
	if r.Failed() {
		result = "FAIL"
	}
	fmt.Fprintf(&b, "\n%s seed %d: %d lost, %d duplicated acknowledged writes\n", result, r.Seed, lost, dup)
	return b.String()
}

func suffix(detail string) string {
	if detail == "" {
		return ""
	}
	return " (" + detail + ")"
}
