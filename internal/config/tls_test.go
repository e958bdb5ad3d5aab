package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/config"
	"github.com/agentqueued/agentqueued/internal/tlstest"
)

// api.tls_cert and api.tls_key are read from the file, both or neither;
// one without the other is refused naming the missing key.
func TestTLSKeys(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(writeFile(t, "api:\n  tls_cert: /etc/aq/cert.pem\n  tls_key: /etc/aq/key.pem\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.API.TLSCert != "/etc/aq/cert.pem" || cfg.API.TLSKey != "/etc/aq/key.pem" || !cfg.API.TLS() {
		t.Fatalf("api = %+v", cfg.API)
	}
	if def := config.Default(); def.API.TLS() {
		t.Fatal("TLS is on by default")
	}
	for _, tc := range []struct{ doc, want string }{
		{"api:\n  tls_cert: /etc/aq/cert.pem\n", "config: api.tls_key: required when api.tls_cert is set"},
		{"api:\n  tls_key: /etc/aq/key.pem\n", "config: api.tls_cert: required when api.tls_key is set"},
		{"api:\n  tls_cert: [a, b]\n", "api.tls_cert"},
	} {
		if _, err := config.Load(writeFile(t, tc.doc), env(nil)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error saying %q", tc.doc, err, tc.want)
		}
	}
}

// LoadCertificate reads the pair the daemon serves, and refuses a bad one
// with an error naming the key at fault.
func TestLoadCertificate(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	good := ca.Issue(t, "127.0.0.1", "agentqueued.lan")
	cert, key := good.Write(t, dir)
	write := func(name string, data []byte, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	other := ca.Issue(t, "127.0.0.1")
	otherKey := write("other-key.pem", other.KeyPEM, 0o600)
	expired := ca.IssueExpired(t, "127.0.0.1")
	expiredCert, expiredKey := write("expired.pem", expired.CertPEM, 0o644), write("expired-key.pem", expired.KeyPEM, 0o600)
	openKey := write("open-key.pem", good.KeyPEM, 0o644)
	groupKey := write("group-key.pem", good.KeyPEM, 0o640)
	garbage := write("garbage.pem", []byte("not a certificate\n"), 0o644)
	certAsKey := write("cert-as-key.pem", good.CertPEM, 0o600)
	chain := write("chain.pem", append(append([]byte{}, good.CertPEM...), ca.PEM...), 0o644)
	missing := filepath.Join(dir, "missing.pem")

	now := time.Now()
	for _, tc := range []struct {
		name, cert, key string
		at              time.Time
		want            []string // in the error; none: loaded
	}{
		{"a good pair", cert, key, now, nil},
		{"a chain after the certificate", chain, key, now, nil},
		{"a key its group may read", cert, groupKey, now, nil},
		{"no certificate file", missing, key, now, []string{"config: api.tls_cert:", missing}},
		{"no key file", cert, missing, now, []string{"config: api.tls_key:", missing}},
		{"no certificate in the file", garbage, key, now, []string{"config: api.tls_cert:", garbage, "no PEM certificate"}},
		{"a certificate as the key", cert, certAsKey, now, []string{"config: api.tls_key:", "is not the private key"}},
		{"another certificate's key", cert, otherKey, now, []string{"config: api.tls_key:", otherKey, "is not the private key of api.tls_cert"}},
		{"a key every user may read", cert, openKey, now, []string{"config: api.tls_key:", openKey, "readable by every user", "chmod 600"}},
		{"an expired certificate", expiredCert, expiredKey, now, []string{"config: api.tls_cert:", expiredCert, "expired on"}},
		{"a certificate not valid yet", cert, key, now.Add(-3 * time.Hour), []string{"config: api.tls_cert:", "not valid before"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pair, err := config.APIConfig{TLSCert: tc.cert, TLSKey: tc.key}.LoadCertificate(tc.at)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("LoadCertificate: %v", err)
				}
				if pair.Leaf == nil || pair.Leaf.IPAddresses[0].String() != "127.0.0.1" {
					t.Fatalf("the pair's leaf: %+v", pair.Leaf)
				}
				return
			}
			if err == nil {
				t.Fatal("LoadCertificate accepted it")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
