// Package endpoint runs the load balancers of docs/deploy.md's "one
// endpoint" in front of a cluster's nodes, configured by the files in
// deploy/ as they are, with only their addresses (and nginx's
// certificate) put in: Debian's nginx, round robin with no stickiness and
// TLS (deploy/nginx-one-endpoint.conf), and Debian's HAProxy, which keeps
// a session on its node by the affinity cookie and checks each node's
// /readyz (deploy/haproxy.cfg). Either is installed when missing
// (scripts/ensure-deb.sh).
//
// The one-endpoint tests and duckraft-bench failover --via share it; it
// does not import testing, so that the benchmark command may.
package endpoint

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/duckraft/duckraft/internal/freeport"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
)

// The balancers Start runs.
const (
	Nginx   = "nginx"
	HAProxy = "haproxy"
)

// Backend is one node behind the balancer.
type Backend struct {
	// ID is the node's --id, which HAProxy's cookie names.
	ID string
	// QuackAddr is where it serves Quack, HTTPAddr its operations
	// address (--http), whose /readyz HAProxy checks.
	QuackAddr, HTTPAddr string
}

// Options configures Start.
type Options struct {
	// Kind is Nginx or HAProxy.
	Kind string
	// Root is the repository's root, which holds deploy/ and scripts/.
	Root string
	// Dir is a directory for the balancer's configuration, certificate
	// and logs; it must exist.
	Dir      string
	Backends []Backend
}

// Balancer is a running load balancer.
type Balancer struct {
	Kind string
	// Addr is where it listens, 127.0.0.1:PORT.
	Addr string
	// roots trusts nginx's certificate; nil for HAProxy, which serves
	// plain HTTP.
	roots *x509.CertPool
	dir   string
	proc  *Process
}

// Start runs the balancer opts names in front of opts.Backends, installing
// it when missing, and returns once it serves.
func Start(opts Options) (*Balancer, error) {
	if len(opts.Backends) != 3 {
		return nil, fmt.Errorf("endpoint: deploy/'s configurations name 3 nodes, not %d", len(opts.Backends))
	}
	bin, err := EnsureDebian(opts.Kind, filepath.Join(opts.Root, "scripts"))
	if err != nil {
		return nil, err
	}
	addr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	b := &Balancer{Kind: opts.Kind, Addr: addr, dir: opts.Dir}
	switch opts.Kind {
	case Nginx:
		err = b.startNginx(bin, opts)
	case HAProxy:
		err = b.startHAProxy(bin, opts)
	default:
		return nil, fmt.Errorf("endpoint: %q is neither %s nor %s", opts.Kind, Nginx, HAProxy)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Balancer) startNginx(bin string, opts Options) error {
	certPEM, err := SelfSignedCert(opts.Dir)
	if err != nil {
		return err
	}
	b.roots = x509.NewCertPool()
	b.roots.AppendCertsFromPEM(certPEM)
	subst := map[string]string{
		"listen 443 ssl;":                  "listen " + b.Addr + " ssl;",
		"/etc/duckraft/tls/fullchain.pem;": filepath.Join(opts.Dir, "cert.pem;"),
		"/etc/duckraft/tls/privkey.pem;":   filepath.Join(opts.Dir, "key.pem;"),
	}
	for i, n := range opts.Backends {
		subst[fmt.Sprintf("10.0.0.1%d:9494", i+1)] = n.QuackAddr
	}
	conf, err := DeployFile(opts.Root, "nginx-one-endpoint.conf", subst)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(opts.Dir, "duckraft.conf"), []byte(conf), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(opts.Dir, "nginx.conf"), []byte(NginxMain(opts.Dir, "include "+filepath.Join(opts.Dir, "duckraft.conf")+";")), 0o600); err != nil {
		return err
	}
	b.proc, err = StartNginx(bin, opts.Dir, b.Addr)
	return err
}

func (b *Balancer) startHAProxy(bin string, opts Options) error {
	subst := map[string]string{"bind :9494": "bind " + b.Addr}
	for i, n := range opts.Backends {
		_, port, err := net.SplitHostPort(n.HTTPAddr)
		if err != nil {
			return fmt.Errorf("endpoint: %s's operations address %q: %w", n.ID, n.HTTPAddr, err)
		}
		subst[fmt.Sprintf("10.0.0.1%d:9494 cookie n%d check port 9497", i+1, i+1)] =
			fmt.Sprintf("%s cookie %s check port %s", n.QuackAddr, n.ID, port)
	}
	conf, err := DeployFile(opts.Root, "haproxy.cfg", subst)
	if err != nil {
		return err
	}
	cfg := filepath.Join(opts.Dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		return err
	}
	if out, err := exec.Command(bin, "-c", "-f", cfg).CombinedOutput(); err != nil {
		return fmt.Errorf("haproxy -c: %v\n%s", err, out)
	}
	p, err := StartProcess(exec.Command(bin, "-db", "-f", cfg), "haproxy")
	if err != nil {
		return err
	}
	if err := p.waitDial(b.Addr, nil); err != nil {
		p.Stop()
		return err
	}
	b.proc = p
	// Its first checks run within a second or two (inter 1s, rise 2).
	time.Sleep(3 * time.Second)
	return nil
}

// Server is the address a client connects to.
func (b *Balancer) Server() string { return "quack:" + b.Addr }

