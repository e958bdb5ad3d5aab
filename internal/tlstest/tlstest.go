// Package tlstest makes certificate authorities and the server
// certificates they sign, for tests of the API served over TLS: real
// certificates (ECDSA P-256, crypto/x509), written as PEM files where a
// configuration names them.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority of a test.
type CA struct {
	// Cert is the authority's self-signed certificate.
	Cert *x509.Certificate
	// PEM is Cert in PEM: what a client given --ca-file reads.
	PEM []byte
	key *ecdsa.PrivateKey
}

// Pair is a certificate and its private key, in PEM.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// NewCA makes a certificate authority named name, valid from an hour ago
// for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"agentqueued tests"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("tlstest: make the CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("tlstest: parse the CA: %v", err)
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Issue returns a server certificate signed by ca for hosts (IP addresses
// or DNS names), valid from an hour ago for a day.
func (ca *CA) Issue(t testing.TB, hosts ...string) Pair {
	t.Helper()
	now := time.Now()
	return ca.issue(t, now.Add(-time.Hour), now.Add(24*time.Hour), hosts)
}

// IssueExpired returns a server certificate signed by ca for hosts that
// expired an hour ago.
func (ca *CA) IssueExpired(t testing.TB, hosts ...string) Pair {
	t.Helper()
	now := time.Now()
	return ca.issue(t, now.Add(-48*time.Hour), now.Add(-time.Hour), hosts)
}

func (ca *CA) issue(t testing.TB, notBefore, notAfter time.Time, hosts []string) Pair {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: "agentqueued"},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("tlstest: issue a certificate: %v", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("tlstest: encode a key: %v", err)
	}
	return Pair{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}
}

// WriteCA writes ca's certificate to dir/ca.pem and returns its path.
func (ca *CA) WriteCA(t testing.TB, dir string) string {
	t.Helper()
	return write(t, filepath.Join(dir, "ca.pem"), ca.PEM, 0o644)
}

// Write writes the pair to dir/cert.pem (0644) and dir/key.pem (0600) and
// returns their paths.
func (p Pair) Write(t testing.TB, dir string) (cert, key string) {
	t.Helper()
	return write(t, filepath.Join(dir, "cert.pem"), p.CertPEM, 0o644), write(t, filepath.Join(dir, "key.pem"), p.KeyPEM, 0o600)
}

func write(t testing.TB, path string, data []byte, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: make a key: %v", err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatalf("tlstest: make a serial number: %v", err)
	}
	return n
}
