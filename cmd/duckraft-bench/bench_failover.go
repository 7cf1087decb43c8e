package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/duckraft/duckraft/cmd/internal/clusterctl"
	"github.com/duckraft/duckraft/node/client"
)

// failoverResult is bench failover's answer: when the leader went, the
// longest stretch without an acknowledged write from then on, and the
// acknowledged writes over time.
type failoverResult struct {
	Mode      string `json:"mode"`
	System    string `json:"system"`
	Clients   int    `json:"clients"`
	OldLeader string `json:"old_leader"`
	NewLeader string `json:"new_leader"`
	// EventSec is when the leader was killed, stopped or asked to hand
	// over, in seconds from the start of the load.
	EventSec float64 `json:"event_sec"`
	// LastAckSec and FirstAckSec bound the unavailability: the last write
	// acknowledged before the gap and the first after it.
	LastAckSec    float64          `json:"last_ack_before_sec"`
	FirstAckSec   float64          `json:"first_ack_after_sec"`
	UnavailableMs float64          `json:"unavailable_ms"`
	Writes        int              `json:"writes"`
	Errors        int              `json:"errors"`
	BucketMs      int              `json:"bucket_ms"`
	Timeline      []timelineBucket `json:"timeline"`
}

// timelineBucket counts what happened in one bucket of the run.
type timelineBucket struct {
	StartSec float64 `json:"start_sec"`
	Acks     int     `json:"acks"`
	Errors   int     `json:"errors"`
}

// Failover modes.
const (
	failoverKill     = "kill"     // SIGKILL the leader's process
	failoverStop     = "stop"     // SIGSTOP it: alive to TCP, silent to Raft
	failoverTransfer = "transfer" // ask it to hand leadership over
)

func benchFailover(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("duckraft-bench failover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bf benchFlags
	bf.register(fs, "duckraft-3")
	mode := fs.String("mode", "", "how the leader goes: kill, stop (local clusters) or transfer (default: kill locally, transfer with --server)")
	clients := fs.Int("clients", 8, "writing clients, spread over the nodes")
	dur := fs.Duration("duration", 15*time.Second, "length of the write load")
	at := fs.Duration("at", 5*time.Second, "when the leader goes, from the start of the load")
	bucket := fs.Duration("bucket", 100*time.Millisecond, "timeline resolution")
	timeout := fs.Duration("write-timeout", 5*time.Second, "a write unanswered this long counts as failed and its client moves to the next node; with --via, any statement")
	via := fs.String("via", "", "connect the clients through one endpoint: lb or nginx (round robin, deploy/nginx-one-endpoint.conf), haproxy (the affinity cookie, deploy/haproxy.cfg), in front of a local duckraft-3; then --clients sessions, half Q1 and half Q3, run reads and single writes while the node holding most sessions and the leader are killed (--kills of each, each restarted); --duration and --at are not used. Run it in duckraft's repository, which holds deploy/")
	kills := fs.Int("kills", 2, "with --via: kills of each kind, the holder of most sessions and the leader, in turn")
	down := fs.Duration("down", 5*time.Second, "with --via: how long a killed node stays down before it is restarted")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *via != "" {
		if *mode != "" && *mode != failoverKill {
			return fmt.Errorf("--via kills nodes: --mode %s is not possible with it", *mode)
		}
		return benchFailoverVia(bf, *via, *clients, *kills, *down, *timeout, stdout, stderr)
	}
	if *clients < 1 || *dur <= 0 || *at <= 0 || *at >= *dur || *bucket < time.Millisecond || *timeout <= 0 {
		return errors.New("want --clients ≥ 1, 0 < --at < --duration, --bucket ≥ 1ms, --write-timeout > 0")
	}
	ctx := context.Background()
	var d *deployment
	if servers := bf.servers.List(); len(servers) > 0 {
		if *mode == "" {
			*mode = failoverTransfer
		}
		if *mode != failoverTransfer {
			return fmt.Errorf("--mode %s needs a local cluster: against --server only transfer is possible", *mode)
		}
		var err error
		if d, err = remoteDeployment(servers, bf.token); err != nil {
			return err
		}
	} else {
		if *mode == "" {
			*mode = failoverKill
		}
		var stop func()
		var err error
		if d, stop, err = localCluster(bf, "failover", 3, stderr); err != nil {
			return err
		}
		defer stop()
	}
	switch *mode {
	case failoverKill, failoverStop, failoverTransfer:
	default:
		return fmt.Errorf("--mode %q: kill, stop or transfer", *mode)
	}
	if err := d.exec(ctx, benchTableSQL); err != nil {
		return fmt.Errorf("create bench table: %w", err)
	}
	members, leader, err := d.members()
	if err != nil {
		return err
	}
	if leader == "" {
		return errors.New("the deployment knows no leader")
	}
	// Clients go to every data node, so that some lose their node with
	// the leader and reconnect elsewhere, as a deployment's would.
	if d.nodes == nil {
		var spread []string
		for _, m := range members {
			spread = append(spread, "quack:"+m.QuackAddr)
		}
		d.servers = append(spread, d.servers...)
	}
	res := &failoverResult{Mode: *mode, System: d.name, Clients: *clients, OldLeader: leader, BucketMs: int(bucket.Milliseconds())}
	rep := &benchReport{Bench: "failover", Machine: describeMachine(ctx, ""), DurationSec: dur.Seconds(), Failover: res}
	prog := newBenchProgress(stderr, *dur)
	defer prog.finish()
	prog.begin(fmt.Sprintf("failover: %s, %d clients, leader %s goes (%s) at %s", d.name, *clients, leader, *mode, *at), *dur)
	start := time.Now()
	acks, errs := failoverLoad(ctx, d, *clients, start, *dur, *timeout, func() error {
		time.Sleep(time.Until(start.Add(*at)))
		res.EventSec = time.Since(start).Seconds()
		return dropLeader(d, leader, *mode)
	})
	prog.end()
	prog.finish()
	if acks.err != nil {
		return acks.err
	}
	res.Writes, res.Errors = len(acks.times), len(errs)
	res.Timeline = timeline(acks.times, errs, *bucket, *dur)
	res.LastAckSec, res.FirstAckSec = longestGapAfter(acks.times, res.EventSec)
	if res.FirstAckSec == 0 {
		return fmt.Errorf("no write was acknowledged after the leader went at %.1fs (%d errors)", res.EventSec, len(errs))
	}
	res.UnavailableMs = (res.FirstAckSec - res.LastAckSec) * 1000
	res.NewLeader = newLeader(d, leader)
	return rep.print(stdout, bf.json)
}

// dropLeader makes the leader go as mode says.
func dropLeader(d *deployment, leader, mode string) error {
	if mode == failoverTransfer {
		_, err := clusterctl.TransferLeader(d.api(), apiAddr(d.servers[0]), "")
		return err
	}
	for _, n := range d.nodes {
		if n.id == leader {
			sig := syscall.SIGKILL
			if mode == failoverStop {
				sig = syscall.SIGSTOP
			}
			return n.cmd.Process.Signal(sig)
		}
	}
	return fmt.Errorf("leader %s is not one of the local nodes", leader)
}

// newLeader asks the nodes still answering who leads now.
func newLeader(d *deployment, old string) string {
	var found string
	pollUntil(30*time.Second, 200*time.Millisecond, func() bool {
		for _, s := range d.servers {
			st, err := d.status(apiAddr(s))
			if err == nil && st.LeaderID != "" && st.LeaderID != old {
				found = st.LeaderID
				return true
			}
		}
		return false
	})
	return found
}

type ackTimes struct {
	times []float64 // seconds from the start, sorted
	err   error
}

// failoverLoad runs clients writers for d from start, each moving to the
// next server after an error or a write unanswered within timeout, while
// event runs once. It returns the acknowledgement times and error times.
func failoverLoad(ctx context.Context, d *deployment, clients int, start time.Time, dur, timeout time.Duration, event func() error) (ackTimes, []float64) {
	stop := start.Add(dur)
	var mu sync.Mutex
	var acks, errs []float64
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			var mine, bad []float64
			var c *client.Conn
			defer func() {
				if c != nil {
					c.Close()
				}
			}()
			for seq, next := 0, i; time.Now().Before(stop); seq++ {
				if c == nil {
					cctx, cancel := context.WithTimeout(ctx, timeout)
					conn, err := d.connect(cctx, next)
					cancel()
					if err != nil {
						bad = append(bad, time.Since(start).Seconds())
						next++
						time.Sleep(20 * time.Millisecond)
						continue
					}
					c = conn
				}
				wctx, cancel := context.WithTimeout(ctx, timeout)
				_, err := c.Exec(wctx, insertRow(i, seq))
				cancel()
				t := time.Since(start).Seconds()
				if err != nil {
					bad = append(bad, t)
					c.Close()
					c, next = nil, next+1
					time.Sleep(20 * time.Millisecond)
					continue
				}
				mine = append(mine, t)
			}
			mu.Lock()
			acks, errs = append(acks, mine...), append(errs, bad...)
			mu.Unlock()
		})
	}
	var eventErr error
	wg.Go(func() { eventErr = event() })
	wg.Wait()
	slices.Sort(acks)
	slices.Sort(errs)
	if eventErr != nil {
		eventErr = fmt.Errorf("the leader did not go: %w", eventErr)
	}
	return ackTimes{times: acks, err: eventErr}, errs
}

