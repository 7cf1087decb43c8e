package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/wire"
)

// ingestResult is bench ingest's answer: one point per target, client and
// mode.
type ingestResult struct {
	Rows int `json:"rows"`
	// Bytes is the size of the rows as Q3 DataChunks on the wire.
	Bytes  int64         `json:"bytes"`
	Runs   int           `json:"runs"`
	Points []ingestPoint `json:"points"`
}

type ingestPoint struct {
	System     string  `json:"system"`
	Mode       string  `json:"mode"`
	Client     string  `json:"client"`
	Seconds    float64 `json:"seconds"`
	RowsPerSec float64 `json:"rows_per_sec"`
	MBPerSec   float64 `json:"mb_per_sec"`
	// VsLocal is RowsPerSec over the local DuckDB file's, same mode.
	VsLocal float64 `json:"vs_local,omitempty"`
	// ApplyLagSec is the longest time, over the runs, from the COMMIT's
	// acknowledgement until every node had applied it.
	ApplyLagSec float64 `json:"apply_lag_sec,omitempty"`
	// Elections counts Raft term changes during the system's runs.
	Elections int   `json:"elections"`
	ServerRSS int64 `json:"server_rss_bytes,omitempty"`
}

// ingest modes: what the client's insert looks like in the log. DuckDB's
// CREATE TABLE … AS sends CREATE TABLE and the rows in one transaction;
// INSERT … SELECT sends only the rows, into a table that exists.
const (
	modeCTAS   = "CREATE TABLE AS"
	modeInsert = "INSERT … SELECT"
)

// ingestTarget is one way to load the rows, timed from the first row
// sent to the acknowledged COMMIT.
type ingestTarget struct {
	system, client string
	gen            wire.Generation
	d              *deployment // nil for the local file
}

