package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

func TestParseStatCPU(t *testing.T) {
	// The fields after the command name: state, ppid, pgrp, session,
	// tty_nr, tpgid, flags, minflt, cminflt, majflt, cmajflt, utime, stime.
	const tail = " S 1 10 10 0 -1 4194560 900 0 3 0 250 75 0 0 20 0 9 0"
	cases := []struct {
		name    string
		stat    string
		want    time.Duration
		wantErr string
	}{
		{"plain", "4242 (duckraftd)" + tail, 3250 * time.Millisecond, ""},
		{"a command name with spaces and parentheses", "4242 (duck (raft) d)" + tail, 3250 * time.Millisecond, ""},
		{"no command name", "4242 duckraftd" + tail, 0, "without a command name"},
		{"cut short", "4242 (duckraftd) S 1 10 10 0 -1 4194560 900 0 3 0 250", 0, "12 fields"},
		{"not a number", "4242 (duckraftd) S 1 10 10 0 -1 4194560 900 0 3 0 x 75", 0, `CPU time "x"`},
		{"negative", "4242 (duckraftd) S 1 10 10 0 -1 4194560 900 0 3 0 250 -75", 0, `CPU time "-75"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatCPU(tc.stat)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseStatCPU = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestProcessCPU reads this process's CPU time, which grows while it
// spins, and refuses a process that does not exist.
func TestProcessCPU(t *testing.T) {
	before, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel has counted at least two ticks more (20 ms of
	// CPU); a loaded machine only makes that take longer.
	deadline := time.Now().Add(30 * time.Second)
	after := before
	for after < before+2*time.Second/clockTicks && time.Now().Before(deadline) {
		spin := time.Now()
		for time.Since(spin) < 10*time.Millisecond {
		}
		if after, err = processCPU(os.Getpid()); err != nil {
			t.Fatal(err)
		}
	}
	if after < before+2*time.Second/clockTicks {
		t.Fatalf("CPU time went from %v to %v while spinning", before, after)
	}
	if _, err := processCPU(1 << 30); err == nil || !strings.Contains(err.Error(), "process 1073741824") {
		t.Fatalf("a process that does not exist: %v", err)
	}
}

// TestBenchWritesLocal runs bench writes on a 1-node cluster it starts from
// the duckraftd under test: the point reports the leader's CPU per write,
// and the Markdown table shows it.
func TestBenchWritesLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a duckraftd process")
	}
	daemon := testcluster.Binary(t)
	args := []string{"writes", "--duckraftd", daemon, "--systems", "duckraft-1", "--clients", "2", "--duration", "1s"}
	var stdout, stderr bytes.Buffer
	if code := run(append(args, "--json"), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	var r benchReport
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("output %q: %v", stdout.String(), err)
	}
	if len(r.Writes) != 1 {
		t.Fatalf("%d points, want 1: %+v", len(r.Writes), r.Writes)
	}
	// A write costs the leader at least its parse, Raft append, fsync and
	// apply; a second would mean the figure is not divided by the writes.
	if p := r.Writes[0]; p.System != "duckraft-1" || p.Writes == 0 || p.LeaderCPUMs <= 0 || p.LeaderCPUMs > 1000 {
		t.Fatalf("point %+v: want writes and a leader CPU per write", p)
	}
	md := (&benchReport{Bench: "writes", Writes: r.Writes}).markdown(3)
	if !strings.Contains(md, "| leader CPU ms per write |") || !strings.Contains(md, fmt.Sprintf("%.2f", r.Writes[0].LeaderCPUMs)+" |\n") {
		t.Fatalf("Markdown without the leader's CPU per write:\n%s", md)
	}
}
