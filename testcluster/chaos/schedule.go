package chaos

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// fault is a kind of disruption the schedule injects.
type fault string

// The faults. Those on the leader force a new election (except a short
// flap, which may end before one); those on a follower must not disturb
// writes at all.
const (
	killLeader      fault = "kill leader"      // SIGKILL, restart after hold
	stopLeader      fault = "stop leader"      // SIGTERM, restart after hold
	pauseLeader     fault = "pause leader"     // SIGSTOP, SIGCONT after hold: wakes as a deposed leader
	isolateLeader   fault = "isolate leader"   // cut its Raft links, heal after hold
	flapLeader      fault = "flap leader"      // isolate for about an election timeout
	transferLeader  fault = "transfer leader"  // hand leadership to a follower, as an operator would
	silenceLeader   fault = "blackhole leader" // its Raft links carry nothing, without errors; heal after hold
	killFollower    fault = "kill follower"    // SIGKILL, restart after hold
	pauseFollower   fault = "pause follower"   // SIGSTOP, SIGCONT after hold
	isolateFollower fault = "isolate follower" // cut its Raft links, heal after hold
	silenceFollower fault = "blackhole follower"
	// The clients' faults (hostile.go): none may stop writes or make
	// replicas differ.
	pressureLeader   fault = "memory-hungry reads on leader"   // reads that take most of the memory, for the hold
	pressureFollower fault = "memory-hungry reads on follower" // the same on a follower
	impossibleWrite  fault = "impossible write"                // a write needing more memory than a node has, through a follower
	hostileLeader    fault = "hostile client on leader"        // idle connections, large unauthenticated bodies, wrong tokens
)

var faults = []fault{killLeader, stopLeader, pauseLeader, isolateLeader, flapLeader, killFollower, pauseFollower, isolateFollower,
	transferLeader, silenceLeader, silenceFollower, pressureLeader, pressureFollower, impossibleWrite, hostileLeader}

// onLeader reports whether f targets the leader: the report measures how
// long writes stall after it.
func (f fault) onLeader() bool {
	switch f {
	case killLeader, stopLeader, pauseLeader, isolateLeader, flapLeader, transferLeader, silenceLeader, pressureLeader, hostileLeader:
		return true
	}
	return false
}

// failover reports whether f takes the leader away for good, so that only
// a new leader can take writes: the faults the failover targets apply to.
// A paused leader and a flap may come back before writes resume, and a
// stopped leader hands over as a transfer does (a planned handover); they
// are reported apart.
func (f fault) failover() bool {
	switch f {
	case killLeader, isolateLeader, silenceLeader:
		return true
	}
	return false
}

// step is one fault of the schedule: injected, held for Hold, repaired,
// then Calm of quiet before the next.
type step struct {
	Fault fault
	Hold  time.Duration
	Calm  time.Duration
	// Pick chooses the follower for follower faults and the new leader of
	// a transfer (modulo their number).
	Pick int
}

func (s step) String() string {
	return fmt.Sprintf("%s, hold %v, calm %v", s.Fault, s.Hold, s.Calm)
}

// plan derives the schedule from seed: a sequence of faults whose holds
// and calms add up to at most d (at least one step). Only the seed decides
// it; which node is leader when a step runs is up to the cluster.
func plan(seed int64, d time.Duration) []step {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6475636b72616674))
	var steps []step
	var total time.Duration
	for {
		s := step{
			Fault: faults[rng.IntN(len(faults))],
			Hold:  time.Second + dur(rng, 3*time.Second),
			Calm:  time.Second + dur(rng, 2*time.Second),
			Pick:  rng.IntN(1 << 16),
		}
		if s.Fault == flapLeader {
			// Around the 500 ms election timeout: sometimes the leader
			// comes back before anyone campaigns, sometimes not.
			s.Hold = 200*time.Millisecond + dur(rng, 600*time.Millisecond)
		}
		s.Hold = s.Hold.Round(10 * time.Millisecond)
		s.Calm = s.Calm.Round(10 * time.Millisecond)
		if len(steps) > 0 && total+s.Hold+s.Calm > d {
			return steps
		}
		total += s.Hold + s.Calm
		steps = append(steps, s)
	}
}

// dur draws a duration in [0, d).
func dur(rng *rand.Rand, d time.Duration) time.Duration {
	return time.Duration(rng.Int64N(int64(d)))
}
