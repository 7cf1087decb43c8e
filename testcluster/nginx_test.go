package testcluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/testcluster"
	"github.com/duckraft/duckraft/testcluster/endpoint"
)

// TestBehindNginx puts Debian's nginx, terminating TLS with a certificate
// made for this run, in front of a real node, as docs/deploy.md shows, and
// connects the Go client over HTTPS through it: a write, a read of it, a
// request body past nginx's 1 MB default and a streamed result of several
// megabytes go through, and a client that does not trust the certificate
// is refused.
func TestBehindNginx(t *testing.T) {
	nginx := ensureNginx(t)
	c := testcluster.Start(t, 1, testcluster.Options{})
	n := c.WaitForLeader(t, 20*time.Second)

	dir := t.TempDir()
	certPEM := selfSignedCert(t, dir)
	addr := freeLoopbackAddr(t)
	conf := strings.NewReplacer("{{DIR}}", dir, "{{LISTEN}}", addr, "{{NODE}}", n.QuackAddr).Replace(nginxConf)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	startNginx(t, nginx, dir, addr)

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	useTLS := true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// A client that does not trust the certificate gets no session.
	if conn, err := client.Connect(ctx, "quack:"+addr, client.Options{Token: testcluster.Token, TLS: &useTLS}); err == nil {
		conn.Close()
		t.Fatal("a client that does not trust nginx's certificate connected")
	} else if !errors.As(err, new(*tls.CertificateVerificationError)) && !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted certificate: %v, want a certificate error", err)
	}

	conn, err := client.Connect(ctx, "quack:"+addr, client.Options{Token: testcluster.Token, TLS: &useTLS,
		TLSConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatalf("connect through nginx: %v\n%s", err, readFile(dir, "error.log"))
	}
	defer conn.Close()
	if _, err := conn.Exec(ctx, "CREATE TABLE through_nginx AS SELECT range AS i FROM range(1000)"); err != nil {
		t.Fatalf("write through nginx: %v", err)
	}
	if got := scalar(t, conn, "SELECT sum(i) FROM through_nginx"); got != "499500" {
		t.Errorf("sum through nginx = %s, want 499500", got)
	}
	// The write reached the node itself, not only a session behind nginx.
	if got := scalar(t, n.Client(t), "SELECT count(*) FROM through_nginx"); got != "1000" {
		t.Errorf("count on the node = %s, want 1000", got)
	}
	// A 2 MB statement: nginx refuses bodies over 1 MB unless
	// client_max_body_size says otherwise.
	big := strings.Repeat("x", 2<<20)
	if got := scalar(t, conn, "SELECT length('"+big+"')"); got != fmt.Sprint(len(big)) {
		t.Errorf("length of a 2 MB literal = %s", got)
	}
	// A result of several megabytes streams through unbuffered.
	if got := scalar(t, conn, "SELECT count(*) FROM (SELECT * FROM range(3000000))"); got != "3000000" {
		t.Errorf("count = %s", got)
	}
	rows, err := conn.Query(ctx, "SELECT range AS i, 'row ' || range AS s FROM range(500000)")
	if err != nil {
		t.Fatalf("large result through nginx: %v", err)
	}
	count := 0
	for rows.Next() {
		count++
	}
	if err := rows.Err(); err != nil || count != 500000 {
		t.Errorf("large result through nginx: %d rows, %v", count, err)
	}
	rows.Close()
	// And all of it went through nginx.
	if log := readFile(dir, "access.log"); strings.Count(log, "POST /quack") < 5 {
		t.Errorf("nginx logged %d Quack requests:\n%s", strings.Count(log, "POST /quack"), log)
	}
}

// scalar is the one value sql answers on conn, as text.
func scalar(t *testing.T, conn *client.Conn, sql string) string {
	t.Helper()
	rows := rowsOf(t, conn, sql)
	if len(rows) != 1 || len(rows[0]) != 1 {
		t.Fatalf("%.60s: %d rows, want one value", sql, len(rows))
	}
	return fmt.Sprint(rows[0][0])
}

// nginxConf is the nginx.conf of docs/deploy.md, reduced to one server and
// pointed at the run's directory, address and node.
const nginxConf = `daemon off;
worker_processes 1;
pid {{DIR}}/nginx.pid;
error_log {{DIR}}/error.log info;
events { worker_connections 64; }
http {
    access_log {{DIR}}/access.log;
    client_body_temp_path {{DIR}}/client_body;
    proxy_temp_path {{DIR}}/proxy;
    fastcgi_temp_path {{DIR}}/fastcgi;
    uwsgi_temp_path {{DIR}}/uwsgi;
    scgi_temp_path {{DIR}}/scgi;
    upstream duckraft {
        server {{NODE}};
        keepalive 16;
    }
    server {
        listen {{LISTEN}} ssl;
        ssl_certificate {{DIR}}/cert.pem;
        ssl_certificate_key {{DIR}}/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        client_max_body_size 256m;
        location / {
            proxy_pass http://duckraft;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 1h;
            proxy_send_timeout 1h;
        }
    }
}
`

// ensureNginx returns the nginx binary (ensureDebian).
func ensureNginx(t *testing.T) string {
	t.Helper()
	return ensureDebian(t, "nginx")
}

// ensureDebian returns the binary of Debian package pkg, which installs a
// binary of its name, installing the package when it is missing
// (endpoint.EnsureDebian). Only a machine where apt cannot install it
// skips the test, loudly.
func ensureDebian(t *testing.T, pkg string) string {
	t.Helper()
	bin, err := endpoint.EnsureDebian(pkg, "../scripts")
	if err != nil {
		t.Skipf("SKIPPED: %v\nthe test did not run", err)
	}
	return bin
}

// startNginx runs nginx in the foreground with the configuration in dir
// and waits until it completes a TLS handshake on addr. It is stopped when
// the test ends.
func startNginx(t *testing.T, bin, dir, addr string) {
	t.Helper()
	p, err := endpoint.StartNginx(bin, dir, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("--- nginx ---\n%s%s", p.Output(), readFile(dir, "error.log"))
		}
	})
}

// selfSignedCert writes cert.pem and key.pem to dir, a certificate for
// 127.0.0.1 and localhost made for this run, and returns the certificate.
func selfSignedCert(t *testing.T, dir string) []byte {
	t.Helper()
	cert, err := endpoint.SelfSignedCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// freeLoopbackAddr is a loopback address with a port free at the time.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// readFile is the content of dir/name, for failure messages.
func readFile(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, name))
	return string(b)
}
