//go:build unix

package s3test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSkipsAfterPassesWhenMissing starts this test binary again where the
// gateway is missing (an empty GOBIN, a PATH without it) and the
// background install holds its lock, with AfterPassesEnv set as make test
// sets it on a fresh machine. Before, Start waited for the install (18
// minutes beside other work with an empty build cache), holding the system
// pass past its 15-minute timeout; now it skips at once, and make test
// runs the package again after its passes.
func TestSkipsAfterPassesWhenMissing(t *testing.T) {
	if os.Getenv("S3TEST_CHILD") != "" {
		Start(t)
		t.Fatal("Start returned without a gateway")
	}
	gobin := t.TempDir()
	f, err := os.OpenFile(filepath.Join(gobin, ".versitygw.lock"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestSkipsAfterPassesWhenMissing$", "-test.v")
	cmd.Env = append(os.Environ(), "S3TEST_CHILD=1", "GOBIN="+gobin, "PATH="+filepath.Dir(gocmd), AfterPassesEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- SKIP") || !strings.Contains(string(out), "runs the S3 tests again after its passes") {
		t.Fatalf("the child did not skip at once:\n%s", out)
	}
}
