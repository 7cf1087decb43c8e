package replication

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/node/engine"
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
	db, err := engine.Open(filepath.Join(b.TempDir(), "duck.db"), engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	f, err := newFSM(db, 1<<16, testLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer f.close()
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
