package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// processCPU is the user plus system CPU time that the process pid (a
// duckraftd the benchmark started) has used so far, all its threads
// together: what DuckDB, Raft and the Quack server cost on that node.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("CPU time of process %d: %w", pid, err)
	}
	d, err := parseStatCPU(string(b))
	if err != nil {
		return 0, fmt.Errorf("CPU time of process %d: %w", pid, err)
	}
	return d, nil
}

// parseStatCPU reads utime plus stime out of a /proc/<pid>/stat line.
func parseStatCPU(stat string) (time.Duration, error) {
	// The fields after the command name, which may hold spaces and
	// parentheses, so it ends at the last ')': state is field 3, utime 14
	// and stime 15.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("/proc stat line without a command name")
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat line with %d fields after the command name, want 13 or more", len(f))
	}
	var ticks uint64
	for _, s := range f[11:13] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat line: CPU time %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
