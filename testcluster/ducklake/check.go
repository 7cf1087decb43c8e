package ducklake

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"
)

// Report is a run's verdicts and figures.
type Report struct {
	Failures []string

	Elapsed time.Duration
	// Commits by what their client was told, and how many landed.
	Acked, Failed, Unknown, UnknownLanded, Landed int
	// Conflicts counts the retries of the commit loop; Retried the
	// commits that needed at least one; Exhausted those that ran out.
	Conflicts, Retried, Exhausted int
	P50, P99                      time.Duration
	Reads, FinalReads             int
	Expired, DeleteFilesCleaned   int
	Snapshots                     int
	Sent                          int64
	ByOp                          map[string]int
	// Errors counts the errors of commits that did not land, by their
	// first words.
	Errors map[string]int
	// Traces are the attempts of the first commits that ran out of
	// retries.
	Traces []string
}

// CommitsPerSecond is the rate of landed commits.
func (r *Report) CommitsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Landed) / r.Elapsed.Seconds()
}

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "DuckLake workload: %v, %d snapshots, %d metadata texts sent\n", r.Elapsed.Round(time.Millisecond), r.Snapshots, r.Sent)
	fmt.Fprintf(&b, "  commits: %d acknowledged, %d failed, %d unknown (%d of them landed); %d landed, %.1f/s\n",
		r.Acked, r.Failed, r.Unknown, r.UnknownLanded, r.Landed, r.CommitsPerSecond())
	fmt.Fprintf(&b, "  latency of acknowledged commits: p50 %v, p99 %v\n", r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond))
	fmt.Fprintf(&b, "  conflicts retried: %d (%d commits retried at least once, %d ran out of retries)\n", r.Conflicts, r.Retried, r.Exhausted)
	ops := make([]string, 0, len(r.ByOp))
	for op, n := range r.ByOp {
		ops = append(ops, fmt.Sprintf("%s %d", op, n))
	}
	sort.Strings(ops)
	fmt.Fprintf(&b, "  landed by operation: %s\n", strings.Join(ops, ", "))
	var errs []string
	for e, n := range r.Errors {
		errs = append(errs, fmt.Sprintf("%d× %s", n, e))
	}
	sort.Strings(errs)
	for _, e := range errs {
		fmt.Fprintf(&b, "  not landed: %s\n", e)
	}
	for _, t := range r.Traces {
		fmt.Fprintf(&b, "  ran out of retries: %s\n", t)
	}
	fmt.Fprintf(&b, "  expire: %d snapshots expired, %d delete files cleaned\n", r.Expired, r.DeleteFilesCleaned)
	fmt.Fprintf(&b, "  time-travel reads checked: %d during the run, %d at the end\n", r.Reads, r.FinalReads)
	if len(r.Failures) == 0 {
		b.WriteString("  verdict: no lost, doubled or half-applied commit; every read saw exactly the commits up to its snapshot\n")
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "  FAIL: %s\n", f)
	}
	return b.String()
}

