package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// benchReport is what one benchmark run prints: as Markdown, or as JSON
// for bench report to turn into docs/benchmarks.md and its plots.
type benchReport struct {
	Bench       string            `json:"bench"`
	Machine     machineInfo       `json:"machine"`
	DurationSec float64           `json:"duration_sec,omitempty"`
	Writes      []writePoint      `json:"writes,omitempty"`
	Bulk        *bulkResult       `json:"bulk,omitempty"`
	Failover    *failoverResult   `json:"failover,omitempty"`
	FailoverLB  *lbFailoverResult `json:"failover_lb,omitempty"`
	Lag         *lagResult        `json:"lag,omitempty"`
	Ingest      *ingestResult     `json:"ingest,omitempty"`
	// Text is a benchmark's Markdown that bench report includes as it is.
	Text string `json:"-"`
}

// machineInfo describes where a benchmark ran.
type machineInfo struct {
	CPU      string    `json:"cpu"`
	Cores    int       `json:"cores"`
	RAMGiB   float64   `json:"ram_gib"`
	Kernel   string    `json:"kernel"`
	Go       string    `json:"go"`
	DuckDB   string    `json:"duckdb"`
	Postgres string    `json:"postgres,omitempty"`
	Dqlite   string    `json:"dqlite,omitempty"`
	Load     string    `json:"load_average"`
	Date     time.Time `json:"date"`
}

func describeMachine(ctx context.Context, pg string) machineInfo {
	m := machineInfo{CPU: "unknown CPU", Cores: runtime.NumCPU(), Go: runtime.Version(), Date: time.Now().UTC().Truncate(time.Second)}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if line, _, ok := strings.Cut(string(b), "\n"); ok {
			if f := strings.Fields(line); len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				m.RAMGiB = float64(int(kb/(1<<20)*10+0.5)) / 10
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.Load = strings.Join(f[:3], " ")
		}
	}
	m.DuckDB = duckdbVersion(ctx)
	m.Postgres = pgVersion(ctx, pg)
	return m
}

// duckdbVersion asks the DuckDB linked into this binary.
func duckdbVersion(ctx context.Context) string {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return ""
	}
	defer db.Close()
	var v string
	if err := db.QueryRowContext(ctx, "SELECT version()").Scan(&v); err != nil {
		return ""
	}
	return v
}

func (m machineInfo) String() string {
	s := fmt.Sprintf("%s, %d cores, %.0f GiB RAM, %s, %s, DuckDB %s", m.CPU, m.Cores, m.RAMGiB, m.Kernel, m.Go, m.DuckDB)
	if m.Postgres != "" {
		s += ", PostgreSQL " + m.Postgres
	}
	if m.Dqlite != "" {
		s += ", dqlite from Debian (" + m.Dqlite + ")"
	}
	return s + fmt.Sprintf(", load average %s at the start, %s", m.Load, m.Date.Format("2006-01-02 15:04 UTC"))
}

func (r *benchReport) print(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	_, err := io.WriteString(w, r.markdown(3))
	return err
}

// markdown renders the report under a heading of the given level.
func (r *benchReport) markdown(level int) string {
	var b strings.Builder
	h := strings.Repeat("#", level)
	switch r.Bench {
	case "writes":
		fmt.Fprintf(&b, "%s Writes: single-row INSERT transactions, %.0f s per system and client count\n\n", h, r.DurationSec)
		writesTable(&b, r.Writes)
	case "bulk":
		fmt.Fprintf(&b, "%s Bulk read: SELECT * of a %d-row lineitem table (16 columns), median of %d\n\n", h, r.Bulk.Rows, r.Bulk.Runs)
		bulkTable(&b, r.Bulk)
	case "failover":
		fmt.Fprintf(&b, "%s Failover: write unavailability when the leader goes (%s)\n\n", h, r.Failover.Mode)
		failoverTable(&b, r.Failover)
	case "failover-lb":
		fmt.Fprintf(&b, "%s Failover through one endpoint (%s): client-visible unavailability when a node dies\n\n", h, r.FailoverLB.Via)
		b.WriteString(lbFailoverIntro(r.FailoverLB))
		failoverLBTables(&b, r.FailoverLB)
	case "lag":
		fmt.Fprintf(&b, "%s Replication lag under write load (%d clients)\n\n", h, r.Lag.Clients)
		lagTable(&b, r.Lag)
	case "ingest":
		fmt.Fprintf(&b, "%s Ingest: %d lineitem rows (%.0f MB as Q3 chunks) per insert, median of %d\n\n", h, r.Ingest.Rows, float64(r.Ingest.Bytes)/1e6, r.Ingest.Runs)
		ingestTable(&b, r.Ingest)
	}
	fmt.Fprintf(&b, "\nMachine: %s.\n", r.Machine)
	return b.String()
}

func writesTable(b *strings.Builder, ps []writePoint) {
	fmt.Fprintln(b, "| system | clients | tx/s | p50 ms | p99 ms | errors | writes per Raft entry | leader CPU ms per write |")
	fmt.Fprintln(b, "|---|---|---|---|---|---|---|---|")
	for _, p := range ps {
		perEntry, cpu := "", ""
		if p.PerEntry > 0 {
			perEntry = fmt.Sprintf("%.1f", p.PerEntry)
		}
		if p.LeaderCPUMs > 0 {
			cpu = fmt.Sprintf("%.2f", p.LeaderCPUMs)
		}
		errs := strconv.Itoa(p.Errors)
		if p.Busy > 0 {
			errs += fmt.Sprintf(" (+%d busy)", p.Busy)
		}
		fmt.Fprintf(b, "| %s | %d | %.0f | %.2f | %.2f | %s | %s | %s |\n", p.System, p.Clients, p.TxPerSec, p.P50Ms, p.P99Ms, errs, perEntry, cpu)
	}
}
