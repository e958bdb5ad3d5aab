package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/tlstest"
)

// tlsDaemon is an in-process daemon serving its API over TLS, with a
// certificate for 127.0.0.1 signed by a certificate authority of the test.
type tlsDaemon struct {
	*daemon
	dir               string
	caFile, cert, key string
	url               string // https://127.0.0.1:PORT
	dataDir           string
}

// startTLSDaemon starts a daemon on a free port of 127.0.0.1 with
// api.tls_cert and api.tls_key, and extra appended to its configuration.
func startTLSDaemon(t *testing.T, extra string) *tlsDaemon {
	t.Helper()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "agentqueued test CA")
	d := &tlsDaemon{dir: dir, caFile: ca.WriteCA(t, dir), dataDir: filepath.Join(dir, "data")}
	d.cert, d.key = ca.Issue(t, "127.0.0.1").Write(t, dir)
	cfg := writeFile(t, dir, "daemon.yaml", d.tlsYAML()+extra)
	d.daemon = startDaemon(t, d.dataDir, "--config", cfg)
	d.url = "https://" + d.m.Addr()
	return d
}

// tlsYAML is the daemon's api: section.
func (d *tlsDaemon) tlsYAML() string {
	return fmt.Sprintf("api:\n  tls_cert: %s\n  tls_key: %s\n", d.cert, d.key)
}

