package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
)

// tlsListener wraps l to serve HTTPS with the given key pair.
func tlsListener(l net.Listener, certFile, keyFile string) (net.Listener, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("load TLS key pair: %w", err)
	}
	return tls.NewListener(l, &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	}), nil
}

// peerTLS is the client side of the nodes' HTTPS: it trusts the system's
// roots and every certificate in certFile, so that a cluster whose nodes
// share one self-signed certificate (or carry their CA in the file) can
// forward writes and route reads to each other.
func peerTLS(certFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("read TLS certificate: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("TLS certificate %s: no PEM certificate in it", certFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
