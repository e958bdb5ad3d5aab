package orchestrator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// recordingCLI registers an agent of a CLI type whose command is a script
// that records each run's arguments (one a line) and AQ_BIN, then runs the
// fake agent as that CLI. It returns the record's path.
func (e *e2e) recordingCLI(id, typ string, projects ...string) string {
	e.t.Helper()
	dir := e.t.TempDir()
	record := filepath.Join(dir, "runs")
	script := filepath.Join(dir, typ)
	body := fmt.Sprintf("#!/bin/sh\n{ echo '--run'; printf '%%s\\n' \"$@\"; echo \"AQ_BIN=$AQ_BIN\"; } >> '%s'\nexec '%s' \"$@\"\n",
		record, filepath.Join(e.fake, "fakeagent"))
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		e.t.Fatal(err)
	}
	a := models.Agent{ID: id, AgentType: typ, AgentSettings: models.AgentSettings{Command: script,
		Env: map[string]string{"FAKEAGENT_STATE_DIR": e.state, "FAKEAGENT_FORMAT": typ}, Projects: projects}}
	if _, err := e.st.RegisterAgent(context.Background(), a); err != nil {
		e.t.Fatal(err)
	}
	return record
}

// recordedRuns reads the runs a recordingCLI recorded: each run's lines.
// The version probe (`--version`) is left out.
func recordedRuns(t *testing.T, record string) [][]string {
	t.Helper()
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var runs [][]string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if l == "--run" {
			runs = append(runs, nil)
			continue
		}
		if len(runs) > 0 {
			runs[len(runs)-1] = append(runs[len(runs)-1], l)
		}
	}
	// The daemon asks a codex binary for its version once (its stream does
	// not carry it): that is not a run.
	return slices.DeleteFunc(runs, func(args []string) bool { return len(args) > 0 && args[0] == "--version" })
}

// TestE2EClaudeAndCodexReachAgentqueuedTools runs work and a QA review with
// claude and codex agents, whose fakes refuse agentqueued's tools where
// the real CLIs do: the work must complete through them and the reviewer
// reach its verdict. Each run's command line must allow the tools (claude:
// mcp__agentqueued; codex: the server approved, its tool timeout the input
// timeout plus ToolTimeoutMargin), get AQ_BIN, and its prompt offer the
// shell only where the CLI can use it.
func TestE2EClaudeAndCodexReachAgentqueuedTools(t *testing.T) {
	t.Parallel()
	const inputTimeout = 90 * time.Second
	for _, c := range []struct {
		typ, verdict string
		want         models.TaskStatus
		argv         []string // in every run's arguments
		shell        bool     // the prompts offer `<AQ_BIN> agent …`
	}{
		{"claude", "approve", models.StatusCompleted, []string{"mcp__agentqueued", "--mcp-config"}, true},
		{"claude", "reject", models.StatusFailed, []string{"mcp__agentqueued", "--mcp-config"}, true},
		{"codex", "approve", models.StatusCompleted, []string{`mcp_servers.agentqueued.default_tools_approval_mode="approve"`,
			fmt.Sprintf("mcp_servers.agentqueued.tool_timeout_sec=%d", int((inputTimeout+ToolTimeoutMargin)/time.Second))}, false},
		{"codex", "reject", models.StatusFailed, []string{`mcp_servers.agentqueued.default_tools_approval_mode="approve"`}, false},
	} {
		t.Run(c.typ+" "+c.verdict, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t)
			e.o.cfg.InputTimeout = inputTimeout // before the loop starts
			origin := bareOrigin(t)
			e.project("web", cloneRepo(origin), models.ProjectSettings{QAAgent: "qa"})
			worker := e.recordingCLI("worker", c.typ, "web")
			reviewer := e.recordingCLI("qa", c.typ, "p") // works on another project: it only reviews here
			id := e.add("web", models.BatchTask{LocalID: "t", Title: "Reviewed work", VerificationType: models.VerifyQAAgent,
				Description: fmt.Sprintf(work, "f.txt", "v1", "f", "wrote f.txt") + "\n@review @" + c.verdict + " verdict of the " + c.typ + " reviewer"})["t"]
			e.start()
			tk := e.waitStatus(id, c.want)
			if !strings.Contains(tk.StatusReason, "verdict of the "+c.typ+" reviewer") {
				t.Fatalf("%s with %q: the verdict did not arrive", tk.Status, tk.StatusReason)
			}
			if res, ok, err := e.st.TaskResult(context.Background(), id); err != nil || !ok || res.Summary != "wrote f.txt" {
				t.Errorf("the work's complete did not arrive: %+v %t %v", res, ok, err)
			}
			for who, record := range map[string]string{"worker": worker, "reviewer": reviewer} {
				runs := recordedRuns(t, record)
				if len(runs) == 0 {
					t.Fatalf("the %s never ran", who)
				}
				for _, args := range runs {
					for _, w := range c.argv {
						if !slices.Contains(args, w) {
							t.Errorf("the %s's arguments lack %q: %q", who, w, args)
						}
					}
					if !slices.Contains(args, "AQ_BIN="+e.o.cfg.Executable) {
						t.Errorf("the %s did not get AQ_BIN=%s: %q", who, e.o.cfg.Executable, args)
					}
				}
			}
			prompts, err := filepath.Glob(filepath.Join(e.o.cfg.RunDir, id, "1*.prompt"))
			if err != nil || len(prompts) != 2 {
				t.Fatalf("prompts %v %v", prompts, err)
			}
			for _, p := range prompts {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.Contains(string(b), e.o.cfg.Executable+" agent "); got != c.shell {
					t.Errorf("%s offers the shell: %t, want %t:\n%s", filepath.Base(p), got, c.shell, b)
				}
				if !strings.Contains(string(b), "agentqueued MCP server's tool") {
					t.Errorf("%s does not name the MCP tools:\n%s", filepath.Base(p), b)
				}
			}
		})
	}
}
