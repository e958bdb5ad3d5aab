package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/config"
)

// envCAFile names the PEM file of certificate authorities that ctl and
// doctor trust for the daemon's certificate, besides the system's, when
// --ca-file is not given.
const envCAFile = "AGENTQUEUED_CA_FILE"

// loadAPITLS returns the configuration the API is served over TLS with,
// its certificate read from api.tls_cert and api.tls_key now, or nil
// when they are not set. They are read once: a renewed certificate is
// served after a restart.
func loadAPITLS(cfg config.Config) (*tls.Config, error) {
	if !cfg.API.TLS() {
		return nil, nil
	}
	pair, err := cfg.API.LoadCertificate(time.Now())
	if err != nil {
		return nil, &configError{err: err}
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: api.MinTLSVersion}, nil
}

// readCAFile reads the PEM bundle of certificate authorities at path,
// which the command line gave as name (a flag, or an environment
// variable); errors name it.
func readCAFile(name, path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &configError{err: fmt.Errorf("%s: %w", name, err)}
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		return nil, &configError{err: fmt.Errorf("%s %s: no PEM certificate in it (-----BEGIN CERTIFICATE-----): "+
			"give the certificate of the authority that signed the daemon's certificate", name, path)}
	}
	return data, nil
}

// daemonTrust is what a client of the daemon (ctl, doctor) trusts for
// its certificate besides the system's authorities: the bundle of
// --ca-file (else $AGENTQUEUED_CA_FILE), and the certificate of
// api.tls_cert when cfg (--config) serves TLS. secure says whether either
// is there: an address given without a scheme is then https.
type daemonTrust struct {
	bundle []byte
	secure bool
}

// loadDaemonTrust reads the certificates a client of the daemon trusts.
func loadDaemonTrust(caFile string, getenv func(string) (string, bool), cfg *config.Config) (daemonTrust, error) {
	name := "--ca-file"
	if caFile == "" {
		caFile, _ = getenv(envCAFile)
		name = "$" + envCAFile
	}
	var tr daemonTrust
	if caFile != "" {
		data, err := readCAFile(name, caFile)
		if err != nil {
			return tr, err
		}
		tr.bundle, tr.secure = data, true
	}
	if cfg != nil && cfg.API.TLS() {
		data, err := os.ReadFile(cfg.API.TLSCert)
		if err != nil {
			return tr, &configError{err: fmt.Errorf("api.tls_cert of --config: %w (give the daemon's authority with --ca-file)", err)}
		}
		tr.bundle, tr.secure = append(tr.bundle, data...), true
	}
	return tr, nil
}

// transport returns an HTTP transport that trusts the system's
// authorities and tr's certificates.
func (tr daemonTrust) transport() (*http.Transport, error) {
	if len(tr.bundle) == 0 {
		return api.NewTransport(nil), nil
	}
	roots, err := api.TrustedRoots(tr.bundle)
	if err != nil {
		return nil, &configError{err: fmt.Errorf("the daemon's certificate authorities: %w", err)}
	}
	return api.NewTransport(roots), nil
}

// scheme is the scheme of an address given without one.
func (tr daemonTrust) scheme() string {
	if tr.secure {
		return "https://"
	}
	return "http://"
}
