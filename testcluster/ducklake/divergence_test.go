package ducklake

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

// TestConcurrentTableCreationKeepsReplicasEqual races DuckLake commits that
// create a table: each racer of a round writes the same snapshot id and
// creates the same inlined-data table (CREATE TABLE IF NOT EXISTS
// ducklake_inlined_data_<table>_<version>, named after the ids every racer
// reads), as concurrent CREATE TABLEs in DuckLake do. Only one may land,
// and every node must end with the same state.
//
// It failed before 2026-12-04 (found by this harness): the leader's analysis of one racer's CREATE (routing/
// analyze, canonicalCreate) runs it in a transaction it rolls back, on the
// leader's database, while the applier creates the same table for another
// racer; the applier's CREATE fails there with DuckDB's "Catalog
// write-write conflict on create", which the FSM takes for the command's
// own failure. The leader drops that racer's commit, which the followers
// applied, and then applies the next racer's instead: the leader's state
// differs from the followers', the first racer is told its commit failed
// and the second that its commit landed, the opposite of what the
// followers hold. The applier now takes a conflict for what it is, this
// node's alone, and retries (replication, nodeLocal).
func TestConcurrentTableCreationKeepsReplicasEqual(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, addrs := raceCluster(ctx, t, Autocommit)
	var conns [4]*Quack
	for i := range conns {
		var err error
		if conns[i], err = DialQuack(ctx, addrs[i%2], testcluster.Token); err != nil {
			t.Fatal(err)
		}
		defer conns[i].Close()
	}
	for round := int64(1); round <= 30; round++ {
		var start, wg sync.WaitGroup
		start.Add(1)
		for i, q := range conns {
			wg.Go(func() {
				snap := snapshot{ID: round, SchemaVersion: round, NextCatalogID: round + 1}
				batch := subst(insertSnapshotSQL+newTableSQL(round, newUUID(), fmt.Sprintf("t%d_%d", round, i))+
					newInlinedTableSQL(round, round)+schemaVersionSQL(round)+snapshotChangesSQL("created_table"), snap, fmt.Sprintf("r%d-c%d", round, i))
				start.Wait()
				q.Query(ctx, batch)
			})
		}
		start.Done()
		wg.Wait()
	}
	deadline := time.Now().Add(time.Minute)
	for {
		hashes := map[string]string{}
		var index uint64
		same := true
		for _, n := range c.Nodes {
			i, h, err := n.StateHash()
			if err != nil || (index != 0 && i != index) {
				same = false
				break
			}
			index = i
			hashes[n.ID] = h
		}
		if same {
			distinct := map[string]bool{}
			for _, h := range hashes {
				distinct[h] = true
			}
			if len(distinct) != 1 {
				t.Fatalf("after racing table creations the nodes hold different states at index %d: %v", index, hashes)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the nodes did not reach one index")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
