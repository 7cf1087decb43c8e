package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

// cliRun runs the CLI with args and stdin, and returns its exit status,
// stdout and stderr.
func cliRun(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// TestStatementsOneByOne runs texts of several statements against a real
// duckraftd, from -c and from a script piped in: each statement runs in
// turn as DuckDB's parser splits them (a ';' in a string or a comment ends
// none), reads and writes mixed, each result printed; the first error
// stops the rest with exit status 1 and DuckDB's own message, unless
// --keep-going. Before, -c printed only the last result, refused a text
// mixing reads and writes, and a script with failing statements exited 0.
func TestStatementsOneByOne(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	server := "quack:" + c.Nodes[0].QuackAddr
	cases := []struct {
		name      string
		args      []string
		stdin     string
		code      int
		stdout    string // exactly
		stderrIn  string
		stderrOut string
	}{
		{"stop at the first error", []string{"-c", "CREATE TABLE t(a int); INSERT INTO t VALUES (1); SELECT * FROM t; SELECT * FROM nope; SELECT 2 AS two"},
			"", 1, "Count\n1\na\n1\n", "Catalog Error: Table with name nope does not exist!", "two"},
		{"keep going", []string{"--keep-going", "-c", "SELECT 1 AS one; SELECT * FROM nope; SELECT 2 AS two"},
			"", 1, "one\n1\ntwo\n2\n", "Catalog Error: Table with name nope does not exist!", ""},
		{"semicolons in strings and comments", []string{"-c", "SELECT 'a;b' AS s; -- a comment;\nSELECT 2 AS n /* ; */;"},
			"", 0, "s\na;b\nn\n2\n", "", ""},
		{"reads and writes mixed", []string{"-c", "CREATE TABLE m(a int); INSERT INTO m VALUES (1), (2); UPDATE m SET a = a + 1; SELECT sum(a) AS s FROM m"},
			"", 0, "Count\n2\nCount\n2\ns\n5\n", "", ""},
		{"DuckDB's parser error", []string{"-c", "SELEC 1"},
			"", 1, "", `Parser Error: syntax error at or near "SELEC"`, "not deterministic"},
		{"only comments", []string{"-c", "-- nothing; /* at all */ ;"}, "", 0, "", "", ""},
		{"a script stops at its first error", nil,
			"SELECT 1 AS a;\nSELECT 'x;\ny' AS b; -- ;\nSELECT * FROM nope;\nSELECT 3 AS c;\n", 1, "a\n1\nb\n\"x;\ny\"\n", "Catalog Error", ""},
		{"a script with --keep-going", []string{"--keep-going"},
			"SELECT * FROM nope;\nSELECT 3 AS c;\n", 1, "c\n3\n", "Catalog Error", ""},
		{"writes of a transaction apply at COMMIT", []string{"-c", "CREATE TABLE h(a int); BEGIN; INSERT INTO h VALUES (1); COMMIT; SELECT count(*) AS n FROM h"},
			"", 0, "n\n1\n", "applied at COMMIT", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--server", server, "--token", testcluster.Token, "--format", "csv"}, tc.args...)
			code, stdout, stderr := cliRun(t, tc.stdin, args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.code, stderr)
			}
			if stdout != tc.stdout {
				t.Errorf("stdout %q, want %q", stdout, tc.stdout)
			}
			if !strings.Contains(stderr, tc.stderrIn) {
				t.Errorf("stderr %q lacks %q", stderr, tc.stderrIn)
			}
			if tc.stderrOut != "" && strings.Contains(stderr+stdout, tc.stderrOut) {
				t.Errorf("output %q has %q", stderr+stdout, tc.stderrOut)
			}
		})
	}
}

// TestTransportChoice: the transport is plain HTTP on loopback by
// default, and --tls, DUCKRAFT_TLS and quack+https: choose TLS whatever
// the host; speaking TLS to a plain server, or plain HTTP to a TLS one
// (duckraftd --tls-cert), says so and how to choose the other.
func TestTransportChoice(t *testing.T) {
	plain := testcluster.Start(t, 1, testcluster.Options{})
	addr := plain.Nodes[0].QuackAddr
	secure := startTLSNode(t)
	cases := []struct {
		name     string
		env      string
		args     []string
		code     int
		stderrIn string
	}{
		{"default on loopback", "", []string{"--server", "quack:" + addr}, 0, ""},
		{"--no-tls", "", []string{"--server", "quack:" + addr, "--no-tls"}, 0, ""},
		{"quack+http:", "", []string{"--server", "quack+http:" + addr}, 0, ""},
		{"http URL", "", []string{"--server", "http://" + addr + "/quack"}, 0, ""},
		{"--tls to a plain server", "", []string{"--server", "quack:" + addr, "--tls"}, 1, "server at " + addr + " speaks plain HTTP, not TLS; use --no-tls"},
		{"quack+https: to a plain server", "", []string{"--server", "quack+https:" + addr}, 1, "speaks plain HTTP, not TLS"},
		{"DUCKRAFT_TLS=true to a plain server", "true", []string{"--server", "quack:" + addr}, 1, "speaks plain HTTP, not TLS"},
		{"the flag beats DUCKRAFT_TLS", "true", []string{"--server", "quack:" + addr, "--no-tls"}, 0, ""},
		{"plain HTTP to a TLS server", "", []string{"--server", "quack:" + secure}, 1, "server at " + secure + " speaks TLS (HTTPS), not plain HTTP; use --tls"},
		{"contradiction", "", []string{"--server", "quack+https:" + addr, "--no-tls"}, 2, "asks for TLS (HTTPS), but --no-tls"},
		{"--tls with --no-tls", "", []string{"--tls", "--no-tls"}, 2, "contradict"},
		{"bad DUCKRAFT_TLS", "maybe", nil, 2, `DUCKRAFT_TLS="maybe"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DUCKRAFT_TLS", tc.env)
			args := append([]string{"--token", testcluster.Token, "--format", "csv", "-c", "SELECT 42 AS answer"}, tc.args...)
			code, stdout, stderr := cliRun(t, "", args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, stderr)
			}
			if tc.code == 0 && stdout != "answer\n42\n" {
				t.Errorf("stdout %q", stdout)
			}
			if !strings.Contains(stderr, tc.stderrIn) {
				t.Errorf("stderr %q lacks %q", stderr, tc.stderrIn)
			}
		})
	}
}

// startTLSNode starts a real duckraftd serving Quack with TLS on loopback
// (--tls-cert, a self-signed certificate) and returns its address once it
// accepts connections.
func startTLSNode(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeSelfSigned(t, cert, key)
	addrs := make([]string, 4)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = l.Addr().String()
		l.Close()
	}
	cmd := exec.Command(testcluster.Binary(t), "--id", "tls1", "--data", filepath.Join(dir, "data"), "--token", testcluster.Token,
		"--quack", addrs[0], "--raft", addrs[1], "--gossip", addrs[2], "--http", addrs[3], "--tls-cert", cert, "--tls-key", key)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addrs[0], time.Second)
		if err == nil {
			c.Close()
			return addrs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("duckraftd --tls-cert did not listen on %s within 60 s", addrs[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 and its
// key as PEM files.
func writeSelfSigned(t *testing.T, certFile, keyFile string) {
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
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for file, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
