package clusterkey

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"os"
	"time"
)

// Errors of the Raft TLS.
var (
	// ErrNoCA is returned by LoadRaftTLS when the CA file holds no
	// certificate.
	ErrNoCA = errors.New("clusterkey: no CA certificate")
	// ErrNotMember is wrapped by the handshake error of a peer whose
	// certificate no cluster CA signed.
	ErrNotMember = errors.New("clusterkey: peer certificate is not a member's")
)

// The CA derived from a cluster key is the same on every node: its key
// comes from the cluster key, and every other field is fixed, so each
// node builds it by itself and no CA file is handed around.
var (
	caNotBefore = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	caNotAfter  = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

// leafLifetime is how long a node's own certificate is valid. It is
// issued at every start and lives in memory only.
const leafLifetime = 10 * 365 * 24 * time.Hour

// RaftCA returns the certificate authority of the Raft transport derived
// from key: an Ed25519 key pair whose seed is an expansion of key, and
// its self-signed certificate.
func RaftCA(key []byte) (*x509.Certificate, ed25519.PrivateKey, error) {
	priv := ed25519.NewKeyFromSeed(derive(key, labelRaftCA, ed25519.SeedSize))
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "duckraft raft CA"},
		NotBefore:             caNotBefore,
		NotAfter:              caNotAfter,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, priv.Public(), priv)
	if err != nil {
		return nil, nil, fmt.Errorf("raft CA: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("raft CA: %w", err)
	}
	return ca, priv, nil
}

// RaftTLS is the mutual TLS of a member's Raft transport with the CA
// derived from key: the node issues itself a certificate for id, with a
// fresh key, signed by that CA, and accepts peers whose certificates the
// same CA signed.
func RaftTLS(key []byte, id string) (*tls.Config, error) {
	ca, caKey, err := RaftCA(key)
	if err != nil {
		return nil, err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("raft certificate: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("raft certificate: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: id},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		return nil, fmt.Errorf("raft certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return mutualTLS(tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}, pool), nil
}

// LoadRaftTLS is the mutual TLS of a member's Raft transport with
// certificates an operator gives: this node's key pair (PEM files) and the
// CA that signs every member's certificate (PEM, one or more). That CA must
// sign member certificates only: any certificate it signed is a member.
func LoadRaftTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("raft TLS key pair: %w", err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("raft TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("raft TLS CA %s: %w", caFile, ErrNoCA)
	}
	return mutualTLS(cert, pool), nil
}

// mutualTLS presents cert and requires the peer, on either end, to
// present a certificate that chains to a CA in pool. Membership is the
// certificate, not a host name: Raft addresses are whatever the members
// advertise, so no name is checked.
func mutualTLS(cert tls.Certificate, pool *x509.CertPool) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAnyClientCert,
		// The client side checks the server's chain itself, in
		// VerifyConnection, without a host name.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPeer(cs.PeerCertificates, pool)
		},
	}
}

// verifyPeer checks that certs, leaf first, chain to a CA in pool.
func verifyPeer(certs []*x509.Certificate, pool *x509.CertPool) error {
	if len(certs) == 0 {
		return fmt.Errorf("%w: no certificate", ErrNotMember)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("%w: %w", ErrNotMember, err)
	}
	return nil
}
