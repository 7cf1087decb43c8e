package clusterkey

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var key = []byte("clusterkey test key, 32 bytes!!!")

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"00112233445566778899aabbccddeeff", true},
		{"00112233445566778899aabbccddeeff0011223344556677", true},
		{"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", true},
		{"", false},
		{"0011", false},
		{"zz112233445566778899aabbccddeeff", false},
		{"00112233445566778899aabbccddeeff00", false},
	} {
		k, err := Parse(tc.in)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrBadKey)) {
			t.Errorf("Parse(%q) = %x, %v", tc.in, k, err)
		}
	}
}

// TestDerivedCredentialsDiffer: each credential has its own label, and
// each depends on the key.
func TestDerivedCredentialsDiffer(t *testing.T) {
	other := []byte("another key")
	seen := map[string]string{}
	for name, v := range map[string]string{
		"gossip":        string(Gossip(key)),
		"node api":      NodeAPI(key),
		"other gossip":  string(Gossip(other)),
		"other nodeapi": NodeAPI(other),
		"session id":    string(SessionID(key)),
		"other session": string(SessionID(other)),
		"key":           string(key),
	} {
		if prev, ok := seen[v]; ok {
			t.Errorf("%s equals %s", name, prev)
		}
		seen[v] = name
	}
	if !bytes.Equal(Gossip(key), Gossip(key)) || NodeAPI(key) != NodeAPI(key) ||
		!bytes.Equal(SessionID(key), SessionID(key)) {
		t.Error("derivation is not deterministic")
	}
}

// TestRaftCADeterministic: every node derives the same CA from the key,
// so certificates one node issues verify on another.
func TestRaftCADeterministic(t *testing.T) {
	a, _, err := RaftCA(key)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := RaftCA(key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Raw, b.Raw) {
		t.Error("two derivations of the CA differ")
	}
	c, _, err := RaftCA([]byte("another key"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.RawSubjectPublicKeyInfo, c.RawSubjectPublicKeyInfo) {
		t.Error("two keys derive one CA")
	}
}

// handshake runs a TLS handshake between a client and a server config
// over loopback TCP and returns the first error of either side.
func handshake(t *testing.T, client, server *tls.Config) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	deadline := time.Now().Add(30 * time.Second)
	done := make(chan error, 1)
	go func() {
		c, err := tls.Dial("tcp", l.Addr().String(), client)
		if err == nil {
			c.SetDeadline(deadline)
			// A TLS 1.3 client finishes before the server has checked
			// its certificate; a read sees the server's verdict.
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		done <- err
	}()
	raw, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(deadline)
	s := tls.Server(raw, server)
	serr := s.Handshake()
	if serr == nil {
		s.Write([]byte{1})
	} else {
		raw.Close()
	}
	return errors.Join(serr, <-done)
}

func TestRaftTLSMutual(t *testing.T) {
	member := func(k []byte, id string) *tls.Config {
		t.Helper()
		c, err := RaftTLS(k, id)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	files := writeOperatorCerts(t)
	operator, err := LoadRaftTLS(files.cert, files.key, files.ca)
	if err != nil {
		t.Fatal(err)
	}
	noCert := member(key, "x")
	noCert.Certificates = nil
	for _, tc := range []struct {
		name           string
		client, server *tls.Config
		ok             bool
	}{
		{"two members", member(key, "n1"), member(key, "n2"), true},
		{"client of another cluster", member([]byte("other"), "n1"), member(key, "n2"), false},
		{"server of another cluster", member(key, "n1"), member([]byte("other"), "n2"), false},
		{"client without certificate", noCert, member(key, "n2"), false},
		{"operator certificates", operator, operator, true},
		{"operator CA against derived CA", operator, member(key, "n2"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := handshake(t, tc.client, tc.server); tc.ok != (err == nil) {
				t.Errorf("handshake: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestLoadRaftTLSErrors(t *testing.T) {
	files := writeOperatorCerts(t)
	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, []byte("no PEM here"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadRaftTLS(files.cert, files.key, empty); !errors.Is(err, ErrNoCA) {
		t.Errorf("CA file without a certificate: %v, want ErrNoCA", err)
	}
	if _, err := LoadRaftTLS(files.cert, files.key, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing CA file accepted")
	}
	if _, err := LoadRaftTLS(files.key, files.cert, files.ca); err == nil {
		t.Error("swapped key pair accepted")
	}
}

type certFiles struct{ cert, key, ca string }

// writeOperatorCerts writes a CA and a member certificate it signed, as an
// operator would give them, issued here from a key of the test's own.
func writeOperatorCerts(t *testing.T) certFiles {
	t.Helper()
	opKey := []byte("operator's own CA seed material")
	ca, _, err := RaftCA(opKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := RaftTLS(opKey, "op1")
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leaf.Certificates[0].PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := certFiles{cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem"), ca: filepath.Join(dir, "ca.pem")}
	for path, block := range map[string]*pem.Block{
		f.cert: {Type: "CERTIFICATE", Bytes: leaf.Certificates[0].Certificate[0]},
		f.key:  {Type: "PRIVATE KEY", Bytes: keyDER},
		f.ca:   {Type: "CERTIFICATE", Bytes: ca.Raw},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}
