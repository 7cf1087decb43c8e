package replication

import (
	"crypto/tls"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/clusterkey"
	"github.com/duckraft/duckraft/wal"
)

// outsider is a process that speaks hashicorp/raft's own TCP transport to
// the cluster's Raft ports and holds no credential.
func outsider(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// header is an RPC header claiming to come from the member id, whose ID
// an outsider can learn (gossip and the status endpoint name members).
func header(tr raft.Transport, id string) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(tr.LocalAddr())}
}

// TestOutsiderAppendEntries: an outsider's AppendEntries carrying an entry,
// at a term above the cluster's, is refused and nothing is applied.
func TestOutsiderAppendEntries(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	res := mustExec(t, leader.store, stmt("CREATE TABLE t(id INTEGER)"))
	waitApplied(t, nodes, res.Index)
	target := follower(nodes, leader)
	term := leader.store.raft.CurrentTerm()

	data, err := wal.Batch{Commands: []wal.Command{stmt("INSERT INTO t VALUES (666)")}}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	out := outsider(t)
	last := target.store.LastIndex()
	req := &raft.AppendEntriesRequest{RPCHeader: header(out, leader.id), Term: term + 1, PrevLogEntry: last, PrevLogTerm: term,
		Entries:           []*raft.Log{{Index: last + 1, Term: term + 1, Type: raft.LogCommand, Data: data}},
		LeaderCommitIndex: last + 1}
	var resp raft.AppendEntriesResponse
	if err := out.AppendEntries(raft.ServerID(target.id), raft.ServerAddress(target.addr), req, &resp); err == nil {
		t.Errorf("outsider's AppendEntries answered %+v, want it refused", resp)
	}
	assertUntouched(t, nodes, leader, term)
}

// TestOutsiderInstallSnapshot: an outsider's InstallSnapshot, carrying a
// real snapshot of another cluster's database, is refused and the
// follower keeps its own database.
func TestOutsiderInstallSnapshot(t *testing.T) {
	foreign := startCluster(t, 1, nil)[0]
	mustExec(t, foreign.store, stmt("CREATE TABLE foreign_table(x INTEGER)"))
	mustExec(t, foreign.store, stmt("INSERT INTO foreign_table VALUES (1)"))
	if err := foreign.store.Snapshot(); err != nil {
		t.Fatal(err)
	}
	snaps, err := raft.NewFileSnapshotStore(foreign.store.cfg.Dir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		t.Fatalf("foreign snapshots: %v, %v", list, err)
	}
	meta, body, err := snaps.Open(list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()

	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	res := mustExec(t, leader.store, stmt("CREATE TABLE t(id INTEGER)"))
	waitApplied(t, nodes, res.Index)
	target := follower(nodes, leader)
	term := leader.store.raft.CurrentTerm()

	out := outsider(t)
	req := &raft.InstallSnapshotRequest{RPCHeader: header(out, leader.id), SnapshotVersion: meta.Version, Term: term + 1,
		LastLogIndex: target.store.LastIndex() + 1000, LastLogTerm: term + 1, Size: meta.Size,
		Configuration:      raft.EncodeConfiguration(meta.Configuration),
		ConfigurationIndex: meta.ConfigurationIndex}
	var resp raft.InstallSnapshotResponse
	if err := out.InstallSnapshot(raft.ServerID(target.id), raft.ServerAddress(target.addr), req, &resp, body); err == nil {
		t.Errorf("outsider's InstallSnapshot answered %+v, want it refused", resp)
	}
	if got := queryInt(t, target.db, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'foreign_table'"); got != 0 {
		t.Errorf("%s holds the foreign database", target.id)
	}
	assertUntouched(t, nodes, leader, term)
}

// TestOutsiderLeadershipTransfer: an outsider's RequestVote with
// LeadershipTransfer set, at a higher term, does not depose the leader.
func TestOutsiderLeadershipTransfer(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	term := leader.store.raft.CurrentTerm()
	out := outsider(t)
	req := &raft.RequestVoteRequest{RPCHeader: header(out, follower(nodes, leader).id), Term: term + 1,
		LastLogIndex: leader.store.LastIndex() + 1000, LastLogTerm: term, LeadershipTransfer: true}
	var resp raft.RequestVoteResponse
	if err := out.RequestVote(raft.ServerID(leader.id), raft.ServerAddress(leader.addr), req, &resp); err == nil {
		t.Errorf("outsider's RequestVote answered %+v, want it refused", resp)
	}
	assertUntouched(t, nodes, leader, term)
}

// follower returns a node of nodes that is not leader.
func follower(nodes []*testNode, leader *testNode) *testNode {
	for _, n := range nodes {
		if n != leader {
			return n
		}
	}
	return nil
}

// assertUntouched checks that leader still leads in term, and that a write
// through it reaches every node and no row 666 exists anywhere.
func assertUntouched(t *testing.T, nodes []*testNode, leader *testNode, term uint64) {
	t.Helper()
	// Give a deposed leader time to show it: an election takes well
	// under this on loopback.
	time.Sleep(2 * time.Second)
	if got := waitLeader(t, nodes); got != leader {
		t.Errorf("leader is %s, want %s", got.id, leader.id)
	}
	for _, n := range nodes {
		if got := n.store.raft.CurrentTerm(); got != term {
			t.Errorf("%s: term %d, want %d", n.id, got, term)
		}
	}
	res := mustExec(t, waitLeader(t, nodes).store, stmt("CREATE TABLE IF NOT EXISTS t(id INTEGER)"))
	waitApplied(t, nodes, res.Index)
	for _, n := range nodes {
		if got := queryInt(t, n.db, "SELECT count(*) FROM t WHERE id = 666"); got != 0 {
			t.Errorf("%s applied the outsider's entry", n.id)
		}
	}
}

// tlsTransport is a raft transport over the member stream layer with conf:
// what a member speaks, or, with another CA's certificate, an outsider who
// speaks it too.
func tlsTransport(t *testing.T, conf *tls.Config) *raft.NetworkTransport {
	t.Helper()
	layer, err := newTLSStreamLayer("127.0.0.1:0", nil, conf, handshakeTimeout, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: layer, MaxPool: 1, Timeout: 5 * time.Second})
	t.Cleanup(func() { tr.Close() })
	return tr
}

