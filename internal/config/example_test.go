package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/config"
)

// uncommentSections returns the example file with the commented-out
// sections named (e.g. "agents") turned on: each "# <name>:" line and the
// commented lines under it, up to the next blank line, lose their "# ".
func uncommentSections(t *testing.T, data string, names ...string) string {
	t.Helper()
	lines := strings.Split(data, "\n")
	on := false
	found := 0
	for i, l := range lines {
		if slices.ContainsFunc(names, func(n string) bool { return l == "# "+n+":" }) {
			on = true
			found++
		} else if !strings.HasPrefix(l, "#") {
			on = false
		}
		if on {
			lines[i] = strings.TrimPrefix(strings.TrimPrefix(l, "# "), "#")
		}
	}
	if found != len(names) {
		t.Fatalf("found %d of the sections %v", found, names)
	}
	return strings.Join(lines, "\n")
}

// TestExampleAgentsGetTheirKeys loads the example file with its agents,
// profiles and verification turned on: it must load, run as root, and give
// the claude agent ANTHROPIC_API_KEY and the codex agent OPENAI_API_KEY
// through pass_env (agents get a scrubbed environment).
func TestExampleAgentsGetTheirKeys(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "configs", "agentqueued.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc := uncommentSections(t, string(data), "agents", "profiles", "verification")
	cfg, err := config.Parse([]byte(doc), env(map[string]string{"HOME": "/home/u"}))
	if err != nil {
		t.Fatalf("the example with its agents: %v", err)
	}
	if err := cfg.CheckPrivileges(0); err != nil {
		t.Errorf("the example's agents cannot run as root: %v", err)
	}
	keys := map[string]string{"claude": "ANTHROPIC_API_KEY", "codex": "OPENAI_API_KEY"}
	seen := map[string]bool{}
	for _, a := range cfg.Agents {
		key, ok := keys[a.AgentType]
		if !ok {
			continue
		}
		seen[a.AgentType] = true
		if !slices.Contains(a.PassEnv, key) {
			t.Errorf("agent %s (%s) has pass_env %v, want %s in it", a.ID, a.AgentType, a.PassEnv, key)
		}
	}
	if len(seen) != len(keys) {
		t.Errorf("the example has agents of %v, want claude and codex", seen)
	}
}
