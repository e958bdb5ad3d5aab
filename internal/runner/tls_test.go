package runner_test

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/runner"
	"github.com/agentqueued/agentqueued/internal/tlstest"
)

// A runner given certificate authorities writes, for its git, one file
// of them followed by the system's ($SSL_CERT_FILE here), mode 0600:
// git takes one file in place of its own bundle, so the system's must be
// in it too. Written again at each start. Not parallel: it sets
// $SSL_CERT_FILE.
func TestRunnerWritesItsGitBundle(t *testing.T) {
	own, system := tlstest.NewCA(t, "the daemon's CA"), tlstest.NewCA(t, "a system CA")
	sysFile := filepath.Join(t.TempDir(), "system.pem")
	if err := os.WriteFile(sysFile, system.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", sysFile)
	dir := t.TempDir()
	u, _ := url.Parse("https://127.0.0.1:7700")
	cfg := runner.Config{Server: u, Token: "aqr_x", Agents: []models.RunnerAgent{{Name: "sh", AgentType: "command"}},
		CABundle: own.PEM, DataDir: dir}
	for range 2 {
		if _, err := runner.New(cfg); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, runner.CABundleFile)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if want := append(append(bytes.TrimSpace(own.PEM), '\n'), system.PEM...); !bytes.Equal(data, want) {
			t.Fatalf("%s:\n%s\nwant the runner's CA, then the system's:\n%s", path, data, want)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 0600", path, fi, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".ca-bundle-*")); len(left) > 0 {
		t.Errorf("temporary files left: %q", left)
	}

	cfg.CABundle = []byte("not a certificate\n")
	if _, err := runner.New(cfg); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a bundle without a certificate: %v", err)
	}
}
