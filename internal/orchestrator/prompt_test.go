package orchestrator

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestPromptGolden renders the task contexts an agent can receive and
// compares them with testdata/prompt-*.golden (go test -run Golden -update
// rewrites them).
func TestPromptGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ctx  models.TaskContext
	}{
		{"minimal", models.TaskContext{TaskID: "bold-orbit", Title: "Fix login", CheckoutPath: "/scratch/a1/web", Attempt: 1}},
		{"full", models.TaskContext{TaskID: "bold-orbit", Title: "Fix login", Description: "The form posts twice.\nSee issue 12.",
			AcceptanceCriteria: []string{"one request per click", "a test covers it"}, TestCommands: []string{"go test ./...", "make lint"},
			CheckoutPath: "/ck/a1/web", BranchName: "aq/bold-orbit-fix-login", DefaultBranch: "main", Attempt: 3,
			AttachedContext: models.AttachedContext{
				Upstream: []models.UpstreamResult{{TaskID: "calm-river", Title: "Add the API client", Summary: "Added client.go.",
					FilesChanged: []string{"client.go", "client_test.go"}, Outputs: json.RawMessage(`{"endpoint":"/v2/login"}`)}},
				PreviousFailures: []string{"exit status 1: panic: nil map\n  at main.go:12", "checks: test command \"go test ./...\" failed"},
				Conflicts:        []string{"login.go"},
				Answers:          []models.Answer{{Question: "Which endpoint?", Answer: "Use the v2 endpoint."}},
				Feedback:         []string{"reviewer qa: the test does not click twice"},
				Rescued:          "aq-rescue/bold-orbit-fix-login-20261122T070000",
			},
			PlanPaths: []string{".claude/plan.md"}, Tools: []string{"Edit", "Bash(go test:*)"},
			MCPServers:   []models.MCPServer{{Name: "agentqueued", Command: "/usr/bin/agentqueued", Args: []string{"mcp"}}, {Name: "docs", URL: "https://docs.example.com/mcp"}},
			AgentCommand: "/usr/bin/agentqueued agent"}},
		// A task of a workflow run's foreach step, and one of a step that
		// makes one task.
		{"run-foreach", models.TaskContext{TaskID: "bold-orbit", Title: "Upgrade golang.org/x/net", CheckoutPath: "/ck/a1/web", Attempt: 1,
			Run: &models.RunPlace{RunID: "run-7", Workflow: "nightly-deps", Step: "upgrade", FanOut: true, Index: 1, Count: 3,
				Item: "golang.org/x/net", HasItem: true},
			AgentCommand: "/usr/bin/agentqueued agent"}},
		{"run-step", models.TaskContext{TaskID: "bold-orbit", Title: "Summarise", CheckoutPath: "/ck/a1/web", Attempt: 1,
			Run:          &models.RunPlace{RunID: "run-7", Workflow: "nightly-deps", Step: "summary"},
			AgentCommand: "/usr/bin/agentqueued agent"}},
		// A sandboxed codex run: its MCP tools, no shell.
		{"mcp-only", models.TaskContext{TaskID: "bold-orbit", Title: "Fix login", CheckoutPath: "/ck/a1/web", Attempt: 1,
			PlanPaths:  []string{".agentqueued/plan.md"},
			MCPServers: []models.MCPServer{{Name: "agentqueued", Command: "/usr/bin/agentqueued", Args: []string{"mcp"}}}}},
		// A cursor or command agent: the shell only.
		{"shell-only", models.TaskContext{TaskID: "bold-orbit", Title: "Fix login", CheckoutPath: "/ck/a1/web", Attempt: 1,
			PlanPaths: []string{".agentqueued/plan.md"}, AgentCommand: "'/opt/agent queued/agentqueued' agent"}},
		{"review", models.TaskContext{TaskID: "bold-orbit", Title: "Fix login", Description: "The form posts twice.",
			AcceptanceCriteria: []string{"one request per click"}, CheckoutPath: "/verify/bold-orbit", DefaultBranch: "main", Attempt: 1,
			Review: &models.ReviewContext{TaskID: "bold-orbit", Summary: "Debounced the submit button.",
				Diff: "--- a/login.go\n+++ b/login.go\n@@ -1 +1 @@\n-old\n+new", FilesChanged: []string{"login.go"}},
			MCPServers:   []models.MCPServer{{Name: "agentqueued", Command: "/usr/bin/agentqueued", Args: []string{"mcp"}}},
			AgentCommand: "/usr/bin/agentqueued agent"}},
		{"review-mcp-only", models.TaskContext{TaskID: "bold-orbit", Title: "Fix login", CheckoutPath: "/verify/bold-orbit",
			DefaultBranch: "main", Attempt: 1, Review: &models.ReviewContext{TaskID: "bold-orbit", Diff: "+new"},
			MCPServers: []models.MCPServer{{Name: "agentqueued", Command: "/usr/bin/agentqueued", Args: []string{"mcp"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := RenderPrompt(tc.ctx)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", "prompt-"+tc.name+".golden"), got)
		})
	}
}

// TestRunPromptGolden renders the prompt each adapter's run gets, through
// the orchestrator's choice of what to offer, and compares it with
// testdata/prompt-run-*.golden (-update rewrites them): agentqueued's MCP
// server and tools are named only to claude and codex, whose CLIs get the
// servers; the shell fallback only where the CLI can run it; an agent
// with neither (aider) is asked for a summary and told that a run
// changing nothing fails.
func TestRunPromptGolden(t *testing.T) {
	t.Parallel()
	o := &Orchestrator{cfg: Config{Executable: "/usr/bin/agentqueued"}}
	docs := []models.MCPServer{{Name: "docs", URL: "https://docs.example.com/mcp"}}
	work := models.TaskContext{TaskID: "bold-orbit", Title: "Fix login", Description: "The form posts twice.",
		CheckoutPath: "/ck/a1/web", BranchName: "aq/bold-orbit-fix-login", DefaultBranch: "main", Attempt: 1,
		PlanPaths: []string{".agentqueued/plan.md"}}
	review := models.TaskContext{TaskID: "bold-orbit", Title: "Fix login", CheckoutPath: "/verify/bold-orbit",
		DefaultBranch: "main", Attempt: 1, Review: &models.ReviewContext{TaskID: "bold-orbit", Diff: "+new"}}
	for _, tc := range []struct {
		name    string
		adapter agent.Adapter
		profile models.Profile
		ctx     models.TaskContext
	}{
		{"claude", agent.Claude{}, models.Profile{MCPServers: docs}, work},
		{"codex", agent.Codex{}, models.Profile{MCPServers: docs}, work},
		{"cursor", agent.Cursor{}, models.Profile{MCPServers: docs}, work},
		{"cursor-plan", agent.Cursor{}, models.Profile{PermissionMode: "plan", MCPServers: docs}, work},
		{"aider", agent.Aider{}, models.Profile{MCPServers: docs}, work},
		{"command", agent.Command{}, models.Profile{MCPServers: docs}, work},
		{"review-cursor", agent.Cursor{}, models.Profile{}, review},
		{"review-command", agent.Command{}, models.Profile{}, review},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := o.runPrompt(tc.adapter, tc.profile, tc.ctx)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", "prompt-run-"+tc.name+".golden"), got)
		})
	}
}

// checkGolden compares got with the golden file at path, rewriting it
// first under -update.
func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("prompt differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestParsePlan(t *testing.T) {
	t.Parallel()
	tasks, err := ParsePlan("# Plan\nintro\n## Add the model\nA struct.\n\n## Wire the API\nRoutes.\nTests.\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 2 || tasks[0].Title != "Add the model" || tasks[0].Description != "A struct." ||
		tasks[1].Title != "Wire the API" || tasks[1].Description != "Routes.\nTests." {
		t.Fatalf("parsed %+v", tasks)
	}
	if _, err := ParsePlan("just text\n"); err == nil {
		t.Fatal("a plan without headings was accepted")
	}
}
