package testcluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

// TestPartitionIsolatedLeader cuts the leader off from the other nodes'
// Raft traffic: the majority elects a new leader and takes writes, the old
// leader steps down, and after Heal every node converges on the same data.
// It runs in both modes: the proxies cut the same sockets either way.
func TestPartitionIsolatedLeader(t *testing.T) {
	inBothModes(t, testcluster.Options{Proxy: true}, func(t *testing.T, opts testcluster.Options) {
		partitionIsolatedLeader(t, opts, false)
	})
}

// TestBlackholeIsolatedLeader is the same with a silent partition: the
// leader's Raft links stay open but carry nothing, so every node sees only
// timeouts, never a connection error.
func TestBlackholeIsolatedLeader(t *testing.T) {
	inBothModes(t, testcluster.Options{Proxy: true}, func(t *testing.T, opts testcluster.Options) {
		partitionIsolatedLeader(t, opts, true)
	})
}

func partitionIsolatedLeader(t *testing.T, opts testcluster.Options, silent bool) {
	c := testcluster.Start(t, 3, opts)
	old := c.WaitForLeader(t, 10*time.Second)
	via := c.Others(old)[0]
	conn := via.Client(t)
	exec(t, conn, "CREATE TABLE p(i INTEGER)")
	exec(t, conn, "INSERT INTO p VALUES (1)")

	if silent {
		c.IsolateSilently(old)
	} else {
		c.Isolate(old)
	}
	// Raft bounds no election; these deadlines only stop a test whose
	// cluster never gets there.
	deadline := time.Now().Add(30 * time.Second)
	for {
		l := c.Leader()
		if l != nil && l != old {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the majority elected no new leader within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	exec(t, conn, "INSERT INTO p VALUES (2)")
	for deadline := time.Now().Add(30 * time.Second); ; {
		st, err := old.Status()
		if err == nil && st.State != "Leader" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("isolated leader %s did not step down (status %+v, err %v)", old.ID, st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	switch s := c.LinkStats(); {
	case silent && (s.Stalled == 0 || s.Cut+s.Refused > 0):
		t.Fatalf("silent partition stalled no Raft link, or closed one: %+v", s)
	case !silent && s.Cut+s.Refused == 0:
		t.Fatalf("partition cut no Raft link: %+v", s)
	}

	c.Heal()
	c.WaitConverged(t, 20*time.Second)
	oc := old.Client(t)
	exec(t, oc, "SET duckraft_consistency = 'any'")
	if got := queryInts(t, oc, "SELECT count(*) FROM p"); got[0] != 2 {
		t.Fatalf("old leader holds %d rows after heal, want 2", got[0])
	}
	if _, err := oc.Exec(context.Background(), "INSERT INTO p VALUES (3)"); err != nil {
		t.Fatalf("write through the healed node: %v", err)
	}
}
