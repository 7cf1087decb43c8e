package engine

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssBytes is the process's resident set size, from /proc/self/statm.
func rssBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm")
	}
	fields := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(fields[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
