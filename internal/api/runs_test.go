package api_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestGetTaskShowsItsRuns: GET /api/v1/tasks/{id} answers the task's runs
// with their CLI and version, session, tokens with cache reads and writes,
// cost and denied tools, and GET /api/v1/agents the agent's CLI version
// with its warning.
func TestGetTaskShowsItsRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	ctx := context.Background()
	st := e.store
	if _, err := st.CreateProject(ctx, models.Project{ID: "web"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RegisterAgent(ctx, models.Agent{ID: "claude-1", AgentType: "claude"}); err != nil {
		t.Fatal(err)
	}
	res, err := st.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{Title: "Write the page"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].TaskID
	run, _, err := st.ClaimTask(ctx, id, "claude-1")
	if err != nil {
		t.Fatal(err)
	}
	cost := 0.5
	for i, err := range []error{
		func() error { _, err := st.StartRun(ctx, run.ID, 4242, "/work"); return err }(),
		st.RecordRunCLI(ctx, run.ID, models.RunCLI{CLI: "claude", Version: "2.1.197", MCPNotReady: []string{"agentqueued (pending)"}}),
		st.RecordRunSession(ctx, run.ID, "s-1"),
		func() error {
			_, err := st.RecordRunUsage(ctx, run.ID, models.TokenUsage{Input: 1, Output: 2, CacheRead: 3, CacheWrite: 4})
			return err
		}(),
		st.RecordRunResult(ctx, run.ID, &cost, []string{"Write"}),
	} {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	var d struct {
		Runs []map[string]any `json:"runs"`
	}
	e.do("GET", "/api/v1/tasks/"+id, "").decode(t, 200, &d)
	if len(d.Runs) != 1 {
		t.Fatalf("runs = %v", d.Runs)
	}
	got := d.Runs[0]
	want := map[string]any{"cli": "claude", "cli_version": "2.1.197", "session_id": "s-1", "cost_usd": 0.5,
		"cli_warning":  "claude 2.1.197 is older than 2.1.221, the oldest version known to work well",
		"denied_tools": []any{"Write"}, "mcp_not_ready": []any{"agentqueued (pending)"},
		"usage": map[string]any{"input_tokens": 1.0, "output_tokens": 2.0, "cache_read_tokens": 3.0, "cache_write_tokens": 4.0}}
	for k, v := range want {
		if !reflect.DeepEqual(got[k], v) {
			b, _ := json.Marshal(got)
			t.Errorf("runs[0].%s = %v, want %v (run: %s)", k, got[k], v, b)
		}
	}
	var as struct {
		Agents []map[string]any `json:"agents"`
	}
	e.do("GET", "/api/v1/agents", "").decode(t, 200, &as)
	if len(as.Agents) != 1 || as.Agents[0]["cli_version"] != "2.1.197" || as.Agents[0]["cli_warning"] == nil {
		t.Fatalf("agents = %v", as.Agents)
	}
}