// ctl runs ctl with args (their own --addr and --ca-file, if any) and env.
func (d *tlsDaemon) ctl(env map[string]string, args ...string) ctlResult {
	var stdout, stderr syncBuffer
	code := NewMain(append([]string{"ctl"}, args...), &stdout, &stderr, envOf(env)).Exec(context.Background())
	return ctlResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// mustCtl runs ctl over https, trusting the test's CA, and fails the
// test unless it succeeds.
func (d *tlsDaemon) mustCtl(t *testing.T, args ...string) string {
	t.Helper()
	r := d.ctl(nil, append([]string{"--addr", d.url, "--ca-file", d.caFile}, args...)...)
	if r.code != 0 {
		t.Fatalf("ctl %s: exit %d, stderr: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// With api.tls_cert and api.tls_key the daemon serves https: ctl reaches
// it trusting the CA by --ca-file, by $AGENTQUEUED_CA_FILE (an address
// without a scheme is then https), or by the daemon's own configuration
// (--config: its listen, over https, trusting api.tls_cert), and doctor
// says so. A ctl that does not trust the CA is refused with a certificate
// error saying what to give; plain http to the port fails; a CA file that
// cannot be used is an error naming where it came from.
func TestDaemonServesTLS(t *testing.T) {
	t.Parallel()
	d := startTLSDaemon(t, "")
	if !strings.Contains(d.logs.String(), "tls=true") {
		t.Errorf("the daemon's log does not say it serves TLS:\n%s", d.logs)
	}
	d.mustCtl(t, "project", "create", "web")

	// The daemon's configuration, as ctl and doctor on its machine use it.
	own := writeFile(t, d.dir, "own.yaml", fmt.Sprintf("data_dir: %s\nlisten: %s\n%s", d.dataDir, d.m.Addr(), d.tlsYAML()))
	if r := d.ctl(nil, "--config", own, "project", "list"); r.code != 0 || !strings.Contains(r.stdout, "web") {
		t.Errorf("ctl --config of the daemon's own configuration: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := d.ctl(map[string]string{envCAFile: d.caFile}, "--addr", d.m.Addr(), "project", "list"); r.code != 0 ||
		!strings.Contains(r.stdout, "web") {
		t.Errorf("ctl with $%s and an address without a scheme: exit %d\n%s%s", envCAFile, r.code, r.stdout, r.stderr)
	}
	var doctor syncBuffer
	NewMain([]string{"doctor", "--config", own}, &doctor, &syncBuffer{}, envOf(nil)).Exec(context.Background())
	for _, want := range []string{"ok      tls: the API is served over https with " + d.cert,
		"ok      daemon: running at https://" + d.m.Addr()} {
		if !strings.Contains(doctor.String(), want) {
			t.Errorf("doctor does not say %q:\n%s", want, doctor.String())
		}
	}

	garbage := writeFile(t, d.dir, "garbage.pem", "not a certificate\n")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		want []string
	}{
		{"no CA", nil, []string{"--addr", d.url}, exitError,
			[]string{"certificate signed by unknown authority", "--ca-file"}},
		{"plain http", nil, []string{"--addr", "http://" + d.m.Addr(), "--ca-file", d.caFile}, exitError,
			[]string{"serves https, not plain http", "https://" + d.m.Addr()}},
		{"a missing CA file", nil, []string{"--addr", d.url, "--ca-file", filepath.Join(d.dir, "none.pem")}, exitUsage,
			[]string{"--ca-file", "none.pem", "no such file"}},
		{"a CA file without a certificate", nil, []string{"--addr", d.url, "--ca-file", garbage}, exitUsage,
			[]string{"--ca-file " + garbage, "no PEM certificate"}},
		{"$AGENTQUEUED_CA_FILE without a certificate", map[string]string{envCAFile: garbage}, []string{"--addr", d.url},
			exitUsage, []string{"$" + envCAFile, "no PEM certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := d.ctl(tc.env, append(tc.args, "project", "list")...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", r.code, tc.code, r.stderr)
			}
			for _, want := range tc.want {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr does not say %q: %s", want, r.stderr)
				}
			}
		})
	}
}

// The start is refused, naming what to fix, when the API would listen
// beyond loopback without TLS, and when the certificate or its key cannot
// be served.
func TestTLSStartRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "agentqueued test CA")
	cert, _ := ca.Issue(t, "127.0.0.1").Write(t, dir)
	otherKey := writeFile(t, dir, "other-key.pem", string(ca.Issue(t, "127.0.0.1").KeyPEM))
	expired := ca.IssueExpired(t, "127.0.0.1")
	expiredCert := writeFile(t, dir, "expired.pem", string(expired.CertPEM))
	expiredKey := writeFile(t, dir, "expired-key.pem", string(expired.KeyPEM))
	const token = "token: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n"
	for _, tc := range []struct {
		name, api, listen string
		want              []string
	}{
		{"beyond loopback without TLS", token, "0.0.0.0:0", []string{"config: listen: 0.0.0.0:0", "without TLS",
			"would cross the network in the clear", "set api.tls_cert and api.tls_key",
			"keep listen on 127.0.0.1 behind a TLS reverse proxy"}},
		{"a key of another certificate", "tls_cert: " + cert + "\n  tls_key: " + otherKey + "\n", "127.0.0.1:0",
			[]string{"config: api.tls_key:", otherKey, "is not the private key of api.tls_cert"}},
		{"no key file", "tls_cert: " + cert + "\n  tls_key: " + filepath.Join(dir, "none.pem") + "\n", "127.0.0.1:0",
			[]string{"config: api.tls_key:", "none.pem"}},
		{"a certificate without its key", "tls_cert: " + cert + "\n", "127.0.0.1:0",
			[]string{"config: api.tls_key: required when api.tls_cert is set"}},
		{"an expired certificate", "tls_cert: " + expiredCert + "\n  tls_key: " + expiredKey + "\n", "127.0.0.1:0",
			[]string{"config: api.tls_cert:", "expired on"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := writeFile(t, t.TempDir(), "daemon.yaml", "api:\n  "+tc.api)
			_, err := startMain(t, nil, "run", "--config", cfg, "--data-dir", t.TempDir(), "--listen", tc.listen)
			if err == nil {
				t.Fatal("the daemon started")
			}
			if ExitCode(err) != exitUsage {
				t.Errorf("exit %d, want %d: %v", ExitCode(err), exitUsage, err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
