package replication

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestTransferLeadership(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	mustExec(t, leader.store, stmt("CREATE TABLE t(i INTEGER)"))
	var follower *testNode
	for _, n := range nodes {
		if n != leader {
			follower = n
			break
		}
	}

	var notLeader *NotLeaderError
	if err := follower.store.TransferLeadership(""); !errors.As(err, &notLeader) || notLeader.LeaderID != leader.id {
		t.Fatalf("transfer on a follower: %v, want a NotLeaderError naming %s", err, leader.id)
	}
	if err := leader.store.TransferLeadership("nobody"); !errors.Is(err, ErrNoSuchVoter) {
		t.Fatalf("transfer to an unknown server: %v, want ErrNoSuchVoter", err)
	}
	if err := leader.store.TransferLeadership(leader.id); err != nil || !leader.store.IsLeader() {
		t.Fatalf("transfer to itself: %v, leader %v", err, leader.store.IsLeader())
	}

	start := time.Now()
	if err := leader.store.TransferLeadership(follower.id); err != nil {
		t.Fatal(err)
	}
	// TransferLeadership waits for the new leader's first heartbeat, for
	// at most two election timeouts: only after those may the old leader
	// still not know who took over.
	took := time.Since(start)
	switch got := leader.store.LeaderID(); {
	case got == "" && took < 2*leader.store.cfg.ElectionTimeout:
		t.Fatalf("transfer returned after %v with no leader known", took)
	case got == "":
		t.Logf("no leader known %v after the transfer began: the wait for its heartbeat ran out", took)
		waitFor(t, 10*time.Second, "the old leader to learn the new one", func() bool { return leader.store.LeaderID() != "" })
	}
	if got := leader.store.LeaderID(); got != follower.id {
		t.Fatalf("old leader reports leader %q after the transfer, want %s", got, follower.id)
	}
	if now := waitLeader(t, nodes); now != follower {
		t.Fatalf("leader after transfer to %s is %s", follower.id, now.id)
	}
	mustExec(t, follower.store, stmt("INSERT INTO t VALUES (1)"))

	if err := follower.store.TransferLeadership(""); err != nil {
		t.Fatal(err)
	}
	now := waitLeader(t, nodes)
	if now == follower {
		t.Fatalf("%s still leads after transferring to any voter", follower.id)
	}
	if r := mustExec(t, now.store, stmt("INSERT INTO t VALUES (2)")); r.RowsChanged != 1 {
		t.Fatalf("write on the new leader changed %d rows", r.RowsChanged)
	}
}

func TestTransferLeadershipAlone(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	if err := waitLeader(t, nodes).store.TransferLeadership(""); !errors.Is(err, ErrNoSuchVoter) {
		t.Fatalf("transfer in a cluster of one: %v, want ErrNoSuchVoter", err)
	}
}

// A strong read that arrives while the leader is handing over waits for the
// outcome instead of failing: here the target is down and behind, so raft
// waits to catch it up until the transfer times out, and the read is served
// by the leader that stayed.
func TestReadIndexWaitsOutTransfer(t *testing.T) {
	// Raft gives up on the transfer after an election timeout: the test
	// must see it in progress within that window, and a loaded machine
	// can stall it for longer than the default 500 ms.
	const transferFor = 5 * time.Second
	nodes := startCluster(t, 3, func(c *Config) { c.ElectionTimeout = transferFor })
	leader := waitLeader(t, nodes)
	var target *testNode
	for _, n := range nodes {
		if n != leader {
			target = n
			break
		}
	}
	target.stop(t, false)
	mustExec(t, leader.store, stmt("CREATE TABLE t(i INTEGER)"))

	transferred := make(chan error, 1)
	go func() { transferred <- leader.store.TransferLeadership(target.id) }()
	waitFor(t, transferFor, "the transfer to start", func() bool {
		return errors.Is(leader.store.raft.Barrier(time.Second).Error(), raft.ErrLeadershipTransferInProgress)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 6*transferFor)
	defer cancel()
	if _, err := leader.store.ReadIndex(ctx); err != nil {
		t.Fatalf("strong read during a transfer: %v", err)
	}
	if err := <-transferred; err == nil {
		t.Fatalf("transfer to stopped %s succeeded", target.id)
	}
	if !leader.store.IsLeader() {
		t.Fatalf("%s lost leadership", leader.id)
	}
}
