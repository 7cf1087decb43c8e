package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// workerFile is one worker's results file as dqlite-benchmark 1.11 writes
// it: three writes, two busy answers, one cut short by the run's end and
// one other failure.
const workerFile = `n 3
n_err 4
avg [ms] 2.000000
max [ms] 3.000000
min [ms] 1.000000
measurements [timestamp in ns] [ms]
1796408658594570887 1.000000
1796408658594570888 2.000000
1796408658594570889 3.000000

errors
1796408658594570890 database is locked
1796408658594570891 database is locked
1796408658594570892 context deadline exceeded
1796408658594570893 disk I/O error

`

func TestReadDqliteResults(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"0-exec-1796408661", "1-exec-1796408661"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(workerFile), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := readDqliteResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := r.point(2, 2)
	want := writePoint{System: "dqlite", Clients: 2, Writes: 6, TxPerSec: 3, P50Ms: 2, P99Ms: 3, Busy: 4, Errors: 2}
	if p != want {
		t.Errorf("point %+v, want %+v", p, want)
	}
	if r.lastErr != "disk I/O error" {
		t.Errorf("last error %q", r.lastErr)
	}
	for name, body := range map[string]string{
		"not a result":   "hello\n",
		"bad latency":    "measurements [timestamp in ns] [ms]\n1 x\n",
		"bad error line": "errors\nlocked\n",
	} {
		var r dqliteResults
		if err := r.parse(strings.NewReader(body)); err == nil {
			t.Errorf("%s: parsed %+v", name, r)
		}
	}
	if _, err := readDqliteResults(t.TempDir()); err == nil {
		t.Error("an empty results directory read without an error")
	}
}

// TestBenchWritesDqlite starts the dqlite peer with the script make bench
// uses (installing Debian's go-dqlite when it can) and measures two short
// points of it through bench writes.
func TestBenchWritesDqlite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node dqlite cluster")
	}
	script, err := filepath.Abs("../../scripts/bench-dqlite.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "dqlite")
	out, err := exec.Command(script, "start", dir).Output()
	if err != nil {
		if _, lookErr := exec.LookPath("dqlite-benchmark"); lookErr != nil {
			t.Skipf("SKIPPED, dqlite is not installed and %s could not install it: %v", script, err)
		}
		var stderr []byte
		if exitErr := (*exec.ExitError)(nil); errors.As(err, &exitErr) {
			stderr = exitErr.Stderr
		}
		t.Fatalf("%s start: %v: %s", script, err, stderr)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(script, "stop", dir).CombinedOutput(); err != nil {
			t.Errorf("%s stop: %v: %s", script, err, out)
		}
	})
	if got := strings.TrimSpace(string(out)); got != dir {
		t.Fatalf("start printed %q, want %q", got, dir)
	}
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run([]string{"writes", "--systems", "dqlite", "--dqlite", dir, "--clients", "1,4", "--duration", "1s", "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d after %v, stdout %s, stderr %s", code, time.Since(start), stdout.String(), stderr.String())
	}
	var r benchReport
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("output %q: %v", stdout.String(), err)
	}
	if len(r.Writes) != 2 || !strings.Contains(r.Machine.Dqlite, "libdqlite0") {
		t.Fatalf("report %+v", r)
	}
	for _, p := range r.Writes {
		if p.System != "dqlite" || p.Writes == 0 || p.TxPerSec <= 0 || p.P50Ms <= 0 || p.P99Ms < p.P50Ms || p.Errors != 0 {
			t.Errorf("point %+v", p)
		}
	}
	if r.Writes[0].Busy != 0 {
		t.Errorf("one client met a busy database: %+v", r.Writes[0])
	}
}

func TestWritesDqliteFlags(t *testing.T) {
	for _, args := range [][]string{
		{"writes", "--systems", "dqlite"},
		{"writes", "--systems", "dqlite", "--dqlite", t.TempDir()},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "dqlite") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}
