package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// dqlite is the second replicated peer of bench writes: a 3-node dqlite
// cluster from Debian's go-dqlite and libdqlite0, which
// scripts/bench-dqlite.sh starts. go-dqlite's Go client is not on the
// module proxy this project builds from, so the load is Debian's own
// dqlite-benchmark: its kvwrite workload, run by a process that is the
// cluster's third voter (the two others run for the whole benchmark) and
// whose workers reach the leader over loopback, as bench writes' clients
// reach duckraft's leader or PostgreSQL's primary.
//
// kvwrite is one `INSERT OR REPLACE INTO model(key, value) VALUES(?, ?)`
// per autocommitted transaction, a fresh random key each time, into a
// table with a UNIQUE index on key: one row per transaction as in
// duckraft's bench, with a bound statement where duckraft gets a new
// literal text each time, and an index to keep. dqlite runs one write
// transaction at a time per database and answers a concurrent one
// "database is locked" at once, without waiting; the workers do not retry,
// so at more than one client those answers are counted apart (busy), as
// neither a write nor a failure of the cluster.

// dqliteKeySize and dqliteValueSize make kvwrite's row about the size of
// bench writes' (an INTEGER, a BIGINT and a ~20-byte VARCHAR), instead of
// dqlite-benchmark's default 32-byte keys and 1 KiB values.
const dqliteKeySize, dqliteValueSize = 16, 16

// dqlitePeer is a cluster scripts/bench-dqlite.sh started under dir:
// dir/cluster names the three voters' addresses, the last of them the
// driver's, whose data lives in dir/driver.
type dqlitePeer struct {
	dir   string
	addrs []string
	bin   string
}

// openDqlitePeer reads the cluster scripts/bench-dqlite.sh started under
// dir.
func openDqlitePeer(dir string) (*dqlitePeer, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cluster"))
	if err != nil {
		return nil, fmt.Errorf("--dqlite %s: %w (scripts/bench-dqlite.sh start DIR starts a cluster)", dir, err)
	}
	addrs := strings.Split(strings.TrimSpace(string(b)), ",")
	if len(addrs) != 3 || slices.Contains(addrs, "") {
		return nil, fmt.Errorf("--dqlite %s: cluster file %q: want three comma-separated addresses", dir, b)
	}
	bin, err := exec.LookPath("dqlite-benchmark")
	if err != nil {
		return nil, fmt.Errorf("--dqlite: %w (Debian's go-dqlite has it; scripts/bench-dqlite.sh installs it)", err)
	}
	return &dqlitePeer{dir: dir, addrs: addrs, bin: bin}, nil
}

func (p *dqlitePeer) driverAddr() string { return p.addrs[len(p.addrs)-1] }

// resultsDir is where dqlite-benchmark leaves its workers' files: under
// its --dir, a directory named after its address.
func (p *dqlitePeer) resultsDir() string {
	return filepath.Join(p.dir, "driver", p.driverAddr(), "results")
}

// openDqliteWrites gives bench writes the peer under dir: each point is
// one run of the driver.
func openDqliteWrites(dir string) (*writeSystem, error) {
	p, err := openDqlitePeer(dir)
	if err != nil {
		return nil, err
	}
	return &writeSystem{name: "dqlite", point: p.point, close: func() {}}, nil
}

