//go:build unix

package node

import "syscall"

// fileLimit returns the process's limit of open file descriptors (Go raises
// the soft limit to the hard one at start); an unlimited one is reported
// as not known.
func fileLimit() (int64, bool) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur > 1<<40 {
		return 0, false
	}
	return int64(l.Cur), true
}