// benchIngest loads the same lineitem-shaped rows, read from a local DuckDB
// file, into each target in turn, runs alternating: a local DuckDB file
// through DuckDB's appender in-process (the limit), and each duckraft
// cluster through the Go client in both generations.
func benchIngest(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("duckraft-bench ingest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bf benchFlags
	bf.register(fs, "duckdb,duckraft-1,duckraft-3")
	rows := fs.Int("rows", 2_000_000, "rows loaded per insert")
	runs := fs.Int("runs", 2, "runs of each insert; the median is reported")
	protocols := fs.String("protocols", "1,3", "Quack generations the Go client speaks, comma-separated")
	modes := fs.String("modes", "ctas,insert", "inserts to time: ctas (CREATE TABLE AS), insert (INSERT … SELECT)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rows < 1 || *runs < 1 {
		return errors.New("--rows and --runs must be positive")
	}
	gens, err := parseCounts("--protocols", *protocols)
	if err != nil {
		return err
	}
	var modeList []string
	for _, m := range strings.Split(*modes, ",") {
		switch strings.TrimSpace(m) {
		case "ctas":
			modeList = append(modeList, modeCTAS)
		case "insert":
			modeList = append(modeList, modeInsert)
		default:
			return fmt.Errorf("--modes: unknown mode %q (ctas, insert)", m)
		}
	}
	ctx := context.Background()
	work, cleanup, err := benchWorkDir("duckraft-bench-ingest-")
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Fprintf(stderr, "bench: generating %d rows in a local DuckDB file\n", *rows)
	srcPath := filepath.Join(work, "source.db")
	if err := generate(srcPath, *rows); err != nil {
		return err
	}
	src, err := engine.Open(srcPath, engine.Options{})
	if err != nil {
		return err
	}
	defer src.Close()
	ddl, size, err := sourceShape(ctx, src)
	if err != nil {
		return err
	}

	var targets []ingestTarget
	addCluster := func(name string, d *deployment) {
		for _, g := range gens {
			gen, label := wire.Q1, "Go client, Q1 APPEND"
			if g == 3 {
				gen, label = wire.Q3, "Go client, Q3 SEND_DATA"
			}
			targets = append(targets, ingestTarget{system: name, client: label, gen: gen, d: d})
		}
	}
	if servers := bf.servers.List(); len(servers) > 0 {
		d, err := remoteDeployment(servers, bf.token)
		if err != nil {
			return err
		}
		addCluster(d.name, d)
	} else {
		systems, err := parseSystems(bf.systems, "")
		if err != nil {
			return err
		}
		for _, sys := range systems {
			switch sys.kind {
			case "duckdb":
				targets = append(targets, ingestTarget{system: "duckdb", client: "in-process appender"})
			case "duckraft":
				dir := filepath.Join(work, sys.String())
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
				fmt.Fprintf(stderr, "bench: starting %s\n", sys)
				d, err := localDeployment(bf, dir, sys.nodes)
				if err != nil {
					return err
				}
				defer d.close()
				d.name = sys.String()
				if err := d.toLeader(); err != nil {
					return err
				}
				addCluster(sys.String(), d)
			default:
				return fmt.Errorf("--systems: bench ingest runs against duckdb and duckraft-N, not %s", sys)
			}
		}
	}

	type key struct{ target, mode int }
	times := map[key][]float64{}
	lags := map[key]float64{}
	terms := map[*deployment]uint64{}
	for _, t := range targets {
		if t.d != nil {
			if _, ok := terms[t.d]; !ok {
				terms[t.d] = clusterTerm(t.d)
			}
		}
	}
	prog := newBenchProgress(stderr, time.Duration(*runs*len(targets)*len(modeList))*5*time.Second)
	defer prog.finish()
	for run := range *runs {
		for i, t := range targets {
			for j, mode := range modeList {
				prog.begin(fmt.Sprintf("ingest: %s, %s, %s, run %d of %d", t.system, t.client, mode, run+1, *runs), 5*time.Second)
				table := fmt.Sprintf("ingest_%d_%d_%d", run, i, j)
				secs, lag, err := ingestOnce(ctx, src, work, ddl, table, mode, t, *rows)
				prog.end()
				if err != nil {
					return fmt.Errorf("%s, %s, %s: %w", t.system, t.client, mode, err)
				}
				times[key{i, j}] = append(times[key{i, j}], secs)
				lags[key{i, j}] = max(lags[key{i, j}], lag)
			}
		}
	}
	prog.finish()

	res := &ingestResult{Rows: *rows, Bytes: size, Runs: *runs}
	local := map[string]float64{}
	for i, t := range targets {
		for j, mode := range modeList {
			ts := slices.Clone(times[key{i, j}])
			slices.Sort(ts)
			secs := ts[len(ts)/2]
			p := ingestPoint{System: t.system, Mode: mode, Client: t.client, Seconds: secs,
				RowsPerSec: float64(*rows) / secs, MBPerSec: float64(size) / secs / 1e6, ApplyLagSec: lags[key{i, j}]}
			if t.d == nil {
				local[mode] = p.RowsPerSec
			} else {
				p.Elections = int(clusterTerm(t.d) - terms[t.d])
				for _, n := range t.d.nodes {
					p.ServerRSS = max(p.ServerRSS, peakRSS(n.cmd.Process.Pid))
				}
			}
			res.Points = append(res.Points, p)
		}
	}
	for i := range res.Points {
		if l := local[res.Points[i].Mode]; l > 0 && res.Points[i].System != "duckdb" {
			res.Points[i].VsLocal = res.Points[i].RowsPerSec / l
		}
	}
	rep := &benchReport{Bench: "ingest", Machine: describeMachine(ctx, ""), Ingest: res}
	return rep.print(stdout, bf.json)
}

// sourceShape returns the DDL of the source table, to be run with another
// name, and the size of its rows as Q3 chunks.
func sourceShape(ctx context.Context, src *engine.DB) (string, int64, error) {
	conn, err := src.Connect()
	if err != nil {
		return "", 0, err
	}
	defer conn.Close()
	ddl, err := conn.QueryStrings(ctx, "SELECT sql FROM duckdb_tables() WHERE table_name = 'lineitem'")
	if err != nil || len(ddl) != 1 {
		return "", 0, fmt.Errorf("source table: %v", err)
	}
	var size int64
	err = eachSourceChunk(ctx, src, func(c *wire.DataChunk) error {
		b, err := wire.AppendDataChunk(nil, c, wire.Q3)
		size += int64(len(b))
		return err
	})
	return strings.TrimSuffix(ddl[0], ";"), size, err
}

// eachSourceChunk hands fn the source table's rows, chunk by chunk.
func eachSourceChunk(ctx context.Context, src *engine.DB, fn func(*wire.DataChunk) error) error {
	conn, err := src.Connect()
	if err != nil {
		return err
	}
	defer conn.Close()
	res, err := conn.Query(ctx, "SELECT * FROM lineitem")
	if err != nil {
		return err
	}
	defer res.Close()
	for {
		c, err := res.Next()
		if err != nil || c == nil {
			return err
		}
		if err := fn(c); err != nil {
			return err
		}
	}
}

// ingestOnce loads the source rows into table on t as mode, and returns the
// seconds from the first row to the acknowledged COMMIT and, on a cluster,
// how long after that the last node applied it. The table is dropped after.
func ingestOnce(ctx context.Context, src *engine.DB, work, ddl, table, mode string, t ingestTarget, rows int) (float64, float64, error) {
	create := strings.Replace(ddl, "lineitem", table, 1)
	if t.d == nil {
		path := filepath.Join(work, table+".db")
		defer os.Remove(path)
		defer os.Remove(path + ".wal")
		db, err := engine.Open(path, engine.Options{})
		if err != nil {
			return 0, 0, err
		}
		defer db.Close()
		conn, err := db.Connect()
		if err != nil {
			return 0, 0, err
		}
		defer conn.Close()
		if mode == modeInsert {
			if _, err := conn.Exec(ctx, create); err != nil {
				return 0, 0, err
			}
		}
		start := time.Now()
		if err := conn.Begin(ctx); err != nil {
			return 0, 0, err
		}
		if mode == modeCTAS {
			if _, err := conn.Exec(ctx, create); err != nil {
				return 0, 0, err
			}
		}
		if err := eachSourceChunk(ctx, src, func(c *wire.DataChunk) error { return conn.Append("main", table, c) }); err != nil {
			return 0, 0, err
		}
		if err := conn.Commit(ctx); err != nil {
			return 0, 0, err
		}
		return time.Since(start).Seconds(), 0, nil
	}
	c, err := client.Connect(ctx, t.d.servers[0], client.Options{Token: t.d.token, Generation: t.gen})
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	if mode == modeInsert {
		if _, err := c.Exec(ctx, create); err != nil {
			return 0, 0, err
		}
	}
	conn, err := src.Connect()
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	res, err := conn.Query(ctx, "SELECT * FROM lineitem")
	if err != nil {
		return 0, 0, err
	}
	defer res.Close()
	start := time.Now()
	if _, err := c.Exec(ctx, "BEGIN TRANSACTION"); err != nil {
		return 0, 0, err
	}
	if mode == modeCTAS {
		if _, err := c.Exec(ctx, create); err != nil {
			return 0, 0, err
		}
	}
	if err := c.InsertStream(ctx, []string{"main"}, table, res.Next); err != nil {
		return 0, 0, err
	}
	if _, err := c.Exec(ctx, "COMMIT"); err != nil {
		return 0, 0, err
	}
	secs := time.Since(start).Seconds()
	acked := time.Now()
	lag, err := applyLag(t.d, acked)
	if err != nil {
		return 0, 0, err
	}
	n, err := countRows(ctx, c, table)
	if err != nil {
		return 0, 0, err
	}
	if n != int64(rows) {
		return 0, 0, fmt.Errorf("%s holds %d rows, want %d", table, n, rows)
	}
	if _, err := c.Exec(ctx, "DROP TABLE "+table); err != nil {
		return 0, 0, err
	}
	return secs, lag, nil
}

// applyLag waits until every node of a local cluster has applied what its
// leader had committed at acked, and returns how long after acked that
// was. A remote deployment's nodes are not polled: 0.
func applyLag(d *deployment, acked time.Time) (float64, error) {
	if len(d.nodes) < 2 {
		return 0, nil
	}
	st, err := nodeStatus(strings.TrimPrefix(d.servers[0], "quack:"), d.token)
	if err != nil {
		return 0, err
	}
	target := st.Commit
	for _, n := range d.nodes {
		ok := pollUntil(time.Minute, 5*time.Millisecond, func() bool {
			s, err := nodeStatus(n.quack, d.token)
			return err == nil && s.Applied >= target
		})
		if !ok {
			return 0, fmt.Errorf("%s did not apply index %d within a minute", n.quack, target)
		}
	}
	return time.Since(acked).Seconds(), nil
}

// clusterTerm is the highest Raft term a local cluster's nodes report.
func clusterTerm(d *deployment) uint64 {
	var term uint64
	for _, n := range d.nodes {
		if st, err := nodeStatus(n.quack, d.token); err == nil {
			term = max(term, st.Term)
		}
	}
	return term
}

func ingestTable(b *strings.Builder, r *ingestResult) {
	fmt.Fprintln(b, "| system | insert | client | seconds | M rows/s | MB/s | × local | all nodes applied after | elections | server peak RSS |")
	fmt.Fprintln(b, "|---|---|---|---|---|---|---|---|---|---|")
	for _, p := range r.Points {
		vs, lag, rss, el := "", "", "", ""
		if p.VsLocal > 0 {
			vs = fmt.Sprintf("%.2f×", p.VsLocal)
		}
		if p.System != "duckdb" {
			lag = fmt.Sprintf("%.3f s", p.ApplyLagSec)
			el = fmt.Sprint(p.Elections)
		}
		if p.ServerRSS > 0 {
			rss = mib(p.ServerRSS)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %.2f | %.2f | %.0f | %s | %s | %s | %s |\n",
			p.System, p.Mode, p.Client, p.Seconds, p.RowsPerSec/1e6, p.MBPerSec, vs, lag, el, rss)
	}
}
