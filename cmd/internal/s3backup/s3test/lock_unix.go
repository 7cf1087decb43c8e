//go:build unix

package s3test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// lockInstall takes the install lock at path, waiting up to installTimeout
// for an install that holds it, and tells the test log why it waits.
func lockInstall(t testing.TB, path string) (unlock func(), err error) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(installTimeout)
	logged := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !logged {
			t.Logf("waiting for the versitygw install that holds %s (make test starts it in the background)", path)
			logged = true
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("the install holding %s did not end within %v", path, installTimeout)
		}
		time.Sleep(time.Second)
	}
}
