//go:build unix

package freeport

import (
	"os"
	"syscall"
)

// sharedTempDir is the one temporary directory every process on the
// machine sees, whatever its $TMPDIR.
const sharedTempDir = "/tmp"

// tryLock takes an exclusive lock on f without waiting.
func tryLock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