// TestRaftTLSPeers: only a peer whose certificate the cluster's CA signed
// gets an answer from a Raft port.
func TestRaftTLSPeers(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	target := follower(nodes, leader)
	foreign, err := clusterkey.RaftTLS([]byte("another cluster's key, 32 bytes!"), leader.id)
	if err != nil {
		t.Fatal(err)
	}
	noCert := memberTLS(t, leader.id)
	noCert.Certificates = nil
	for _, tc := range []struct {
		name   string
		conf   *tls.Config
		member bool
	}{
		{"member certificate", memberTLS(t, leader.id), true},
		{"certificate of another CA", foreign, false},
		{"no certificate", noCert, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := tlsTransport(t, tc.conf)
			// A vote request at the current term changes nothing: the
			// follower has voted in it already.
			term := leader.store.raft.CurrentTerm()
			req := &raft.RequestVoteRequest{RPCHeader: header(tr, leader.id), Term: term, LastLogIndex: 0, LastLogTerm: 0}
			var resp raft.RequestVoteResponse
			err := tr.RequestVote(raft.ServerID(target.id), raft.ServerAddress(target.addr), req, &resp)
			switch {
			case tc.member && err != nil:
				t.Errorf("member's RequestVote: %v", err)
			case tc.member && resp.Term != term:
				t.Errorf("member's RequestVote answered term %d, want %d", resp.Term, term)
			case !tc.member && err == nil:
				t.Errorf("RequestVote answered %+v, want it refused", resp)
			}
		})
	}
	assertUntouched(t, nodes, leader, leader.store.raft.CurrentTerm())
}

// TestAbsurdTerm: a member's RPC whose term is far beyond the current one
// is refused, and the cluster keeps electing and writing, across a
// restart of every node.
func TestAbsurdTerm(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	res := mustExec(t, leader.store, stmt("CREATE TABLE t(id INTEGER)"))
	waitApplied(t, nodes, res.Index)
	term := leader.store.raft.CurrentTerm()
	tr := tlsTransport(t, memberTLS(t, leader.id))
	for _, absurd := range []uint64{1<<63 + 12345, 1 << 62, term + maxTermJump + 1, ^uint64(0)} {
		for _, n := range nodes {
			vote := &raft.RequestVoteRequest{RPCHeader: header(tr, follower(nodes, n).id), Term: absurd,
				LastLogIndex: n.store.LastIndex() + 1000, LastLogTerm: term, LeadershipTransfer: true}
			var vresp raft.RequestVoteResponse
			if err := tr.RequestVote(raft.ServerID(n.id), raft.ServerAddress(n.addr), vote, &vresp); err == nil {
				t.Errorf("%s: RequestVote at term %d answered %+v, want it refused", n.id, absurd, vresp)
			}
			// An AppendEntries without entries takes raft's heartbeat
			// fast path.
			hb := &raft.AppendEntriesRequest{RPCHeader: header(tr, leader.id), Term: absurd, Leader: []byte(tr.LocalAddr())}
			var aresp raft.AppendEntriesResponse
			if err := tr.AppendEntries(raft.ServerID(n.id), raft.ServerAddress(n.addr), hb, &aresp); err == nil {
				t.Errorf("%s: heartbeat at term %d answered %+v, want it refused", n.id, absurd, aresp)
			}
			pre := &raft.RequestPreVoteRequest{RPCHeader: header(tr, follower(nodes, n).id), Term: absurd,
				LastLogIndex: n.store.LastIndex() + 1000, LastLogTerm: term}
			var presp raft.RequestPreVoteResponse
			if err := tr.RequestPreVote(raft.ServerID(n.id), raft.ServerAddress(n.addr), pre, &presp); err == nil {
				t.Errorf("%s: RequestPreVote at term %d answered %+v, want it refused", n.id, absurd, presp)
			}
		}
	}
	for _, n := range nodes {
		if got := n.store.raft.CurrentTerm(); got >= maxTermJump {
			t.Errorf("%s: term %d after the absurd RPCs", n.id, got)
		}
	}
	mustExec(t, waitLeader(t, nodes).store, stmt("INSERT INTO t VALUES (1)"))

	// Every node restarts; the cluster elects a leader again and writes.
	for _, n := range nodes {
		n.stop(t, false)
	}
	for _, n := range nodes {
		n.start(t, false)
	}
	res = mustExec(t, waitLeader(t, nodes).store, stmt("INSERT INTO t VALUES (2)"))
	waitApplied(t, nodes, res.Index)
	for _, n := range nodes {
		if got := queryInt(t, n.db, "SELECT count(*) FROM t"); got != 2 {
			t.Errorf("%s: %d rows, want 2", n.id, got)
		}
		if got := n.store.raft.CurrentTerm(); got >= maxTermJump {
			t.Errorf("%s: term %d after restart", n.id, got)
		}
	}
}
