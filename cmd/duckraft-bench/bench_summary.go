package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The summary that opens docs/benchmarks.md: for someone choosing a
// database, one table of duckraft beside each peer the run measured, and
// issue 33's goals marked met or not, from the same run's JSON as the
// detailed sections below it.

// notMeasured is a goal's measured value when the run lacks a figure.
const notMeasured = "not measured in this run"

// dqliteWorkload says what bench writes' dqlite points are and how they
// differ from the other systems'.
const dqliteWorkload = "dqlite is a cluster of three voters from Debian's libdqlite0 and go-dqlite (scripts/bench-dqlite.sh), loaded by " +
	"Debian's dqlite-benchmark (go-dqlite's Go client is not on the module proxy): its kvwrite workload, one `INSERT OR REPLACE` of a " +
	"16-byte key and a 16-byte value per autocommitted transaction into a table with a UNIQUE key, a bound statement, from the " +
	"third voter's process to the leader over loopback. Where duckraft's and PostgreSQL's clients send a new literal INSERT into a " +
	"table without an index, dqlite's workers bind parameters to one statement text and keep an index. dqlite runs one write transaction at a time and answers one " +
	"that meets another \"database is locked\" at once; its workers do not retry, so at more than one client those answers are " +
	"counted apart as busy, neither a write nor an error."

// summaryColumns orders the systems of the runs: duckraft clusters,
// largest first, then the peers.
func summaryColumns(reps []*benchReport) []string {
	seen := map[string]bool{}
	add := func(s string) {
		if s != "" {
			seen[s] = true
		}
	}
	for _, r := range reps {
		for _, p := range r.Writes {
			add(p.System)
		}
		if r.Bulk != nil {
			for _, p := range r.Bulk.Paths {
				add(p.System)
			}
		}
		if r.Ingest != nil {
			for _, p := range r.Ingest.Points {
				add(p.System)
			}
		}
		if r.Failover != nil {
			add(r.Failover.System)
		}
	}
	var duckraft, peers []string
	for s := range seen {
		if strings.HasPrefix(s, "duckraft-") {
			duckraft = append(duckraft, s)
		}
	}
	slices.SortFunc(duckraft, func(a, b string) int {
		if d := clusterSize(b) - clusterSize(a); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, s := range []string{"duckdb", "postgres", "dqlite"} {
		if seen[s] {
			peers = append(peers, s)
		}
	}
	return append(duckraft, peers...)
}

// clusterSize is N of duckraft-N or duckraft-N-pinned, or 0.
func clusterSize(system string) int {
	n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(system, "duckraft-"), pinnedSuffix))
	return n
}

// systemTitle names a column for a reader who does not know the
// benchmark's system names.
func systemTitle(s string) string {
	switch s {
	case "duckdb":
		return "DuckDB file, in-process"
	case "postgres":
		return "PostgreSQL, synchronous standby"
	case "dqlite":
		return "dqlite, 3 voters"
	case "duckraft-1":
		return "duckraft, 1 node"
	}
	n := clusterSize(s)
	switch {
	case n > 0 && strings.HasSuffix(s, pinnedSuffix):
		return fmt.Sprintf("duckraft, %d nodes, the leader alone on one CPU", n)
	case n > 0:
		return fmt.Sprintf("duckraft, %d nodes", n)
	}
	return s
}

func firstOf(reps []*benchReport, bench string) *benchReport {
	for _, r := range reps {
		if r.Bench == bench {
			return r
		}
	}
	return nil
}

func writeAt(ps []writePoint, system string, clients int) (writePoint, bool) {
	for _, p := range ps {
		if p.System == system && p.Clients == clients {
			return p, true
		}
	}
	return writePoint{}, false
}

// bestIngest is a system's fastest way to load the rows.
func bestIngest(r *ingestResult, system string) (ingestPoint, bool) {
	var best ingestPoint
	found := false
	for _, p := range r.Points {
		if p.System == system && (!found || p.RowsPerSec > best.RowsPerSec) {
			best, found = p, true
		}
	}
	return best, found
}

