package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClaudeBypassAsRootRefusedAtStart checks that the daemon refuses to
// start as root with a claude agent that would skip every permission
// check (Claude Code exits 1 on it as root), before it creates anything.
func TestClaudeBypassAsRootRefusedAtStart(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	path := writeFile(t, t.TempDir(), "agentqueued.yaml",
		"agents:\n  - {name: claude-1, type: claude, profile: {permission_mode: bypassPermissions}}\n")
	var stderr syncBuffer
	m := NewMain([]string{"run", "--config", path, "--data-dir", dataDir, "--listen", "127.0.0.1:0"}, &syncBuffer{}, &stderr, envOf(nil))
	m.Geteuid = func() int { return 0 }
	// Cancelled at once: a daemon that starts anyway stops again at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code := m.Exec(ctx); code != 2 {
		t.Errorf("exit code = %d, want 2", code)
	}
	for _, want := range []string{"agents[0].profile.permission_mode", "claude-1", "root", "cannot be used with root/sudo privileges"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q lacks %q", stderr.String(), want)
		}
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("the refused start created the data dir (stat: %v)", err)
	}
}
