package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPinThreads pins a real child process and this one the way a pinned
// bench writes does, and reads the result back from the kernel.
func TestPinThreads(t *testing.T) {
	p, err := newCPUPinning()
	if errors.Is(err, errFewCPUs) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	leader, follower := startSleeper(t), startSleeper(t)
	restore, err := p.pin(leader, []int{follower})
	if err != nil {
		t.Fatal(err)
	}
	wantAffinity(t, leader, &p.leader)
	wantAffinity(t, follower, &p.rest)
	wantAffinity(t, os.Getpid(), &p.rest)
	if p.leader.Count() != 1 || p.rest.Count() != p.all.Count()-1 {
		t.Fatalf("leader has %d CPUs and the rest %d, of %d", p.leader.Count(), p.rest.Count(), p.all.Count())
	}
	restore()
	wantAffinity(t, os.Getpid(), &p.all)
	wantAffinity(t, leader, &p.leader)
}

// startSleeper starts a process that lives until the test ends.
func startSleeper(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// wantAffinity checks every thread of pid may run on exactly want.
func wantAffinity(t *testing.T, pid int, want *unix.CPUSet) {
	t.Helper()
	tids, err := threadsOf(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		var got unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &got); err != nil {
			if errors.Is(err, unix.ESRCH) {
				continue
			}
			t.Fatal(err)
		}
		if got != *want {
			t.Errorf("thread %d of process %d: CPUs %s, want %s", tid, pid, cpuList(&got), cpuList(want))
		}
	}
}

func cpuList(s *unix.CPUSet) string { return strings.Trim(fmt.Sprint(cpusOf(s)), "[]") }
