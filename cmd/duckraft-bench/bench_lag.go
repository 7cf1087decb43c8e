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
	"time"
)

// lagResult is bench lag's answer: each follower's distance behind the
// leader, sampled from every node's /duckraft/v1/status under write load.
type lagResult struct {
	System     string       `json:"system"`
	Clients    int          `json:"clients"`
	TxPerSec   float64      `json:"tx_per_sec"`
	IntervalMs int          `json:"interval_ms"`
	Leader     string       `json:"leader"`
	Followers  []lagSummary `json:"followers"`
	Samples    []lagSample  `json:"samples"`
}

// lagSummary is one follower over the run, in Raft entries.
type lagSummary struct {
	ID   string  `json:"id"`
	Mean float64 `json:"mean_entries"`
	P99  uint64  `json:"p99_entries"`
	Max  uint64  `json:"max_entries"`
}

// lagSample is one poll: the leader's commit index and, per follower, how
// many entries its applied index trails it.
type lagSample struct {
	Sec    float64           `json:"sec"`
	Commit uint64            `json:"commit_index"`
	Lag    map[string]uint64 `json:"lag_entries"`
}

func benchLag(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("duckraft-bench lag", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bf benchFlags
	bf.register(fs, "duckraft-3")
	clients := fs.Int("clients", 16, "writing clients")
	dur := fs.Duration("duration", 10*time.Second, "length of the write load")
	interval := fs.Duration("interval", 100*time.Millisecond, "time between status polls")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *clients < 1 || *dur <= 0 || *interval < 10*time.Millisecond {
		return errors.New("want --clients ≥ 1, --duration > 0, --interval ≥ 10ms")
	}
	ctx := context.Background()
	var d *deployment
	if servers := bf.servers.List(); len(servers) > 0 {
		var err error
		if d, err = remoteDeployment(servers, bf.token); err != nil {
			return err
		}
	} else {
		var stop func()
		var err error
		if d, stop, err = localCluster(bf, "lag", 2, stderr); err != nil {
			return err
		}
		defer stop()
	}
	members, leader, err := d.members()
	if err != nil {
		return err
	}
	var leaderAddr string
	followers := map[string]string{}
	for _, m := range members {
		if m.ID == leader {
			leaderAddr = m.QuackAddr
		} else if m.InRaft {
			followers[m.ID] = m.QuackAddr
		}
	}
	if leaderAddr == "" || len(followers) == 0 {
		return fmt.Errorf("need a leader and a follower; %s knows leader %q and %d followers", d.name, leader, len(followers))
	}
	ws, err := duckraftWriteSystem(ctx, d)
	if err != nil {
		return err
	}
	sessions, closeAll, err := ws.sessions(ctx, *clients)
	if err != nil {
		return err
	}
	defer closeAll()
	res := &lagResult{System: d.name, Clients: *clients, IntervalMs: int(interval.Milliseconds()), Leader: leader}
	rep := &benchReport{Bench: "lag", Machine: describeMachine(ctx, ""), DurationSec: dur.Seconds(), Lag: res}
	prog := newBenchProgress(stderr, *dur)
	defer prog.finish()
	prog.begin(fmt.Sprintf("lag: %s, %d clients, leader %s", d.name, *clients, leader), *dur)
	start := time.Now()
	var wg sync.WaitGroup
	var load roundResult
	wg.Go(func() {
		load = runClients(*clients, *dur, func(i, seq int) error { return sessions[i](insertRow(i, seq)) })
	})
	for t := time.NewTicker(*interval); time.Since(start) < *dur; <-t.C {
		if s, ok := sampleLag(d, leaderAddr, followers); ok {
			s.Sec = time.Since(start).Seconds()
			res.Samples = append(res.Samples, s)
		}
	}
	wg.Wait()
	prog.end()
	prog.finish()
	if load.writes == 0 {
		return fmt.Errorf("no write succeeded under the lag load (%d errors; last: %v)", load.errors, load.lastErr)
	}
	if len(res.Samples) == 0 {
		return errors.New("no status sample answered")
	}
	res.TxPerSec = load.rate
	res.Followers = summarizeLag(res.Samples)
	return rep.print(stdout, bf.json)
}

// sampleLag reads the leader's commit index, then each follower's applied
// index, concurrently: a follower read after the leader may be ahead of
// the commit index read, which counts as no lag.
func sampleLag(d *deployment, leaderAddr string, followers map[string]string) (lagSample, bool) {
	st, err := d.status(leaderAddr)
	if err != nil {
		return lagSample{}, false
	}
	s := lagSample{Commit: st.Commit, Lag: map[string]uint64{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for id, addr := range followers {
		wg.Go(func() {
			fst, err := d.status(addr)
			if err != nil {
				return
			}
			mu.Lock()
			s.Lag[id] = st.Commit - min(st.Commit, fst.Applied)
			mu.Unlock()
		})
	}
	wg.Wait()
	return s, len(s.Lag) > 0
}

func summarizeLag(samples []lagSample) []lagSummary {
	per := map[string][]uint64{}
	for _, s := range samples {
		for id, l := range s.Lag {
			per[id] = append(per[id], l)
		}
	}
	var out []lagSummary
	for id, ls := range per {
		slices.Sort(ls)
		var sum uint64
		for _, l := range ls {
			sum += l
		}
		out = append(out, lagSummary{ID: id, Mean: float64(sum) / float64(len(ls)), P99: ls[min(len(ls)-1, len(ls)*99/100)], Max: ls[len(ls)-1]})
	}
	slices.SortFunc(out, func(a, b lagSummary) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func lagTable(b *strings.Builder, r *lagResult) {
	fmt.Fprintf(b, "%s, leader %s, %.0f tx/s, sampled every %d ms (%d samples). Lag in Raft entries, the leader's commit index less the follower's applied index:\n\n",
		r.System, r.Leader, r.TxPerSec, r.IntervalMs, len(r.Samples))
	fmt.Fprintln(b, "| follower | mean | p99 | max |")
	fmt.Fprintln(b, "|---|---|---|---|")
	for _, f := range r.Followers {
		fmt.Fprintf(b, "| %s | %.1f | %d | %d |\n", f.ID, f.Mean, f.P99, f.Max)
	}
}
