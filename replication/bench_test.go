package replication

import (
	"context"
	"fmt"
	"sync"
	"testing"

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
