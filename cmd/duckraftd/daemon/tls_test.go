package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/duckraft/duckraft/cluster"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key,
// and returns their files and a pool that trusts it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "duckraft test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// A cluster whose nodes serve HTTPS forwards writes from a follower to the
// leader and routes reads between nodes over HTTPS: nodes used to build
// http:// URLs for each other whatever they served.
func TestTLSClusterForwardsWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Raft and gossip")
	}
	certFile, keyFile, pool := selfSigned(t)
	// n2 joins with a copy of the key n1 generated.
	start := func(id, join, clusterKeyFile string) *Daemon {
		t.Helper()
		d, err := Start(Config{ID: id, DataDir: t.TempDir(), QuackAddr: freeAddr(t), RaftAddr: freeAddr(t),
			GossipAddr: freeAddr(t), Join: join, ClusterKeyFile: clusterKeyFile, Token: "tls-test-token-0123", Voters: 2,
			GossipTiming: cluster.LoopbackTiming(), TLSCert: certFile, TLSKey: keyFile})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	n1 := start("n1", "", "")
	n2 := start("n2", n1.cfg.GossipAddr, n1.KeyFile())

	yes := true
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, "quack:"+n2.QuackAddr(), client.Options{Token: n2.Token(), Generation: wire.Q1,
		TLS: &yes, TLSConfig: &tls.Config{RootCAs: pool}})
	if err != nil {
		t.Fatalf("connect over TLS: %v", err)
	}
	defer c.Close()
	// n2 forwards once it knows the leader; until then the write waits
	// (LeaderWait) and may fail, so it is retried while the cluster forms.
	for {
		_, err := c.Exec(ctx, "CREATE TABLE IF NOT EXISTS t AS SELECT 42 AS i")
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("write through the follower over TLS: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n2.store.IsLeader() {
		t.Fatal("n2 leads: the write was not forwarded, so this tests nothing")
	}
	rows, err := c.Query(ctx, "SELECT i FROM t")
	if err != nil {
		t.Fatalf("read after the forwarded write: %v", err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("no row after the forwarded write: %v", rows.Err())
	}
	if v, err := rows.Values(); err != nil || v[0] != int32(42) {
		t.Fatalf("read %v, %v; want 42", v, err)
	}
}
