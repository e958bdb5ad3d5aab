package api_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/tlstest"
)

// serveTLS serves the API over TLS with a certificate for 127.0.0.1 from
// a CA of the test, on a free port of 127.0.0.1, until the test ends; it
// returns the address and the CA.
func serveTLS(t *testing.T) (string, *tlstest.CA) {
	t.Helper()
	ca := tlstest.NewCA(t, "api test CA")
	p := ca.Issue(t, "127.0.0.1")
	pair, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	logger, _ := newLogger()
	s, err := api.New(api.Config{Addr: "127.0.0.1:0", Logger: logger, TLS: &tls.Config{Certificates: []tls.Certificate{pair}}},
		newKit(t, logger).Service)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), ca
}

// The API over TLS: a client that trusts the CA is served, over TLS 1.2
// or later and HTTP/1.1 even when it offers HTTP/2; TLS 1.1 is refused;
// a plain HTTP request is answered 400, which the client says is the
// wrong scheme; a client that does not trust the
// CA fails with a certificate error that says what to give.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	addr, ca := serveTLS(t)
	ctx := progresstest.Context(t)
	roots, err := api.TrustedRoots(ca.PEM)
	if err != nil {
		t.Fatal(err)
	}

	tr := api.NewTransport(roots)
	tr.ForceAttemptHTTP2 = true // offers h2
	hc := &http.Client{Transport: tr}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/healthz", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET /healthz over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 || resp.Proto != "HTTP/1.1" {
		t.Fatalf("answer %d over %s, TLS %+v", resp.StatusCode, resp.Proto, resp.TLS)
	}
	c, err := api.NewClient("https://"+addr, "", hc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListProjects(ctx); err != nil {
		t.Fatalf("the client over TLS: %v", err)
	}

	old := api.NewTransport(roots)
	old.TLSClientConfig.MinVersion, old.TLSClientConfig.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	defer old.CloseIdleConnections()
	if resp, err := (&http.Client{Transport: old}).Get("https://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatal("a TLS 1.1 client was served")
	}

	plain := api.NewTransport(nil)
	defer plain.CloseIdleConnections()
	resp, err = (&http.Client{Transport: plain}).Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("plain HTTP: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "HTTP request to an HTTPS server") {
		t.Fatalf("plain HTTP answered %d %q", resp.StatusCode, body)
	}

	plainClient, err := api.NewClient("http://"+addr, "", &http.Client{Transport: plain})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plainClient.Health(ctx); models.ErrorCodeOf(err) != models.CodeInvalid ||
		!strings.Contains(err.Error(), "serves https, not plain http: give its address as https://"+addr) {
		t.Fatalf("the client over plain HTTP: %v", err)
	}

	untrusting, err := api.NewClient("https://"+addr, "", &http.Client{Transport: api.NewTransport(nil)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = untrusting.Health(ctx)
	if err == nil || !api.CertificateError(err) || !strings.Contains(err.Error(), "certificate") ||
		!strings.Contains(err.Error(), "--ca-file") {
		t.Fatalf("a client that does not trust the CA: %v", err)
	}
}

// A TLS configuration without a certificate is refused when the server is
// made; a bundle without a certificate is no set of roots.
func TestTLSConfigurationChecks(t *testing.T) {
	t.Parallel()
	logger, _ := newLogger()
	if _, err := api.New(api.Config{TLS: &tls.Config{}}, newKit(t, logger).Service); err == nil ||
		!strings.Contains(err.Error(), "TLS has no certificate") {
		t.Errorf("api.New with an empty TLS configuration: %v", err)
	}
	if _, err := api.TrustedRoots([]byte("nothing here\n")); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("TrustedRoots of no certificate: %v", err)
	}
	if c := api.ServerTLS(&tls.Config{MinVersion: tls.VersionTLS10}); c.MinVersion != tls.VersionTLS12 ||
		len(c.NextProtos) != 1 || c.NextProtos[0] != "http/1.1" {
		t.Errorf("ServerTLS: min version %x, protocols %q", c.MinVersion, c.NextProtos)
	}
}