// longestGapAfter finds the longest gap between consecutive acknowledged
// writes among those that end after event: the write unavailability the
// leader's going caused. It returns the acknowledgements bounding it, or
// zeros when none came after event.
func longestGapAfter(acks []float64, event float64) (last, first float64) {
	i, _ := slices.BinarySearch(acks, event)
	if i >= len(acks) {
		return 0, 0
	}
	if i == 0 {
		last, first = event, acks[0]
	} else {
		last, first = acks[i-1], acks[i]
	}
	for j := i + 1; j < len(acks); j++ {
		if acks[j]-acks[j-1] > first-last {
			last, first = acks[j-1], acks[j]
		}
	}
	return last, first
}

// timeline counts acknowledgements and errors per bucket.
func timeline(acks, errs []float64, bucket, dur time.Duration) []timelineBucket {
	n := int(dur/bucket) + 1
	out := make([]timelineBucket, n)
	for i := range out {
		out[i].StartSec = (time.Duration(i) * bucket).Seconds()
	}
	idx := func(t float64) int { return min(n-1, max(0, int(t/bucket.Seconds()))) }
	for _, t := range acks {
		out[idx(t)].Acks++
	}
	for _, t := range errs {
		out[idx(t)].Errors++
	}
	return out
}

func failoverTable(b *strings.Builder, r *failoverResult) {
	fmt.Fprintln(b, "| system | clients | leader went (s) | last ack before (s) | first ack after (s) | unavailable ms | old → new leader | writes | errors |")
	fmt.Fprintln(b, "|---|---|---|---|---|---|---|---|---|")
	fmt.Fprintf(b, "| %s | %d | %.2f | %.2f | %.2f | **%.0f** | %s → %s | %d | %d |\n", r.System, r.Clients, r.EventSec,
		r.LastAckSec, r.FirstAckSec, r.UnavailableMs, r.OldLeader, r.NewLeader, r.Writes, r.Errors)
}
