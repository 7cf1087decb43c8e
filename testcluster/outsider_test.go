package testcluster_test

import (
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/cluster"
	"github.com/duckraft/duckraft/clusterkey"
	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/testcluster"
	"github.com/duckraft/duckraft/wal"
)

// outsiderOnRaftPort (TestSharedCluster): a process holding no credential
// speaks hashicorp/raft's own TCP transport to every duckraftd's Raft port:
// AppendEntries carrying an entry, RequestVote with LeadershipTransfer and
// InstallSnapshot all fail, nothing is applied, and the leader keeps
// leading. (replication's TestOutsider* tests make the same attacks with
// the term and index a real attacker would first probe.)
func outsiderOnRaftPort(t *testing.T, c *testcluster.Cluster) {
	leader := c.WaitForLeader(t, 30*time.Second)
	conn := leader.Client(t)
	exec(t, conn, "CREATE TABLE outsider(id INTEGER)")

	out, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	data, err := wal.Batch{Commands: []wal.Command{{Entry: wal.Statement{SQL: "INSERT INTO outsider VALUES (666)"}}}}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	h := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(leader.ID), Addr: []byte(out.LocalAddr())}
	for _, n := range c.Nodes {
		id, addr := raft.ServerID(n.ID), raft.ServerAddress(n.RaftAddr)
		ae := &raft.AppendEntriesRequest{RPCHeader: h, Term: 1 << 20, PrevLogEntry: 0, PrevLogTerm: 0,
			Entries: []*raft.Log{{Index: 1, Term: 1 << 20, Type: raft.LogCommand, Data: data}}, LeaderCommitIndex: 1}
		if err := out.AppendEntries(id, addr, ae, &raft.AppendEntriesResponse{}); err == nil {
			t.Errorf("%s: outsider's AppendEntries answered", n.ID)
		}
		rv := &raft.RequestVoteRequest{RPCHeader: h, Term: 1 << 20, LastLogIndex: 1 << 30, LastLogTerm: 1 << 19, LeadershipTransfer: true}
		if err := out.RequestVote(id, addr, rv, &raft.RequestVoteResponse{}); err == nil {
			t.Errorf("%s: outsider's RequestVote answered", n.ID)
		}
		is := &raft.InstallSnapshotRequest{RPCHeader: h, SnapshotVersion: raft.SnapshotVersionMax, Term: 1 << 20,
			LastLogIndex: 1 << 30, LastLogTerm: 1 << 19, Size: 4}
		if err := out.InstallSnapshot(id, addr, is, &raft.InstallSnapshotResponse{}, strings.NewReader("junk")); err == nil {
			t.Errorf("%s: outsider's InstallSnapshot answered", n.ID)
		}
	}
	exec(t, conn, "INSERT INTO outsider VALUES (1)")
	c.WaitConverged(t, 30*time.Second)
	if got := c.WaitForLeader(t, 30*time.Second); got != leader {
		t.Errorf("leader is %s, want %s", got.ID, leader.ID)
	}
	for _, n := range c.Nodes {
		nc := n.Client(t)
		exec(t, nc, "SET duckraft_consistency = 'any'")
		if got := queryInts(t, nc, "SELECT count(*) FROM outsider WHERE id = 666"); got[0] != 0 {
			t.Errorf("%s applied the outsider's entry", n.ID)
		}
	}
}

