package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestJoinChangesServersInPlace: the reconciler demotes a dead voter and
// promotes it once it is back and caught up. Both go through Join, which
// used to remove the server and add it again; the divergence hunter found
// that removal crashing the promoted node (see TestStaleSnapshotRefused).
// The server must stay in the configuration throughout.
func TestJoinChangesServersInPlace(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	target := follower(nodes, leader)
	obs := make(chan raft.Observation, 64)
	observer := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.PeerObservation)
		return ok
	})
	leader.store.raft.RegisterObserver(observer)
	defer leader.store.raft.DeregisterObserver(observer)

	for _, voter := range []bool{false, true, false, true} {
		if err := leader.store.Join(target.id, target.addr, voter); err != nil {
			t.Fatal(err)
		}
		servers, err := leader.store.Configuration()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range servers {
			if s.ID == target.id {
				found = true
				if s.Voter != voter || s.Addr != target.addr {
					t.Errorf("after Join(voter=%v): %+v", voter, s)
				}
			}
		}
		if !found || len(servers) != 3 {
			t.Errorf("after Join(voter=%v): %+v", voter, servers)
		}
	}
	for {
		select {
		case o := <-obs:
			if p := o.Data.(raft.PeerObservation); p.Removed {
				t.Errorf("Join removed %s from the configuration", p.Peer.ID)
			}
			continue
		default:
		}
		break
	}
}

// TestStaleSnapshotRefused sends a follower, as its leader, a real snapshot
// of the cluster older than the follower's state, after the follower
// compacted its log past it: what a leader's replication of a server it
// removed and added back sends (hashicorp/raft#697). raft would install it,
// roll the follower's database back and panic on the next entry it applies
// ("log not found"), which the divergence hunter saw. The follower must
// refuse it and keep replicating.
func TestStaleSnapshotRefused(t *testing.T) {
	// Snapshots only when the test takes them, short trailing logs.
	manual := func(c *Config) {
		c.SnapshotThreshold, c.TrailingLogs, c.SnapshotInterval = 1<<20, 8, time.Hour
	}
	nodes := startCluster(t, 3, manual)
	leader := waitLeader(t, nodes)
	target := follower(nodes, leader)
	insert := func(from, to int) {
		t.Helper()
		var last uint64
		for i := from; i < to; i++ {
			last = execOnLeader(t, nodes, stmt(fmt.Sprintf("INSERT INTO t VALUES (%d)", i))).Index
		}
		waitApplied(t, nodes, last)
	}
	execOnLeader(t, nodes, stmt("CREATE TABLE t(i INTEGER PRIMARY KEY)"))
	insert(0, 50)
	// The follower's snapshots come one before and one after the stale one,
	// so that raft keeps the stale one when it reaps down to two.
	if err := target.store.Snapshot(); err != nil {
		t.Fatal(err)
	}
	insert(50, 60)
	if err := leader.store.Snapshot(); err != nil {
		t.Fatal(err)
	}
	meta, body := latestSnapshot(t, leader)
	insert(60, 201)
	if err := target.store.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if first, err := target.store.logs.FirstIndex(); err != nil || first <= meta.Index+1 {
		t.Fatalf("%s's log starts at %d (%v), not past the snapshot at %d", target.id, first, err, meta.Index)
	}

	tr := tlsTransport(t, memberTLS(t, leader.id))
	req := &raft.InstallSnapshotRequest{
		RPCHeader:       raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(leader.id), Addr: []byte(leader.addr)},
		SnapshotVersion: meta.Version, Term: leader.store.raft.CurrentTerm(), Leader: []byte(leader.addr),
		LastLogIndex: meta.Index, LastLogTerm: meta.Term, Size: meta.Size,
		Configuration: raft.EncodeConfiguration(meta.Configuration), ConfigurationIndex: meta.ConfigurationIndex}
	var resp raft.InstallSnapshotResponse
	err := tr.InstallSnapshot(raft.ServerID(target.id), raft.ServerAddress(target.addr), req, &resp, bytes.NewReader(body))
	if err == nil || !strings.Contains(err.Error(), ErrStaleSnapshot.Error()) {
		t.Errorf("stale snapshot answered %+v, %v; want %v", resp, err, ErrStaleSnapshot)
	}

	var last uint64
	for i := 201; i <= 260; i++ {
		last = execOnLeader(t, nodes, stmt(fmt.Sprintf("INSERT INTO t VALUES (%d)", i))).Index
	}
	waitApplied(t, nodes, last)
	ctx := context.Background()
	want, err := leader.store.StateHash(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := n.store.WaitForApplied(ctx, want.Index); err != nil {
			t.Fatal(err)
		}
		if got, err := n.store.StateHash(ctx); err != nil || (got.Index == want.Index && got.Hash != want.Hash) {
			t.Errorf("%s: %+v, %v; leader %+v", n.id, got, err, want)
		}
	}
	if got := queryInt(t, target.db, "SELECT count(*) FROM t"); got != 261 {
		t.Errorf("%s has %d rows, want 261", target.id, got)
	}
}

// latestSnapshot returns the newest snapshot of n, read into memory: raft
// reaps old snapshots as new ones are taken.
func latestSnapshot(t *testing.T, n *testNode) (*raft.SnapshotMeta, []byte) {
	t.Helper()
	snaps, err := raft.NewFileSnapshotStore(n.store.cfg.Dir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		t.Fatalf("snapshots of %s: %v, %v", n.id, list, err)
	}
	meta, rc, err := snaps.Open(list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	body, err := io.ReadAll(rc)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return meta, body
}
