package main

import (
	"strings"
	"testing"
)

// TestAnOpenListenerNeedsAToken: the API listening beyond loopback without
// api.token would let anyone on the network drive the daemon. It refuses
// to start, naming the settings; with a token it starts.
func TestAnOpenListenerNeedsAToken(t *testing.T) {
	t.Parallel()
	_, err := startMain(t, nil, "run", "--data-dir", t.TempDir(), "--listen", "0.0.0.0:0")
	if err == nil || !strings.Contains(err.Error(), "api.token") || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("an open listener without a token: %v", err)
	}
	cfg := writeFile(t, t.TempDir(), "agentqueued.yaml", "api:\n  token: a-long-enough-secret-token\n")
	d, err := startMain(t, nil, "run", "--config", cfg, "--data-dir", t.TempDir(), "--listen", "0.0.0.0:0")
	if err != nil {
		t.Fatalf("an open listener with a token: %v", err)
	}
	if !strings.Contains(d.logs.String(), "auth=true") {
		t.Errorf("log:\n%s", d.logs)
	}
}
