package api

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
)

// MinTLSVersion is the oldest TLS version the API is served with, and its
// clients (NewTransport) speak: TLS 1.2.
const MinTLSVersion = tls.VersionTLS12

// ServerTLS returns the configuration Serve serves c with: a copy of c
// with MinVersion at least MinTLSVersion and HTTP/1.1 as the only
// application protocol. Without HTTP/2 a connection behaves as on the
// plain listener: the server's read timeout, a handler's read deadline
// (git's pushes) and full-duplex bodies work the same.
func ServerTLS(c *tls.Config) *tls.Config {
	c = c.Clone()
	if c.MinVersion < MinTLSVersion {
		c.MinVersion = MinTLSVersion
	}
	c.NextProtos = []string{"http/1.1"}
	return c
}

// TrustedRoots returns the system's certificate authorities with those of
// the PEM bundle added: the roots of a client of a daemon whose
// certificate comes from an authority of its own (a self-signed one
// included). A bundle without a certificate is an error.
func TrustedRoots(bundle []byte) (*x509.CertPool, error) {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(bundle) {
		return nil, errors.New("no PEM certificate in it (-----BEGIN CERTIFICATE-----)")
	}
	return roots, nil
}

// NewTransport returns a transport with http.DefaultTransport's settings
// (its proxy from the environment among them) that trusts roots (nil: the
// system's certificate authorities) and speaks TLS 1.2 at least.
func NewTransport(roots *x509.CertPool) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: MinTLSVersion}
	return tr
}

// CertificateError reports whether err is the failure to verify a
// server's certificate: signed by an authority the client does not trust,
// for another name, or expired. Waiting does not mend it.
func CertificateError(err error) bool {
	var (
		verify    *tls.CertificateVerificationError
		authority x509.UnknownAuthorityError
		host      x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &authority) || errors.As(err, &host) || errors.As(err, &invalid)
}

// describeCertificateError is err with a line on what to do about it
// when it is a certificate's failure, else err.
func describeCertificateError(err error) error {
	if !CertificateError(err) {
		return err
	}
	return fmt.Errorf("%w (the daemon's certificate is not trusted: give the authority that signed it with --ca-file)", err)
}