// point runs kvwrite with n workers for d, rounded up to whole seconds
// (dqlite-benchmark's unit).
func (p *dqlitePeer) point(ctx context.Context, n int, d time.Duration) (writePoint, error) {
	secs := max(1, int(math.Ceil(d.Seconds())))
	if err := os.RemoveAll(p.resultsDir()); err != nil {
		return writePoint{}, fmt.Errorf("dqlite: clear old results: %w", err)
	}
	// Joining and waiting for the other two voters come before the
	// measured time; a minute is ample for both.
	const clusterWait = 60
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs+2*clusterWait)*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, "--db", p.driverAddr(), "--join", p.addrs[0],
		"--dir", filepath.Join(p.dir, "driver"), "--driver", "--cluster", strings.Join(p.addrs, ","),
		"--cluster-timeout", strconv.Itoa(clusterWait), "--workload", "kvwrite",
		"--workers", strconv.Itoa(n), "--duration", strconv.Itoa(secs),
		"--key-size", strconv.Itoa(dqliteKeySize), "--value-size", strconv.Itoa(dqliteValueSize))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return writePoint{}, fmt.Errorf("dqlite-benchmark: %w: %s", err, strings.TrimSpace(out.String()))
	}
	r, err := readDqliteResults(p.resultsDir())
	if err != nil {
		return writePoint{}, err
	}
	pt := r.point(n, float64(secs))
	if pt.Writes == 0 {
		return pt, fmt.Errorf("no write succeeded (%d busy, %d errors; last: %s)", pt.Busy, pt.Errors, r.lastErr)
	}
	return pt, nil
}

// dqliteResults are the latencies and errors of one dqlite-benchmark run,
// all workers together.
type dqliteResults struct {
	lat          []time.Duration
	busy, errors int
	lastErr      string
}

func (r *dqliteResults) point(clients int, secs float64) writePoint {
	pt := writePoint{System: "dqlite", Clients: clients, Writes: len(r.lat), Busy: r.busy, Errors: r.errors}
	if len(r.lat) == 0 {
		return pt
	}
	lat := slices.Clone(r.lat)
	slices.Sort(lat)
	pt.TxPerSec = float64(len(lat)) / secs
	pt.P50Ms, pt.P99Ms = ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100])
	return pt
}

// readDqliteResults reads every file of dqlite-benchmark's results
// directory.
func readDqliteResults(dir string) (*dqliteResults, error) {
	files, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("dqlite results: %w", err)
	}
	r := &dqliteResults{}
	for _, f := range files {
		if f.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			return nil, fmt.Errorf("dqlite results: %w", err)
		}
		if err := r.parse(bytes.NewReader(b)); err != nil {
			return nil, fmt.Errorf("dqlite results %s: %w", f.Name(), err)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("dqlite results: %s is empty", dir)
	}
	return r, nil
}

// parse reads one worker's file: a header of counts and averages, then
// "measurements [timestamp in ns] [ms]" with one "START_NS MS" line per
// successful write, then "errors" with one "START_NS MESSAGE" line per
// failed one.
func (r *dqliteResults) parse(in io.Reader) error {
	sc := bufio.NewScanner(in)
	section := ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "measurements"):
			section = "measurements"
			continue
		case line == "errors":
			section = "errors"
			continue
		}
		switch section {
		case "measurements":
			f := strings.Fields(line)
			if len(f) != 2 {
				return fmt.Errorf("measurement line %q", line)
			}
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil || v < 0 {
				return fmt.Errorf("measurement line %q: bad milliseconds", line)
			}
			r.lat = append(r.lat, time.Duration(v*float64(time.Millisecond)))
		case "errors":
			_, msg, ok := strings.Cut(line, " ")
			if !ok {
				return fmt.Errorf("error line %q", line)
			}
			switch {
			case strings.Contains(msg, "context deadline exceeded"), strings.Contains(msg, "context canceled"):
				// The run's end cut this write short: bench writes'
				// other systems let the last one finish and count it,
				// dqlite-benchmark cancels it. Neither a write nor a
				// failure.
			case strings.Contains(msg, "database is locked"), strings.Contains(strings.ToLower(msg), "busy"):
				r.busy++
			default:
				r.errors++
				r.lastErr = msg
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if section == "" {
		return errors.New("no measurements section: not a dqlite-benchmark result")
	}
	return nil
}

// dqliteVersion is Debian's package versions of the peer, or "" where
// dpkg does not know them.
func dqliteVersion(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f", "${Package} ${Version}\n", "libdqlite0", "go-dqlite").Output()
	if err != nil {
		return ""
	}
	return strings.Join(strings.Split(strings.TrimSpace(string(out)), "\n"), ", ")
}
