package agent_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentqueued/agentqueued/internal/agent"
)

func TestPassEnv(t *testing.T) {
	t.Parallel()
	daemon := []string{"PATH=/usr/bin", "ANTHROPIC_API_KEY=sk-one", "EMPTY=", "GITHUB_TOKEN=ghp", "ANTHROPIC_API_KEY=sk-two"}
	vars, missing := agent.PassEnv(daemon, []string{"ANTHROPIC_API_KEY", "EMPTY", "OPENAI_API_KEY"})
	if len(vars) != 2 || vars["ANTHROPIC_API_KEY"] != "sk-two" || vars["EMPTY"] != "" {
		t.Errorf("vars = %v", vars)
	}
	if strings.Join(missing, ",") != "OPENAI_API_KEY" {
		t.Errorf("missing = %v", missing)
	}
	if vars, missing := agent.PassEnv(daemon, nil); vars != nil || missing != nil {
		t.Errorf("no names: %v, %v", vars, missing)
	}
}

// TestPassedVariablesReachTheProcess: a variable pass_env names reaches the
// agent's process from the daemon's environment; one it does not name, and
// the daemon's own tokens, do not.
func TestPassedVariablesReachTheProcess(t *testing.T) {
	t.Parallel()
	daemon := append(os.Environ(), "ANTHROPIC_API_KEY=sk-from-daemon", "OPENAI_API_KEY=sk-not-named", "GITHUB_TOKEN=ghp-daemon")
	passed, _ := agent.PassEnv(daemon, []string{"ANTHROPIC_API_KEY"})
	var mu sync.Mutex
	var lines []string
	p, err := agent.Start(agent.Spec{Argv: []string{"/usr/bin/env"}, Dir: t.TempDir(), LogPath: filepath.Join(t.TempDir(), "run.log"),
		Env: agent.Environment(daemon, passed, map[string]string{"AQ_TASK_ID": "bold-orbit"}),
		OnLine: func(b []byte) {
			mu.Lock()
			lines = append(lines, string(b))
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	if r := wait(t, p); r.ExitCode != 0 {
		t.Fatalf("env: %+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(lines, "ANTHROPIC_API_KEY=sk-from-daemon") {
		t.Errorf("the passed variable did not reach the process: %q", lines)
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "OPENAI_API_KEY=") || strings.HasPrefix(l, "GITHUB_TOKEN=") {
			t.Errorf("a variable pass_env does not name reached the process: %s", l)
		}
	}
}
