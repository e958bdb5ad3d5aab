package orchestrator

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestE2EPromptsOfferOnlyWhatTheCLIHas runs the fake aider and cursor
// through the daemon, with a profile that names another MCP server too,
// and reads the prompts their runs got: neither CLI is given MCP servers,
// so neither prompt names one or offers an MCP tool; cursor is offered the
// shell, aider (which runs no commands) nothing, and is told that a run
// changing no file fails, which its run that changes nothing then does.
func TestE2EPromptsOfferOnlyWhatTheCLIHas(t *testing.T) {
	t.Parallel()
	zero := 0
	cases := []struct {
		typ         string
		description string
		want        models.TaskStatus
		contains    []string // in the prompt
		shell       bool     // the prompt offers `<AQ_BIN> agent …`
	}{
		{"aider", "@write a.txt a\n@commit a", models.StatusCompleted,
			[]string{"end with a short summary", "a run that\nchanges no file"}, false},
		{"aider", "nothing to do", models.StatusBlocked, nil, false},
		{"cursor", fmt.Sprintf(work, "a.txt", "a", "a", "wrote a"), models.StatusCompleted,
			[]string{"complete --no-changes"}, true},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%s %d", c.typ, i), func(t *testing.T) {
			t.Parallel()
			e := newE2E(t)
			e.o.cfg.Profiles = map[string]models.Profile{"docs": {MCPServers: []models.MCPServer{{Name: "handbook-server", URL: "https://handbook.example.com/mcp"}}}}
			e.project("web", cloneRepo(bareOrigin(t)), models.ProjectSettings{DefaultProfile: "docs"})
			e.cli(c.typ+"-1", c.typ, "web")
			id := e.add("web", models.BatchTask{LocalID: "t", Title: "Try it", Description: c.description, MaxRetries: &zero})["t"]
			e.start()
			e.waitStatus(id, c.want)
			if c.want == models.StatusBlocked && !strings.Contains(e.lastFailure(id), "the agent made no changes") {
				t.Errorf("blocked with %q", e.lastFailure(id))
			}
			prompt := e.prompt(id, 1)
			for _, never := range []string{"MCP", "handbook-server", "the complete tool", "no_changes", "propose_plan"} {
				if strings.Contains(prompt, never) {
					t.Errorf("the %s prompt names %q:\n%s", c.typ, never, prompt)
				}
			}
			if got := strings.Contains(prompt, e.o.cfg.Executable+" agent "); got != c.shell {
				t.Errorf("the %s prompt offers the shell: %t, want %t:\n%s", c.typ, got, c.shell, prompt)
			}
			for _, want := range c.contains {
				if !strings.Contains(prompt, want) {
					t.Errorf("the %s prompt lacks %q:\n%s", c.typ, want, prompt)
				}
			}
		})
	}
}

// lastFailure returns the reasons of the task's failure events.
func (e *e2e) lastFailure(id string) string {
	e.t.Helper()
	d, err := e.st.GetTaskDetail(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range d.Events {
		if ev.Event == models.EventAgentFailed || ev.Event == models.EventVerifyFailed {
			out = append(out, ev.Reason)
		}
	}
	return strings.Join(out, " | ")
}
