package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinnedSuffix marks a local cluster of bench writes whose leader runs
// alone on one CPU (duckraft-3-pinned): on one machine the followers apply
// every entry on the same cores as the leader, which separate hosts would
// not, and a pinned run shows what the leader gives without them. It is
// reported under its own name, never as the cluster's figure.
const pinnedSuffix = "-pinned"

// pinnedWorkload says, in the report, what a pinned cluster is.
const pinnedWorkload = "duckraft-N-pinned is the same cluster with the leader's duckraftd alone on one CPU and the followers and the " +
	"benchmark's clients on the other, pinned with sched_setaffinity before each client count: on one machine the followers apply " +
	"every entry on the leader's cores, which separate hosts would not, and this shows what the leader gives without them. It is " +
	"not the cluster as deployed here: the goals are judged on duckraft-N."

// cpuPinning splits the CPUs this process may use: the first for a
// cluster's leader, the rest for its followers and the benchmark's own
// clients.
type cpuPinning struct {
	all, leader, rest unix.CPUSet
}

// errFewCPUs is returned when there is no CPU left beside the leader's.
var errFewCPUs = errors.New("pinning the leader needs 2 CPUs or more")

func newCPUPinning() (*cpuPinning, error) {
	var p cpuPinning
	if err := unix.SchedGetaffinity(0, &p.all); err != nil {
		return nil, fmt.Errorf("CPU affinity of the benchmark: %w", err)
	}
	if p.all.Count() < 2 {
		return nil, fmt.Errorf("%w: this process may use %d", errFewCPUs, p.all.Count())
	}
	cpus := cpusOf(&p.all)
	p.leader.Set(cpus[0])
	for _, cpu := range cpus[1:] {
		p.rest.Set(cpu)
	}
	return &p, nil
}

// cpusOf lists the CPUs of set, in order.
func cpusOf(set *unix.CPUSet) []int {
	var cpus []int
	for cpu := range len(set) * 64 {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus
}

// pin puts every thread of process leader on the leader's CPU, every
// thread of the others and of this process on the rest; restore gives
// this process all its CPUs again (the cluster's processes keep theirs
// until the next pin). A thread started later inherits its creator's
// CPUs, so DuckDB's and Go's new threads stay where their process is.
func (p *cpuPinning) pin(leader int, others []int) (restore func(), err error) {
	if err := pinThreads(leader, &p.leader); err != nil {
		return nil, err
	}
	for _, pid := range others {
		if err := pinThreads(pid, &p.rest); err != nil {
			return nil, err
		}
	}
	self := os.Getpid()
	if err := pinThreads(self, &p.rest); err != nil {
		return nil, err
	}
	return func() { pinThreads(self, &p.all) }, nil
}

// pinThreads sets the CPU affinity of every thread of process pid.
func pinThreads(pid int, set *unix.CPUSet) error {
	tids, err := threadsOf(pid)
	if err != nil {
		return err
	}
	for _, tid := range tids {
		// A thread that ended since the listing is no error.
		if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("CPU affinity of thread %d of process %d: %w", tid, pid, err)
		}
	}
	return nil
}

// threadsOf lists the thread IDs of process pid.
func threadsOf(pid int) ([]int, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, fmt.Errorf("threads of process %d: %w", pid, err)
	}
	tids := make([]int, 0, len(tasks))
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