// ClientOptions are the options of a client of generation g that
// connects through b with token: HTTPS trusting nginx's certificate, or
// plain HTTP to HAProxy, where a Q3 client keeps the affinity cookie, as
// DuckDB 2.0's does, and a Q1 client none, as DuckDB 1.5's.
func (b *Balancer) ClientOptions(token string, g wire.Generation) client.Options {
	useTLS := b.roots != nil
	opts := client.Options{Token: token, Generation: g, TLS: &useTLS}
	if useTLS {
		opts.TLSConfig = &tls.Config{RootCAs: b.roots, MinVersion: tls.VersionTLS12}
	}
	if b.Kind == HAProxy && g == wire.Q3 {
		jar, _ := cookiejar.New(nil)
		opts.HTTPClient = &http.Client{Jar: jar, Transport: &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}}
	}
	return opts
}

// Log is what the balancer printed, and nginx's error log.
func (b *Balancer) Log() string {
	s := b.proc.Output()
	if b.Kind == Nginx {
		s += ReadFile(b.dir, "error.log")
	}
	return s
}

// Requests counts the Quack requests nginx logged; 0 for HAProxy, which
// logs none with deploy/haproxy.cfg.
func (b *Balancer) Requests() int {
	return strings.Count(ReadFile(b.dir, "access.log"), "POST /quack")
}

// Close stops the balancer.
func (b *Balancer) Close() { b.proc.Stop() }

// DeployFile is the file name of root/deploy, with each key of subst,
// which must occur in it, replaced by its value.
func DeployFile(root, name string, subst map[string]string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "deploy", name))
	if err != nil {
		return "", fmt.Errorf("endpoint: %w (deploy/ is read from the repository's root)", err)
	}
	s := string(data)
	for k, v := range subst {
		if !strings.Contains(s, k) {
			return "", fmt.Errorf("endpoint: deploy/%s holds no %q: the file and the code that fills it in drifted apart", name, k)
		}
		s = strings.ReplaceAll(s, k, v)
	}
	return s, nil
}

// NginxMain is an nginx.conf that keeps everything nginx writes in dir and
// runs in the foreground with one worker, with http holding the http
// context's directives (a server of its own, or an include).
func NginxMain(dir, http string) string {
	return strings.NewReplacer("{{DIR}}", dir, "{{HTTP}}", http).Replace(`daemon off;
worker_processes 1;
pid {{DIR}}/nginx.pid;
error_log {{DIR}}/error.log info;
events { worker_connections 1024; }
http {
    access_log {{DIR}}/access.log;
    client_body_temp_path {{DIR}}/client_body;
    proxy_temp_path {{DIR}}/proxy;
    fastcgi_temp_path {{DIR}}/fastcgi;
    uwsgi_temp_path {{DIR}}/uwsgi;
    scgi_temp_path {{DIR}}/scgi;
    {{HTTP}}
}
`)
}

// StartNginx runs nginx with dir/nginx.conf until Stop, and waits until
// it completes a TLS handshake on addr.
func StartNginx(bin, dir, addr string) (*Process, error) {
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "error.log"))
	p, err := StartProcess(cmd, "nginx")
	if err != nil {
		return nil, err
	}
	if err := p.waitDial(addr, func() string { return ReadFile(dir, "error.log") }); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// waitDial waits up to 30 s until addr accepts a connection (a TLS
// handshake when more, nginx's error log, is given), or p exits.
func (p *Process) waitDial(addr string, more func() string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var conn net.Conn
		var err error
		if more != nil {
			conn, err = tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
		} else {
			conn, err = net.DialTimeout("tcp", addr, time.Second)
		}
		if err == nil {
			conn.Close()
			return nil
		}
		log := p.Output()
		if more != nil {
			log += more()
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited at start:\n%s", p.name, log)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer on %s within 30s: %v\n%s", p.name, addr, err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// EnsureDebian returns the binary of Debian package pkg, which installs a
// binary of its name, installing the package with scripts/ensure-deb.sh
// (in the directory scripts) when it is missing.
func EnsureDebian(pkg, scripts string) (string, error) {
	find := func() string {
		if p, err := exec.LookPath(pkg); err == nil {
			return p
		}
		if _, err := os.Stat("/usr/sbin/" + pkg); err == nil {
			return "/usr/sbin/" + pkg
		}
		return ""
	}
	if p := find(); p != "" {
		return p, nil
	}
	out, err := exec.Command(filepath.Join(scripts, "ensure-deb.sh"), pkg).CombinedOutput()
	if p := find(); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("%s is not installed and apt-get could not install it (%v):\n%s\ninstall it: apt-get install -y %s", pkg, err, out, pkg)
}

// Process is a program started in a process group of its own, so that its
// workers go with it.
type Process struct {
	name   string
	cmd    *exec.Cmd
	out    *lockedBuilder
	exited chan struct{}
}

// StartProcess starts cmd in a process group of its own; name names it in
// errors.
func StartProcess(cmd *exec.Cmd, name string) (*Process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &Process{name: name, cmd: cmd, out: &lockedBuilder{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Output is what the process printed so far.
func (p *Process) Output() string { return p.out.String() }

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Stop ends the process group: SIGTERM, then SIGKILL after 15 s.
func (p *Process) Stop() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// lockedBuilder collects a process's output from its goroutines.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// SelfSignedCert writes cert.pem and key.pem to dir, a certificate for
// 127.0.0.1 and localhost made for this run, and returns the certificate.
func SelfSignedCert(dir string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "duckraft one endpoint"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), certPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	return certPEM, nil
}

// ReadFile is the content of dir/name, or "" when it cannot be read: for
// logs shown on failure.
func ReadFile(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, name))
	return string(b)
}
