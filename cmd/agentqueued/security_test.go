package main

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/tlstest"
)

// TestAnOpenListenerNeedsAToken: the API listening beyond loopback without
// api.token would let anyone on the network drive the daemon, and without
// TLS every token would cross the network in the clear. It refuses to
// start, naming the settings; with a token and a certificate it starts.
func TestAnOpenListenerNeedsAToken(t *testing.T) {
	t.Parallel()
	_, err := startMain(t, nil, "run", "--data-dir", t.TempDir(), "--listen", "0.0.0.0:0")
	if err == nil || !strings.Contains(err.Error(), "api.token") || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("an open listener without a token: %v", err)
	}
	dir := t.TempDir()
	cfg := writeFile(t, dir, "agentqueued.yaml", "api:\n  token: a-long-enough-secret-token\n")
	_, err = startMain(t, nil, "run", "--config", cfg, "--data-dir", t.TempDir(), "--listen", "0.0.0.0:0")
	if err == nil || !strings.Contains(err.Error(), "without TLS") || !strings.Contains(err.Error(), "api.tls_cert") {
		t.Fatalf("an open listener with a token, without TLS: %v", err)
	}
	cert, key := tlstest.NewCA(t, "test CA").Issue(t, "127.0.0.1").Write(t, dir)
	cfg = writeFile(t, dir, "agentqueued.yaml", "api:\n  token: a-long-enough-secret-token\n  tls_cert: "+cert+
		"\n  tls_key: "+key+"\n")
	d, err := startMain(t, nil, "run", "--config", cfg, "--data-dir", t.TempDir(), "--listen", "0.0.0.0:0")
	if err != nil {
		t.Fatalf("an open listener with a token and TLS: %v", err)
	}
	if !strings.Contains(d.logs.String(), "auth=true") || !strings.Contains(d.logs.String(), "tls=true") {
		t.Errorf("log:\n%s", d.logs)
	}
}

// TestHealthSaysWhenTheSchedulerFails: a project total that could not be
// read failed every scheduling pass while /healthz said ok. Now /healthz
// answers 503 with the reason once passes keep failing.
func TestHealthSaysWhenTheSchedulerFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, t.TempDir(), "agentqueued.yaml", "orchestrator:\n  safety_tick: 20ms\n")
	d, err := startMain(t, nil, "run", "--config", cfg, "--data-dir", dir, "--listen", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mustCtl(t, d.m.Addr(), "project", "create", "web")
	c, err := api.NewClient("http://"+d.m.Addr(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := progresstest.Context(t)
	if _, err := c.Health(ctx); err != nil {
		t.Fatalf("a healthy daemon: %v", err)
	}
	// What an older daemon let an agent do: a total beyond SQLite's integers.
	raw, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "agentqueued.db")+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec("UPDATE projects SET total_tokens_used = 1.0e19 WHERE id = 'web'"); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := c.Health(ctx)
		if err != nil && strings.Contains(err.Error(), "the scheduler failed its last") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("/healthz never said the scheduler fails: %v\n%s", err, d.logs)
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond): // polling the daemon's answer
		}
	}
}
