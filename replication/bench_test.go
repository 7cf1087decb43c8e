package replication

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/wal"
)

// BenchmarkExecute measures single-row INSERT commands, each with an
// idempotency key as the router sends them, through a 3-node in-process
// cluster (raft-boltdb with fsync, TCP on loopback).
func BenchmarkExecute(b *testing.B) {
	for _, writers := range []int{1, 8} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			nodes := startCluster(b, 3, nil)
			leader := waitLeader(b, nodes)
			ctx := context.Background()
			if _, err := leader.store.Execute(ctx, wal.Command{Entry: wal.Statement{SQL: "CREATE TABLE t(w INTEGER, i INTEGER)"}}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N/writers + 1
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := 0; i < per; i++ {
						cmd := wal.Command{Key: []byte(fmt.Sprintf("%d-%d", w, i)),
							Entry: wal.Statement{SQL: fmt.Sprintf("INSERT INTO t VALUES (%d, %d)", w, i), Returning: true}}
						if _, err := leader.store.Execute(ctx, cmd); err != nil {
							b.Error(err)
							return
						}
					}
				}(w)
			}
			wg.Wait()
			b.ReportMetric(float64(per*writers)/b.Elapsed().Seconds(), "tx/s")
		})
	}
}

// BenchmarkApplySteps splits what the FSM spends applying one single-row
// INSERT entry with an idempotency key, as duckraftd's nodes apply each
// write at 1 client (a database file, DuckDB's default threads and
// fsync_mode): the whole ApplyBatch, and the same steps tryApply takes,
// each timed on its own (BEGIN, the statement, the key and applied-index
// append, COMMIT). Each is reported as ms per entry, and the whole
// ApplyBatch and the statement also as the process's CPU time (user plus
// system, DuckDB's threads included) per entry, which a loaded machine
// disturbs less than the wall clock.
func BenchmarkApplySteps(b *testing.B) {
	_, f := benchFSM(b, b.TempDir())
	idx := uint64(1)
	if r := f.ApplyBatch([]*raft.Log{logEntry(b, idx, stmt("CREATE TABLE bench(thread INTEGER, seq BIGINT, payload VARCHAR)"))})[0]; r != nil {
		if err, ok := r.(error); ok {
			b.Fatal(err)
		}
	}
	insert := func(i int) wal.Command {
		return wal.Command{Key: []byte(fmt.Sprintf("key-%d", i)), Timestamp: time.Now().UnixMicro(),
			Entry: wal.Statement{SQL: fmt.Sprintf("INSERT INTO bench VALUES (0, %d, 'payload-0-%d')", i, i), Returning: true}}
	}
	ms := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
	ctx := context.Background()
	var whole, begin, statement, keys, commit, wholeCPU, statementCPU time.Duration
	n := 0
	for b.Loop() {
		n++
		idx++
		t0, c0 := time.Now(), processCPU(b)
		for _, r := range f.ApplyBatch([]*raft.Log{logEntry(b, idx, insert(2*n))}) {
			if err, ok := r.(error); ok {
				b.Fatal(err)
			}
		}
		whole += time.Since(t0)
		wholeCPU += processCPU(b) - c0

		idx++
		cmd := insert(2*n + 1)
		t0 = time.Now()
		if err := f.conn.Begin(ctx); err != nil {
			b.Fatal(err)
		}
		t1, c1 := time.Now(), processCPU(b)
		res := &wal.Result{Index: idx}
		if err := f.applyEntry(ctx, cmd.Entry, lexEntry(cmd.Entry), cmd.Timestamp, res); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		statementCPU += processCPU(b) - c1
		r, err := newKeyRecord(cmd.Key, idx, cmd.Timestamp, res, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := f.keyWriter.store([]*keyRecord{&r}, idx); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		if err := f.conn.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		f.setApplied(idx)
		begin, statement, keys, commit = begin+t1.Sub(t0), statement+t2.Sub(t1), keys+t3.Sub(t2), commit+t4.Sub(t3)
	}
	b.ReportMetric(ms(whole, n), "applybatch-ms")
	b.ReportMetric(ms(begin, n), "begin-ms")
	b.ReportMetric(ms(statement, n), "statement-ms")
	b.ReportMetric(ms(keys, n), "keys-ms")
	b.ReportMetric(ms(commit, n), "commit-ms")
	b.ReportMetric(ms(wholeCPU, n), "applybatch-cpu-ms")
	b.ReportMetric(ms(statementCPU, n), "statement-cpu-ms")
}

// processCPU is the user plus system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStagedIngest times a node's own work for a 1M-row staged
// transaction of lineitem rows (16 columns, DuckDB's TPC-H generator), in
// Stage entries of about 4 MiB as routing sends them (DefaultStageBytes):
// raft's write of each entry to a raft-boltdb log with fsync, the Stage
// entries' apply, and the COMMIT that reads the rows back from the log and
// inserts them, with each log store. local is the same rows appended to a
// table of a plain connection in one transaction, as bench ingest's local
// DuckDB file does.
func BenchmarkStagedIngest(b *testing.B) {
	for _, kind := range []string{LogStoreBoltDB, LogStoreWAL} {
		b.Run(kind, func(b *testing.B) { benchmarkStagedIngest(b, kind) })
	}
}

func benchmarkStagedIngest(b *testing.B, kind string) {
	dir := b.TempDir()
	db, f := benchFSM(b, dir)
	store, err := openRaftStore(kind, dir, hclog.NewNullLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	logs, err := newLogCache(logCacheSize, logCacheBytes, store)
	if err != nil {
		b.Fatal(err)
	}
	logs.keep = f.holds.keep
	f.stageLog = logs

	gen, err := engine.Open("", engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer gen.Close()
	conn, err := gen.Connect()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), "CALL dbgen(sf = 0.17)"); err != nil {
		b.Fatal(err)
	}
	ddl, err := conn.QueryStrings(context.Background(), "SELECT sql FROM duckdb_tables() WHERE table_name = 'lineitem'")
	if err != nil {
		b.Fatal(err)
	}
	conn.Close()
	chunks := encodedRows(b, gen, "SELECT * FROM lineitem LIMIT 1000000")
	var entries [][][]byte
	size := 0
	for _, c := range chunks {
		if len(entries) == 0 || size+len(c) > 4<<20 {
			entries, size = append(entries, nil), 0
		}
		entries[len(entries)-1] = append(entries[len(entries)-1], c)
		size += len(c)
	}
	decoded := make([]*wire.DataChunk, len(chunks))
	for i, c := range chunks {
		decoded[i] = mustDecode(b, c)
	}
	rows := uint64(0)
	for _, c := range decoded {
		rows += uint64(c.Rows)
	}

	var logWrite, stage, commit, local time.Duration
	idx := uint64(0)
	apply := func(cmd wal.Command) {
		b.Helper()
		idx++
		l := logEntry(b, idx, cmd)
		start := time.Now()
		if err := logs.StoreLogs([]*raft.Log{l}); err != nil {
			b.Fatal(err)
		}
		logWrite += time.Since(start)
		start = time.Now()
		r, _ := f.ApplyBatch([]*raft.Log{l})[0].(*entryResult)
		if r == nil || r.results[0].err != nil {
			b.Fatalf("entry %d: %v", idx, r)
		}
		switch cmd.Entry.(type) {
		case wal.Stage:
			stage += time.Since(start)
		default:
			commit += time.Since(start)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		table := fmt.Sprintf("t%d", i)
		var offset uint64
		for _, e := range entries {
			apply(wal.Command{Entry: wal.Stage{ID: uint64(i + 1), Offset: offset, Chunks: e}})
			for _, c := range e {
				offset += uint64(mustDecode(b, c).Rows)
			}
		}
		apply(wal.Command{Entry: wal.Txn{Entries: []wal.Entry{
			wal.Statement{SQL: strings.Replace(ddl[0], "lineitem", table, 1)},
			wal.Staged{ID: uint64(i + 1), Rows: rows, Schema: "main", Table: table},
		}}})

		start := time.Now()
		plain, err := db.Connect()
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		if _, err := plain.Exec(ctx, strings.Replace(ddl[0], "lineitem", "local_"+table, 1)); err != nil {
			b.Fatal(err)
		}
		// One appender and one transaction for all the rows.
		if err := plain.AppendChunks([]string{"main"}, "local_"+table, decoded); err != nil {
			b.Fatal(err)
		}
		plain.Close()
		local += time.Since(start)
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) / n }
	b.ReportMetric(float64(len(entries)), "entries")
	b.ReportMetric(ms(logWrite), "log-write-ms")
	b.ReportMetric(ms(stage), "stage-apply-ms")
	b.ReportMetric(ms(commit), "commit-ms")
	b.ReportMetric(ms(local), "local-ms")
}

// benchFSM opens a database file in dir and an FSM on it, both closed when
// the benchmark ends.
func benchFSM(b *testing.B, dir string) (*engine.DB, *fsm) {
	b.Helper()
	db, err := engine.Open(filepath.Join(dir, "duck.db"), engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	f, err := newFSM(db, 1<<16, testLogger())
	if err != nil {
		db.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		f.close()
		db.Close()
	})
	return db, f
}