// Check judges a run against the catalog's final state, read through
// cfg.Oracle once the run has ended:
//
//   - snapshot ids are unique and contiguous (expire removes only a
//     prefix), and their times never go back;
//   - every commit tag is in ducklake_snapshot_changes at most once; every
//     acknowledged commit whose snapshot was not expired is there, at the
//     snapshot it was acknowledged with, and no failed one is;
//   - every data file is referenced exactly once, by the table its writer
//     committed it to, and each table's live files are those its writer
//     committed; every file has its column statistics; every registered
//     inlined-data table exists and every one that exists is registered;
//   - each read taken during the run, and a sample of reads at the end,
//     saw exactly the rows of the commits up to its snapshot (as a
//     multiset: a row applied twice shows);
//   - each table's newest rows are what its writer holds.
func Check(ctx context.Context, cfg Config, rec *Record) *Report {
	cfg.setDefaults()
	rep := &Report{Elapsed: rec.Elapsed, Sent: rec.Sent.Load(), ByOp: map[string]int{}, Errors: map[string]int{}, Failures: slices.Clone(rec.Problems)}
	fail := func(format string, args ...any) { rep.Failures = append(rep.Failures, fmt.Sprintf(format, args...)) }
	query := func(q string) [][]any {
		rows, err := oracleRetry(ctx, cfg, catalogOnly(q))
		if err != nil {
			fail("read the final state (%s): %v", strings.TrimSpace(q), err)
		}
		return rows
	}

	// Snapshots.
	snaps := query(`SELECT snapshot_id, snapshot_time FROM {METADATA_CATALOG}.ducklake_snapshot ORDER BY snapshot_id`)
	rep.Snapshots = len(snaps)
	var minSnap, maxSnap int64 = -1, -1
	var lastTime string
	for i, r := range snaps {
		id := mustInt(r[0])
		if i == 0 {
			minSnap = id
		} else if id != maxSnap+1 {
			fail("snapshot ids are not contiguous: %d follows %d", id, maxSnap)
		}
		if ts := asString(r[1]); ts < lastTime {
			fail("snapshot %d's time %s is before its predecessor's %s", id, ts, lastTime)
		} else {
			lastTime = ts
		}
		maxSnap = id
	}

	// Tags.
	tags := map[string][]int64{}
	for _, r := range query(`SELECT snapshot_id, commit_message FROM {METADATA_CATALOG}.ducklake_snapshot_changes WHERE commit_message IS NOT NULL`) {
		tag := asString(r[1])
		tags[tag] = append(tags[tag], mustInt(r[0]))
	}
	for tag, ids := range tags {
		if len(ids) > 1 {
			fail("commit %s applied %d times, at snapshots %v", tag, len(ids), ids)
		}
	}
	var latencies []time.Duration
	for _, e := range rec.Events {
		if e.Op == "expire" {
			continue
		}
		switch e.Outcome {
		case Committed:
			rep.Acked++
			latencies = append(latencies, e.Latency)
		case Failed:
			rep.Failed++
			if strings.Contains(e.Err, "Exceeded the maximum retry count") {
				rep.Exhausted++
				if rep.Exhausted <= 2 {
					rep.Traces = append(rep.Traces, fmt.Sprintf("%s (%s, client %d, %s): %s", e.Tag, e.Op, e.Client, e.Mode, strings.Join(e.Trace, "; ")))
				}
			}
		case Unknown:
			rep.Unknown++
			if e.Landed {
				rep.UnknownLanded++
			}
		}
		if e.Landed {
			rep.Landed++
			rep.ByOp[e.Op]++
		} else if e.Err != "" {
			rep.Errors[errorKind(e.Err)]++
		}
		rep.Conflicts += e.Retried
		if e.Retried > 0 {
			rep.Retried++
		}
		at, present := tags[e.Tag]
		switch {
		case e.Landed && e.SID >= minSnap && (!present || at[0] != e.SID):
			fail("commit %s (%s, %s, client %d, %s) landed at snapshot %d, but the catalog has it at %v; attempts: %v", e.Tag, e.Op, e.Outcome, e.Client, e.Mode, e.SID, at, e.Trace)
		case !e.Landed && present:
			fail("commit %s (%s, client %d, %s) was %s and taken for not applied, but it is at snapshot %v; attempts: %v, error %v", e.Tag, e.Op, e.Client, e.Mode, e.Outcome, at, e.Trace, e.Err)
		}
	}
	slices.Sort(latencies)
	if n := len(latencies); n > 0 {
		rep.P50, rep.P99 = latencies[n/2], latencies[min(n-1, n*99/100)]
	}
	for _, x := range rec.Expires {
		rep.Expired += x.Snapshots
		rep.DeleteFilesCleaned += x.DeleteFiles
	}

	// Files.
	tableNames := map[int64]string{}
	for _, r := range query(`SELECT DISTINCT table_id, table_name FROM {METADATA_CATALOG}.ducklake_table`) {
		tableNames[mustInt(r[0])] = asString(r[1])
	}
	paths := map[string][]string{}
	for _, r := range query(`SELECT table_id, path FROM {METADATA_CATALOG}.ducklake_data_file ORDER BY data_file_id`) {
		name := tableNames[mustInt(r[0])]
		paths[asString(r[1])] = append(paths[asString(r[1])], name)
	}
	live := map[string]string{}
	for name, t := range rec.Tables {
		for p := range t.files {
			live[p] = name
		}
	}
	for p, refs := range paths {
		switch {
		case len(refs) != 1:
			fail("data file %s is referenced %d times (%v)", p, len(refs), refs)
		case live[p] != refs[0]:
			fail("data file %s is in table %s of the catalog, but its writer holds it in %q", p, refs[0], live[p])
		}
	}
	for p, name := range live {
		if _, ok := paths[p]; !ok {
			fail("data file %s, committed to %s, is not in the catalog", p, name)
		}
	}
	if rows := query(`SELECT data_file_id FROM {METADATA_CATALOG}.ducklake_data_file WHERE data_file_id NOT IN (SELECT data_file_id FROM {METADATA_CATALOG}.ducklake_file_column_stats)`); len(rows) > 0 {
		fail("%d data files have no column statistics: %v", len(rows), rows)
	}
	registered := map[string]bool{}
	for _, r := range query(`SELECT table_name FROM {METADATA_CATALOG}.ducklake_inlined_data_tables`) {
		registered[asString(r[0])] = true
	}
	existing := map[string]bool{}
	for _, r := range query(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' AND regexp_matches(table_name, '^ducklake_inlined_data_[0-9]+_[0-9]+$')`) {
		existing[asString(r[0])] = true
	}
	for n := range registered {
		if !existing[n] {
			fail("inlined-data table %s is registered but does not exist", n)
		}
	}
	for n := range existing {
		if !registered[n] {
			fail("inlined-data table %s exists but is not registered", n)
		}
	}

	// Reads.
	history := newHistory(rec.Events)
	compare := func(r Read, when string) {
		if want := history.at(r.Table, r.At); r.Rows != want {
			detail := fmt.Sprintf("%d rows, want %d", r.Rows.Count, want.Count)
			if r.IDs != nil {
				detail = diff(r.IDs, expected(rec.Events, r.Table, r.At))
			}
			fail("%s read of %s at snapshot %d saw %s", when, r.Table, r.At, detail)
		}
	}
	for _, r := range rec.Reads {
		if r.At >= minSnap {
			rep.Reads++
		}
		compare(r, "a")
	}
	b, err := cfg.Oracle(ctx)
	if err != nil {
		fail("open a session for the final reads: %v", err)
		return rep
	}
	defer b.Close()
	reader := NewLake(b, Autocommit, cfg.Data, cfg.Retry, nil)
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 99))
	for name, t := range rec.Tables {
		ats := []int64{maxSnap}
		for range 12 {
			if maxSnap > minSnap {
				ats = append(ats, minSnap+rng.Int64N(maxSnap-minSnap+1))
			}
		}
		for _, at := range ats {
			r, err := reader.readAt(ctx, name, at)
			if err != nil {
				fail("final read of %s at %d: %v", name, at, err)
				continue
			}
			if !r.Exists {
				fail("final read of %s: snapshot %d of [%d, %d] is gone", name, at, minSnap, maxSnap)
				continue
			}
			rep.FinalReads++
			compare(r, "the final")
			if at == maxSnap {
				if want := t.LiveIDs(); !slices.Equal(r.IDs, want) {
					fail("the newest rows of %s are not what its writer holds: %s", name, diff(r.IDs, want))
				}
			}
		}
	}
	return rep
}

