package orchestrator

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

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
			path := filepath.Join("testdata", "prompt-"+tc.name+".golden")
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
				t.Errorf("prompt %s differs from %s:\n--- got\n%s\n--- want\n%s", tc.name, path, got, want)
			}
		})
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
