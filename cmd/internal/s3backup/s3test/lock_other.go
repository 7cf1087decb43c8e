//go:build !unix

package s3test

import "testing"

// lockInstall does not lock where flock is missing: make test's background
// install (a shell script) runs on Unix only.
func lockInstall(t testing.TB, path string) (unlock func(), err error) {
	return func() {}, nil
}
