package ducklake

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

// TestSnapshotRaceOneWinner races two DuckLake commits for each snapshot
// id, one through the leader and one through a follower, in every mode
// pair: exactly one of each pair must be told it committed, the other must
// get the primary key error DuckLake retries on, and the catalog must hold
// the winner's rows, all of them, and none of the loser's.
func TestSnapshotRaceOneWinner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, addrs := raceCluster(ctx, t, Transactional)

	modes := []Mode{Autocommit, Transactional, TransactionalOneText}
	round := int64(0)
	for _, ma := range modes {
		for _, mb := range modes {
			for range 4 {
				round++
				racePair(t, ctx, addrs, [2]Mode{ma, mb}, round)
			}
		}
	}
	c.WaitConverged(t, time.Minute)
}

// racePair sends two commits of snapshot round, each with a snapshot
// changes row naming its client, at the same moment.
func racePair(t *testing.T, ctx context.Context, addrs []string, modes [2]Mode, round int64) {
	t.Helper()
	var metas [2]*metaConn
	for i := range metas {
		b, err := DialQuack(ctx, addrs[i], testcluster.Token)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		metas[i] = &metaConn{b: b, mode: modes[i]}
	}
	var errs [2]error
	var start, wg sync.WaitGroup
	start.Add(1)
	for i, m := range metas {
		wg.Go(func() {
			snap := snapshot{ID: round, SchemaVersion: 0, NextCatalogID: 1, NextFileID: round}
			if _, err := m.query(ctx, catalogOnly(latestSnapshotSQL)); err != nil {
				errs[i] = err
				return
			}
			start.Wait()
			batch := subst(insertSnapshotSQL+fmt.Sprintf("INSERT INTO {METADATA_CATALOG}.ducklake_metadata VALUES ('race', 'client %d', 'round', %d);", i, round)+
				snapshotChangesSQL(fmt.Sprintf("client:%d", i)), snap, fmt.Sprintf("r%d-c%d", round, i))
			if _, err := m.query(ctx, batch); err != nil {
				errs[i] = err
				return
			}
			errs[i] = m.commit(ctx)
		})
	}
	time.Sleep(50 * time.Millisecond)
	start.Done()
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Errorf("round %d (%v): both clients were told they committed", round, modes)
		case err == nil:
			won = i
		case !retryOnError(err):
			t.Errorf("round %d (%v): client %d got an error DuckLake does not retry: %v", round, modes, i, err)
		}
	}
	check, err := DialQuack(ctx, addrs[1], testcluster.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	if _, err := check.Query(ctx, "SET duckraft_consistency = 'strong'"); err != nil {
		t.Fatal(err)
	}
	rows, err := check.Query(ctx, fmt.Sprintf(`SELECT commit_message FROM "main".ducklake_snapshot_changes WHERE snapshot_id = %d`, round))
	if err != nil {
		t.Fatal(err)
	}
	meta, err := check.Query(ctx, fmt.Sprintf(`SELECT value FROM "main".ducklake_metadata WHERE key = 'race' AND scope_id = %d`, round))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case won < 0:
		t.Errorf("round %d (%v): neither client committed: %v", round, modes, errs)
	case len(rows) != 1 || asString(rows[0][0]) != fmt.Sprintf("r%d-c%d", round, won):
		t.Errorf("round %d (%v): client %d was told it committed, but snapshot %d holds %v (errors %v)", round, modes, won, round, rows, errs)
	case len(meta) != 1 || asString(meta[0][0]) != fmt.Sprintf("client %d", won):
		t.Errorf("round %d (%v): the winner's other rows are %v, want client %d's alone", round, modes, meta, won)
	}
}

// raceCluster starts a 3-node cluster, creates a lake in mode through its
// leader and waits until every node has it. It returns the cluster and the
// Quack addresses of the leader and of a follower.
func raceCluster(ctx context.Context, t *testing.T, mode Mode) (*testcluster.Cluster, []string) {
	t.Helper()
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitForLeader(t, 20*time.Second)
	addrs := []string{leader.QuackAddr, c.Others(leader)[0].QuackAddr}
	data, err := OpenData(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { data.Close() })
	setup, err := DialQuack(ctx, addrs[0], testcluster.Token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewLake(setup, mode, data, DefaultRetry, nil).Attach(ctx, true); err != nil {
		t.Fatal(err)
	}
	setup.Close()
	// A new session on a follower starts at what that node knows to be
	// committed, which trails the leader by up to a heartbeat.
	c.WaitConverged(t, time.Minute)
	return c, addrs
}