// summaryTable renders one row per measure, one column per system; a dash
// where the benchmark does not run that system.
func summaryTable(b *strings.Builder, reps []*benchReport) {
	cols := summaryColumns(reps)
	if len(cols) == 0 {
		return
	}
	b.WriteString("| |")
	for _, c := range cols {
		fmt.Fprintf(b, " %s |", systemTitle(c))
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(cols)) + "\n")
	row := func(label string, cell func(system string) string) {
		fmt.Fprintf(b, "| %s |", label)
		for _, c := range cols {
			v := cell(c)
			if v == "" {
				v = "–"
			}
			fmt.Fprintf(b, " %s |", v)
		}
		b.WriteString("\n")
	}
	if w := firstOf(reps, "writes"); w != nil {
		var counts []int
		for _, p := range w.Writes {
			if !slices.Contains(counts, p.Clients) {
				counts = append(counts, p.Clients)
			}
		}
		slices.Sort(counts)
		for _, n := range counts {
			label := fmt.Sprintf("single-row write transactions, %d clients: tx/s, p50", n)
			if n == 1 {
				label = "single-row write transactions, 1 client: tx/s, p50"
			}
			row(label, func(s string) string {
				p, ok := writeAt(w.Writes, s, n)
				if !ok {
					return ""
				}
				v := fmt.Sprintf("%.0f, %.1f ms", p.TxPerSec, p.P50Ms)
				if p.Busy > 0 && w.DurationSec > 0 {
					v += fmt.Sprintf(" (+%.0f busy/s)", float64(p.Busy)/w.DurationSec)
				}
				if p.Errors > 0 {
					v += fmt.Sprintf(" (%d errors)", p.Errors)
				}
				return v
			})
		}
	}
	if r := firstOf(reps, "bulk"); r != nil {
		row(fmt.Sprintf("bulk read, `SELECT *` of %d lineitem rows: M rows/s", r.Bulk.Rows), func(s string) string {
			best := 0.0
			for _, p := range r.Bulk.Paths {
				if p.System == s {
					best = max(best, p.RowsPerSec)
				}
			}
			if best == 0 {
				return ""
			}
			return fmt.Sprintf("%.2f", best/1e6)
		})
	}
	if r := firstOf(reps, "ingest"); r != nil {
		row(fmt.Sprintf("ingest, %d lineitem rows in one transaction: M rows/s (× the DuckDB file)", r.Ingest.Rows), func(s string) string {
			p, ok := bestIngest(r.Ingest, s)
			if !ok {
				return ""
			}
			if p.VsLocal > 0 {
				return fmt.Sprintf("%.2f (%.2f×)", p.RowsPerSec/1e6, p.VsLocal)
			}
			return fmt.Sprintf("%.2f", p.RowsPerSec/1e6)
		})
	}
	if r := firstOf(reps, "failover"); r != nil {
		row(fmt.Sprintf("failover, leader %s under %d writing clients: ms without an acknowledged write", failoverVerb(r.Failover.Mode), r.Failover.Clients),
			func(s string) string {
				if s != r.Failover.System {
					return ""
				}
				return fmt.Sprintf("%.0f", r.Failover.UnavailableMs)
			})
	}
}

// failoverVerb says what happened to the leader in a failover mode.
func failoverVerb(mode string) string {
	switch mode {
	case "kill":
		return "killed"
	case "stop":
		return "stopped"
	case "transfer":
		return "handing over"
	}
	return mode
}