// clientTokenCannotForward (TestSharedCluster): a client holding the token
// but not the cluster key cannot post a raw batch to the leader's write
// endpoint, which would skip the leader's checks of a client's statement.
// (The token is an admin token, which may move leadership;
// TestRolesAcrossNodes checks that lower roles cannot.)
func clientTokenCannotForward(t *testing.T, c *testcluster.Cluster) {
	leader := c.WaitForLeader(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := &nodeapi.Client{Token: testcluster.Token, Node: testcluster.Token}
	cmd := wal.Command{Entry: wal.Statement{SQL: "CREATE TABLE forwarded(x INTEGER)"}}
	if _, err := api.Write(ctx, leader.QuackAddr, cmd); nodeapi.CodeOf(err) != nodeapi.CodeUnauthorized {
		t.Errorf("forwarded write with the client token: %v, want %s", err, nodeapi.CodeUnauthorized)
	}
	conn := leader.Client(t)
	if got := queryInts(t, conn, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'forwarded'"); got[0] != 0 {
		t.Error("the client's raw batch was applied")
	}
}

// TestOperatorCertificates: nodes started with --raft-tls-cert/-key/-ca
// form a cluster on the operator's CA, and a peer holding a certificate of
// the CA derived from the cluster key (what the nodes would use without the
// flags; the first node generated it) is refused.
func TestOperatorCertificates(t *testing.T) {
	dir := t.TempDir()
	opKey := []byte("operator PKI seed for this test")
	ca, _, err := clusterkey.RaftCA(opKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := clusterkey.RaftTLS(opKey, "member")
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leaf.Certificates[0].PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*pem.Block{
		"cert.pem": {Type: "CERTIFICATE", Bytes: leaf.Certificates[0].Certificate[0]},
		"key.pem":  {Type: "PRIVATE KEY", Bytes: keyDER},
		"ca.pem":   {Type: "CERTIFICATE", Bytes: ca.Raw},
	}
	for name, block := range files {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := testcluster.Start(t, 3, testcluster.Options{Args: []string{"--raft-tls-cert", filepath.Join(dir, "cert.pem"),
		"--raft-tls-key", filepath.Join(dir, "key.pem"), "--raft-tls-ca", filepath.Join(dir, "ca.pem")}})
	leader := c.WaitForLeader(t, 30*time.Second)
	exec(t, leader.Client(t), "CREATE TABLE t AS SELECT 1 AS x")
	c.WaitConverged(t, 30*time.Second)

	// The key the first node generated, which the nodes' own CA would
	// come from.
	key, _, err := clusterkey.ReadFile(filepath.Join(c.Nodes[0].Dir, "cluster.key"))
	if err != nil {
		t.Fatal(err)
	}
	derived, err := clusterkey.RaftTLS(key, "n9")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		conn, err := tls.Dial("tcp", n.RaftAddr, derived)
		if err != nil {
			continue
		}
		// A TLS 1.3 client is done before the server checked its
		// certificate: a refusal arrives as an alert on the first read,
		// while an accepted connection stays silent until the deadline.
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
		if ne, ok := err.(net.Error); err == nil || ok && ne.Timeout() {
			t.Errorf("%s: a certificate of the derived CA was accepted (%v)", n.ID, err)
		}
	}
}

// tokenDerivedKey is the cluster key earlier releases derived from the
// client token when no --cluster-key was given: what any holder of the
// token could compute.
func tokenDerivedKey(t *testing.T, token string) []byte {
	t.Helper()
	k, err := hkdf.Key(sha256.New, []byte(token), nil, "duckraft cluster key from token", 32)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// tlsStream is a raft.StreamLayer that dials with conf: an attacker's Raft
// transport holding a member's certificate, as far as it can make one.
type tlsStream struct {
	net.Listener
	conf *tls.Config
}

func (s tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), s.conf)
}

// tokenHolderIsNoMember (TestSharedCluster): in a cluster of real duckraftd
// processes started as the README starts them — a token and no
// --cluster-key — a client holding the admin token cannot act as a member
// with the key it can derive from the token: its Raft RPCs, under a
// certificate of the CA derived from that key and the leader's ID, get no
// answer from any node; its forwarded write with the node credential
// derived from it is refused; and it cannot join gossip with the gossip key
// derived from it. Nothing it sent is applied, the leader keeps leading,
// and no node logs the cluster key.
func tokenHolderIsNoMember(t *testing.T, c *testcluster.Cluster) {
	leader := c.WaitForLeader(t, 30*time.Second)
	conn := leader.Client(t)
	exec(t, conn, "CREATE TABLE holder(id INTEGER)")
	derived := tokenDerivedKey(t, testcluster.Token)

	// Raft, as the leader.
	conf, err := clusterkey.RaftTLS(derived, leader.ID)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	out := raft.NewNetworkTransport(tlsStream{Listener: l, conf: conf}, 1, 5*time.Second, io.Discard)
	defer out.Close()
	data, err := wal.Batch{Commands: []wal.Command{{Entry: wal.Statement{SQL: "INSERT INTO holder VALUES (666)"}}}}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	h := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(leader.ID), Addr: []byte(leader.RaftAddr)}
	for _, n := range c.Nodes {
		id, addr := raft.ServerID(n.ID), raft.ServerAddress(n.RaftAddr)
		// A stale term: a member's node answers it (refusing the entries),
		// so an answer is what tells a member's connection from a refused
		// one.
		ae := &raft.AppendEntriesRequest{RPCHeader: h, Term: 1, Entries: []*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: data}}}
		var aeResp raft.AppendEntriesResponse
		if err := out.AppendEntries(id, addr, ae, &aeResp); err == nil {
			t.Errorf("%s answered the token holder's AppendEntries: %+v", n.ID, aeResp)
		}
		rv := &raft.RequestVoteRequest{RPCHeader: h, Term: 1, LastLogIndex: 1 << 30, LastLogTerm: 1}
		var rvResp raft.RequestVoteResponse
		if err := out.RequestVote(id, addr, rv, &rvResp); err == nil {
			t.Errorf("%s answered the token holder's RequestVote: %+v", n.ID, rvResp)
		}
	}

	// Node API (before gossip: a member the token holder gossiped in
	// would change what the leader accepts).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := &nodeapi.Client{Node: clusterkey.NodeAPI(derived)}
	cmd := wal.Command{Entry: wal.Statement{SQL: "CREATE TABLE forwarded(x INTEGER)"}}
	if _, err := api.Write(ctx, leader.QuackAddr, cmd); nodeapi.CodeOf(err) != nodeapi.CodeUnauthorized {
		t.Errorf("forwarded write with the node credential derived from the token: %v, want %s", err, nodeapi.CodeUnauthorized)
	}

	// Gossip.
	g, err := cluster.NewGossip(cluster.Config{
		Meta:     cluster.Meta{ID: "n9", Role: cluster.RoleVoter, RaftAddr: l.Addr().String(), QuackAddr: "127.0.0.1:1"},
		BindAddr: "127.0.0.1:0", Key: clusterkey.Gossip(derived), Timing: cluster.LoopbackTiming(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Shutdown()
	for _, n := range c.Nodes {
		if joined, err := g.Join(n.GossipAddr); err == nil || joined != 0 {
			t.Errorf("the token holder joined gossip through %s: %d, %v", n.ID, joined, err)
		}
	}
	if m := g.Members(); len(m) != 1 {
		t.Errorf("the token holder's gossip sees %d members, want itself alone", len(m))
	}

	exec(t, conn, "INSERT INTO holder VALUES (1)")
	c.WaitConverged(t, 30*time.Second)
	if got := c.WaitForLeader(t, 30*time.Second); got != leader {
		t.Errorf("leader is %s, want %s", got.ID, leader.ID)
	}
	for _, n := range c.Nodes {
		nc := n.Client(t)
		exec(t, nc, "SET duckraft_consistency = 'any'")
		if got := queryInts(t, nc, "SELECT count(*) FROM holder WHERE id = 666"); got[0] != 0 {
			t.Errorf("%s applied the token holder's entry", n.ID)
		}
		if got := queryInts(t, nc, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'forwarded'"); got[0] != 0 {
			t.Errorf("%s applied the token holder's forwarded write", n.ID)
		}
	}
	key, err := os.ReadFile(filepath.Join(c.Nodes[0].Dir, "cluster.key"))
	if err != nil {
		t.Fatalf("the bootstrap node's key file: %v", err)
	}
	for _, n := range c.Nodes {
		if strings.Contains(n.Log(), strings.TrimSpace(string(key))) {
			t.Errorf("%s logged the cluster key", n.ID)
		}
	}
}
