package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// counts returns the task's stored progress counts.
func (e *agentEnv) counts(id string) (int, int) {
	e.t.Helper()
	task, err := e.st.GetTask(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return task.SuccessCount, task.FailureCount
}

func TestAgentProgressCountsFromTheCommandLine(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	env := e.startRun("Ingest the feed")
	task := env[api.EnvTaskID]
	for _, tc := range []struct {
		name             string
		args             []string
		code             int
		msg              string
		wantOK, wantFail int
	}{
		{"counts and a message", []string{"progress", "--succeeded", "12", "--failed", "3", "first", "page"}, 0, "", 12, 3},
		{"counts alone", []string{"progress", "--succeeded", "40"}, 0, "", 40, 3},
		{"a message alone keeps the counts", []string{"progress", "still", "going"}, 0, "", 40, 3},
		{"negative", []string{"progress", "--failed", "-2"}, 2, "agent progress: failed: must be between 0 and", 40, 3},
		{"not a number", []string{"progress", "--succeeded", "many"}, 2, "invalid value", 40, 3},
		{"nothing to report", []string{"progress"}, 2, "MESSAGE is required", 40, 3},
	} {
		wantExit(t, runAgentCmd(env, "", tc.args...), tc.code, tc.msg)
		if ok, fail := e.counts(task); ok != tc.wantOK || fail != tc.wantFail {
			t.Fatalf("%s: stored %d/%d, want %d/%d", tc.name, ok, fail, tc.wantOK, tc.wantFail)
		}
	}
}

func TestMCPProgressCounts(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	env := e.startRun("Ingest the feed")
	task := env[api.EnvTaskID]
	cs := mcpSession(t, env)
	if text, isErr := callTool(t, cs, "progress", map[string]any{"message": "page one", "succeeded": 7, "failed": 1}); isErr {
		t.Fatalf("progress: %s", text)
	}
	if ok, fail := e.counts(task); ok != 7 || fail != 1 {
		t.Fatalf("stored %d/%d", ok, fail)
	}
	if text, isErr := callTool(t, cs, "progress", map[string]any{"succeeded": 9}); isErr {
		t.Fatalf("progress with counts only: %s", text)
	}
	if ok, fail := e.counts(task); ok != 9 || fail != 1 {
		t.Fatalf("stored %d/%d", ok, fail)
	}
}

// An agent's plan may split work of a kind a Capacity rule limits: its
// subtasks say how many items each will process.
func TestMCPPlanCarriesExpectedCounts(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	var r models.Rule
	if err := json.Unmarshal([]byte(`{"id": "ingest-cap", "type": "Capacity", "matcher": {"kind": "ingest"}, "max_capacity": 100}`), &r); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.ReplaceRules(context.Background(), []models.Rule{r}, "ops"); err != nil {
		t.Fatal(err)
	}
	cs := mcpSession(t, e.startRun("Ingest everything"))
	if text, isErr := callTool(t, cs, "propose_plan", map[string]any{"tasks": []map[string]any{
		{"id": "a", "title": "First feed", "kind": "ingest"}}}); !isErr || !strings.Contains(text, "expected_count: required") {
		t.Fatalf("a plan without counts = %q, error %v", text, isErr)
	}
	text, isErr := callTool(t, cs, "propose_plan", map[string]any{"tasks": []map[string]any{
		{"id": "a", "title": "First feed", "kind": "ingest", "expected_count": 60}}})
	if isErr {
		t.Fatalf("propose_plan = %q", text)
	}
	tasks, err := e.st.ListTasks(context.Background(), models.TaskFilter{ProjectID: "web"})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, task := range tasks {
		if task.Title == "First feed" {
			found = task.ExpectedCount == 60
		}
	}
	if !found {
		t.Fatalf("no subtask with expected_count 60 among %d tasks", len(tasks))
	}
}