// summaryGoals measures issue 33's goals: duckraft-3 against the peers
// at each client count, and the ingest of one and three nodes against a
// local DuckDB file.
func summaryGoals(reps []*benchReport) []goal {
	var gs []goal
	add := func(text string, measured bool, value string, met bool) {
		if !measured {
			gs = append(gs, goal{text: text, measured: notMeasured})
			return
		}
		gs = append(gs, goal{text: text, measured: value, met: met})
	}
	var ps []writePoint
	if w := firstOf(reps, "writes"); w != nil {
		ps = w.Writes
	}
	const sys = "duckraft-3"
	// pinned adds what the same goal measures with the leader alone on one
	// CPU, where the run has it: a hint of what separate hosts would give,
	// never the verdict, which is the cluster's as it ran.
	pinned := func(clients int, value func(p writePoint) string) string {
		p, ok := writeAt(ps, sys+pinnedSuffix, clients)
		if !ok {
			return ""
		}
		return "; the leader alone on one CPU (" + sys + pinnedSuffix + "): " + value(p)
	}
	d1, ok := writeAt(ps, sys, 1)
	add("1 client: p50 ≤ 2 ms on 3 nodes", ok, fmt.Sprintf("%.2f ms", d1.P50Ms)+
		pinned(1, func(p writePoint) string { return fmt.Sprintf("%.2f ms", p.P50Ms) }), d1.P50Ms <= 2)
	dq, okDq := writeAt(ps, "dqlite", 1)
	add("1 client: tx/s ≥ dqlite's", ok && okDq, fmt.Sprintf("%.0f against %.0f: %.2f×", d1.TxPerSec, dq.TxPerSec, ratio(d1.TxPerSec, dq.TxPerSec))+
		pinned(1, func(p writePoint) string {
			return fmt.Sprintf("%.0f, %.2f×", p.TxPerSec, ratio(p.TxPerSec, dq.TxPerSec))
		}),
		d1.TxPerSec >= dq.TxPerSec)
	for _, g := range []struct {
		clients int
		ratio   float64
	}{{8, 0.5}, {64, 1}} {
		d, ok1 := writeAt(ps, sys, g.clients)
		pg, ok2 := writeAt(ps, "postgres", g.clients)
		r := ratio(d.TxPerSec, pg.TxPerSec)
		add(fmt.Sprintf("%d clients: tx/s ≥ %.1f× PostgreSQL's", g.clients, g.ratio), ok1 && ok2 && pg.TxPerSec > 0,
			fmt.Sprintf("%.0f against %.0f: %.2f×", d.TxPerSec, pg.TxPerSec, r)+
				pinned(g.clients, func(p writePoint) string {
					return fmt.Sprintf("%.0f, %.2f×", p.TxPerSec, ratio(p.TxPerSec, pg.TxPerSec))
				}),
			r >= g.ratio)
	}
	var in *ingestResult
	if r := firstOf(reps, "ingest"); r != nil {
		in = r.Ingest
	}
	for _, g := range []struct {
		system string
		ratio  float64
	}{{"duckraft-1", 0.6}, {"duckraft-3", 0.4}} {
		var p ingestPoint
		ok := false
		if in != nil {
			p, ok = bestIngest(in, g.system)
		}
		text := fmt.Sprintf("ingest on %s: ≥ %.1f× a local DuckDB file", systemTitle(g.system), g.ratio)
		add(text, ok && p.VsLocal > 0, fmt.Sprintf("%.2f× (%s, %s)", p.VsLocal, p.Mode, p.Client), p.VsLocal >= g.ratio)
	}
	lag, applied := 0.0, false
	if in != nil {
		for _, p := range in.Points {
			if strings.HasPrefix(p.System, "duckraft-") {
				lag, applied = max(lag, p.ApplyLagSec), true
			}
		}
	}
	add("ingest: every node applied within 1 s of the acknowledgement", applied, fmt.Sprintf("%.3f s at most", lag), lag <= 1)
	return gs
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// mainDuckraft is the system the writes table compares with PostgreSQL:
// duckraft-3 where the run has it, else its first duckraft cluster, or
// "" without one.
func mainDuckraft(ps []writePoint) string {
	sys := ""
	for _, s := range systemsOf(ps) {
		if s == "duckraft-3" || (sys == "" && strings.HasPrefix(s, "duckraft")) {
			sys = s
		}
	}
	return sys
}

// goalsTable renders goals with their verdicts.
func goalsTable(b *strings.Builder, gs []goal) {
	b.WriteString("| goal | measured | met |\n|---|---|---|\n")
	for _, g := range gs {
		met := "**no**"
		switch {
		case g.measured == notMeasured:
			met = "not measured"
		case g.met:
			met = "**yes**"
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", g.text, g.measured, met)
	}
}

// summarySection renders the summary: the machine, the table, the
// goals, what each peer's workload is, and links to the plots.
func summarySection(b *strings.Builder, reps []*benchReport, m machineInfo, img string, drawn []string) {
	fmt.Fprintf(b, "## Summary: duckraft beside its peers (`make bench`, %s)\n\n", m.Date.Format("2006-01-02"))
	fmt.Fprintf(b, "One run on one machine, every system side by side: %s. The machine is shared, so absolute figures move "+
		"with its load; the ratios, measured in the same run, move less. The sections below give every figure of this run.\n\n", m)
	summaryTable(b, reps)
	b.WriteString("\nA dash: the benchmark does not run that system. Writes are autocommitted single-row INSERTs with fsync on " +
		"everywhere, every client on the leader or primary; duckraft's writes are acknowledged once a quorum has them in its Raft log " +
		"and the leader has applied them to DuckDB, PostgreSQL's once its synchronous standby has the commit.")
	if w := firstOf(reps, "writes"); w != nil && slices.Contains(systemsOf(w.Writes), "dqlite") {
		b.WriteString(" " + dqliteWorkload)
	}
	b.WriteString("\n\n### Goals of issue 33\n\n")
	goalsTable(b, summaryGoals(reps))
	var links []string
	for _, p := range []struct{ name, text string }{
		{plotWritesTPS, "writes: tx/s"}, {plotWritesLatency, "writes: latency"}, {plotBulk, "bulk read"},
		{plotIngest, "ingest"}, {plotFailover, "failover"}, {plotLag, "replication lag"},
	} {
		if slices.Contains(drawn, p.name) {
			links = append(links, fmt.Sprintf("[%s](%s)", p.text, filepath.ToSlash(filepath.Join(img, p.name))))
		}
	}
	if len(links) > 0 {
		fmt.Fprintf(b, "\nPlots: %s.\n", strings.Join(links, ", "))
	}
	b.WriteString("\n")
}
