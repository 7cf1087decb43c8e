package node_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/wire"
)

func TestExternalAccessOffByDefault(t *testing.T) {
	addr, _ := startServer(t, nil)
	c := connect(t, addr, wire.Q1)
	for _, sql := range []string{
		"SELECT * FROM read_csv('/etc/passwd')",
		"ATTACH '/tmp/other.db' AS other",
		"INSTALL httpfs",
		"COPY (SELECT 1) TO '/tmp/duckraft-leak.csv'",
	} {
		if _, err := c.Exec(context.Background(), sql); err == nil {
			t.Errorf("%s: succeeded with external access off", sql)
		}
	}
}

func TestSQLAuthorizer(t *testing.T) {
	db, err := engine.Open(t.TempDir()+"/auth.db", engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(),
		`CREATE MACRO only_reads(sid, q) AS NOT regexp_matches(lower(q), '^\s*(insert|update|delete|create|drop)')`); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	db.Close()
	// Reopen the same file behind a server that consults the macro.
	path := db.Path()
	db, err = engine.Open(path, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	srv, err := node.New(node.Config{DB: db, Authenticator: node.TokenAuth{Token: testToken},
		Authorizer: node.SQLAuthorizer{DB: db, Function: "only_reads"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	c := connect(t, "quack:"+l.Addr().String(), wire.Q1)
	if got := queryRows(t, c, "SELECT 1"); len(got) != 1 {
		t.Fatalf("read refused: %v", got)
	}
	_, err = c.Exec(context.Background(), "CREATE TABLE x(i INTEGER)")
	var se *client.ServerError
	if !errors.As(err, &se) || se.Message != "Authorization failed" {
		t.Fatalf("write: got %v, want Authorization failed", err)
	}
}

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestTLS(t *testing.T) {
	db, err := engine.Open("", engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	srv, err := node.New(node.Config{DB: db, Authenticator: node.TokenAuth{Token: testToken}})
	if err != nil {
		t.Fatal(err)
	}
	cert := selfSigned(t)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	pool := x509.NewCertPool()
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	pool.AddCert(leaf)
	on := true
	c, err := client.Connect(context.Background(), "quack:"+l.Addr().String(),
		client.Options{Token: testToken, TLS: &on, TLSConfig: &tls.Config{RootCAs: pool}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Exec(context.Background(), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	// Plain HTTP to the TLS port fails cleanly.
	off := false
	if _, err := client.Connect(context.Background(), "quack:"+l.Addr().String(),
		client.Options{Token: testToken, TLS: &off}); err == nil || !strings.Contains(err.Error(), "quack connect") {
		t.Fatalf("plain HTTP to a TLS port: %v", err)
	}
}
