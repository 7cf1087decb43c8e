package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// benchReadsRemote runs bench reads' two measurements against a running
// deployment: the dashboard load and the bulk scan, whole and split over
// split nodes, through the first server (a router, typically). The nodes'
// CPU times are not the benchmark's to read there.
func benchReadsRemote(servers []string, token string, rows, clients int, dur time.Duration, scans, split int, stdout, stderr io.Writer) error {
	if clients < 1 || scans < 1 || split < 1 || dur <= 0 {
		return errors.New("want --clients, --scans and --split ≥ 1 and --duration > 0")
	}
	ctx := context.Background()
	d, err := remoteDeployment(servers, token)
	if err != nil {
		return err
	}
	if err := ensureLineitem(ctx, d, rows); err != nil {
		return err
	}
	addr := apiAddr(servers[0])
	fmt.Fprintf(stdout, "## bench reads: %d-row lineitem through %s\n\n", rows, servers[0])
	fmt.Fprintf(stdout, "%s\n\n", machine())
	prog := newBenchProgress(stderr, dur+time.Duration(2*scans)*time.Second)
	defer prog.finish()
	prog.begin(fmt.Sprintf("reads: dashboard, %d clients", clients), dur)
	n, lat, errs, err := dashboardLoad(ctx, addr, token, clients, dur)
	prog.end()
	if err != nil {
		return err
	}
	results := map[int]float64{}
	for _, r := range slices.Compact([]int{1, split}) {
		var rates []float64
		for i := range scans {
			prog.begin(fmt.Sprintf("reads: bulk scan split over %d, %d of %d", r, i+1, scans), time.Second)
			rate, got, err := bulkScan(ctx, addr, token, r)
			prog.end()
			if err != nil {
				return err
			}
			if got != int64(rows) {
				return fmt.Errorf("bulk scan read %d rows, want %d", got, rows)
			}
			rates = append(rates, rate)
		}
		slices.Sort(rates)
		results[r] = rates[len(rates)/2]
	}
	prog.finish()
	fmt.Fprintf(stdout, "Dashboard aggregates (%d clients, %v): **%.1f queries/s**, p50 %v, p99 %v, %d errors.\n\n",
		clients, dur, float64(n)/dur.Seconds(), pct(lat, 50), pct(lat, 99), errs)
	fmt.Fprintln(stdout, "| bulk scan `SELECT * FROM lineitem` | M rows/s (median) |")
	fmt.Fprintln(stdout, "|---|---|")
	for _, r := range slices.Compact([]int{1, split}) {
		fmt.Fprintf(stdout, "| split over %d node(s) | %.2f |\n", r, results[r]/1e6)
	}
	return nil
}