// oracleRetry runs q in an oracle session, retrying while the cluster
// elects a leader.
func oracleRetry(ctx context.Context, cfg Config, q string) ([][]any, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := cfg.Oracle(ctx)
		if err == nil {
			var rows [][]any
			rows, err = b.Query(ctx, q)
			b.Close()
			if err == nil {
				return rows, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// history is, per table, the landed commits in snapshot order with the
// digest of the rows up to each.
type history map[string][]historyStep

type historyStep struct {
	sid  int64
	rows digest
}

func newHistory(events []Event) history {
	byTable := map[string][]Event{}
	for _, e := range events {
		if e.Landed && e.Table != "" {
			byTable[e.Table] = append(byTable[e.Table], e)
		}
	}
	h := history{}
	for table, es := range byTable {
		slices.SortFunc(es, func(a, b Event) int { return int(a.SID - b.SID) })
		var d digest
		for _, e := range es {
			d.add(e.Inserted, 1)
			d.add(e.Deleted, -1)
			h[table] = append(h[table], historyStep{e.SID, d})
		}
	}
	return h
}

// at is the digest of the rows a read of table at snapshot at must see.
func (h history) at(table string, at int64) digest {
	steps := h[table]
	i := sort.Search(len(steps), func(i int) bool { return steps[i].sid > at })
	if i == 0 {
		return digest{}
	}
	return steps[i-1].rows
}

// expected is the multiset of rows a read of table at snapshot at must
// see: the rows inserted by the commits that landed up to at, less those
// deleted by them.
func expected(events []Event, table string, at int64) []int64 {
	count := map[int64]int{}
	for _, e := range events {
		if !e.Landed || e.Table != table || e.SID > at {
			continue
		}
		for _, id := range e.Inserted {
			count[id]++
		}
		for _, id := range e.Deleted {
			count[id]--
		}
	}
	var out []int64
	for id, n := range count {
		for range n {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// diff describes how got differs from want.
func diff(got, want []int64) string {
	g, w := map[int64]int{}, map[int64]int{}
	for _, id := range got {
		g[id]++
	}
	for _, id := range want {
		w[id]++
	}
	var extra, missing []int64
	for id, n := range g {
		for range n - w[id] {
			extra = append(extra, id)
		}
	}
	for id, n := range w {
		for range n - g[id] {
			missing = append(missing, id)
		}
	}
	slices.Sort(extra)
	slices.Sort(missing)
	return fmt.Sprintf("%d rows, want %d: %d extra %v, %d missing %v", len(got), len(want), len(extra), head(extra), len(missing), head(missing))
}

func head(ids []int64) []int64 {
	if len(ids) > 5 {
		return ids[:5]
	}
	return ids
}

// errorKind shortens an error to its first 100 characters, for counting.
func errorKind(err string) string {
	if len(err) > 100 {
		err = err[:100] + "…"
	}
	return err
}
