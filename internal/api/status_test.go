package api_test

import (
	"context"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestStatusAnswersTheOverview: GET /api/v1/status answers what Discord's
// /status shows (agents with env values masked, task counts, what the
// agents work on, the desk without a task cancelled on purpose) with the
// projects and the budget.
func TestStatusAnswersTheOverview(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	ctx := context.Background()
	if _, err := e.client.CreateProject(ctx, models.ProjectSpec{ID: "web"}.Project()); err != nil {
		t.Fatal(err)
	}
	res, err := e.client.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{
		{LocalID: "a", Title: "A"}, {LocalID: "b", Title: "B", Dependencies: []models.BatchDependency{{ID: "a"}}},
		{LocalID: "c", Title: "C"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CancelTask(ctx, res[0].TaskID, api.CancelRequest{Reason: "not needed", Actor: "ann"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.RegisterAgent(ctx, models.AgentRegistration{ID: "c1", AgentType: "codex",
		AgentSettings: models.AgentSettings{Env: map[string]string{"TOKEN": "s3cret"}}}.Agent()); err != nil {
		t.Fatal(err)
	}
	o, err := e.client.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if len(o.Projects) != 1 || o.Projects[0].ID != "web" {
		t.Errorf("projects = %+v", o.Projects)
	}
	if len(o.Agents) != 1 || o.Agents[0].Env["TOKEN"] == "s3cret" {
		t.Errorf("agents = %+v (env values must be masked)", o.Agents)
	}
	if got := o.Counts["web"]; got[models.StatusBlocked] != 2 || got[models.StatusReady] != 1 {
		t.Errorf("counts = %v, want 2 BLOCKED and 1 READY", got)
	}
	// The task cancelled on purpose, and the one blocked behind it, wait
	// on nobody.
	if len(o.Desk) != 0 {
		t.Errorf("desk = %+v, want nothing: %s was cancelled on purpose", o.Desk, res[0].TaskID)
	}
	if o.Activity != (models.Activity{}) || len(o.ProjectActivity) != 0 {
		t.Errorf("activity = %+v, %+v, want none: nothing runs", o.Activity, o.ProjectActivity)
	}
	if o.Budget == nil || o.Budget.Global.Budget == nil || len(o.Budget.Projects) != 1 {
		t.Errorf("budget = %+v", o.Budget)
	}
	if o.Desk == nil || o.Working == nil || o.ProjectActivity == nil || o.Runners == nil {
		t.Errorf("empty lists must be [] or {}, got desk %v, working %v, project activity %v, runners %v", o.Desk,
			o.Working, o.ProjectActivity, o.Runners)
	}
	if r := e.do("GET", "/api/v1/status?x=1", ""); r.status != 400 {
		t.Errorf("status with a query: %d %s", r.status, r.body)
	}
}
