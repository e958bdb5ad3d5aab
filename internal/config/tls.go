package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"
)

// LoadCertificate reads api.tls_cert and api.tls_key and returns the
// pair the API serves, or an error naming the key at fault: a file that
// cannot be read, a certificate file without a certificate, a key file
// every user may read, a key that is not the certificate's, or a
// certificate not valid at now (expired, or not yet valid). The daemon
// calls it once at start: a certificate renewed later takes a restart.
func (a APIConfig) LoadCertificate(now time.Time) (tls.Certificate, error) {
	if !a.TLS() {
		return tls.Certificate{}, errors.New("config: api.tls_cert and api.tls_key: not set")
	}
	certPEM, err := os.ReadFile(a.TLSCert)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("config: api.tls_cert: %w", err)
	}
	leaf, err := firstCertificate(certPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("config: api.tls_cert: %s: %w", a.TLSCert, err)
	}
	fi, err := os.Stat(a.TLSKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("config: api.tls_key: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o004 != 0 {
		return tls.Certificate{}, fmt.Errorf("config: api.tls_key: %s is readable by every user (mode %04o): "+
			"chmod 600 it (640 for a group that must read it)", a.TLSKey, perm)
	}
	keyPEM, err := os.ReadFile(a.TLSKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("config: api.tls_key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("config: api.tls_key: %s is not the private key of api.tls_cert %s: %w",
			a.TLSKey, a.TLSCert, err)
	}
	switch {
	case now.After(leaf.NotAfter):
		return tls.Certificate{}, fmt.Errorf("config: api.tls_cert: %s expired on %s: renew it",
			a.TLSCert, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return tls.Certificate{}, fmt.Errorf("config: api.tls_cert: %s is not valid before %s",
			a.TLSCert, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	pair.Leaf = leaf
	return pair, nil
}

// firstCertificate returns the first certificate of a PEM file, the
// server's own (its chain follows it).
func firstCertificate(data []byte) (*x509.Certificate, error) {
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM certificate in it (-----BEGIN CERTIFICATE-----)")
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("its first certificate does not parse: %w", err)
		}
		return c, nil
	}
}
