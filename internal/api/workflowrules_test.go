package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestWorkflowStepsUnderCapacityRules: with a Capacity rule over a kind,
// POST /workflows refuses a workflow whose step of that kind declares no
// expected_count (400, naming the step and the rule) and takes one that
// declares it; a workflow saved before the rule is refused at its run's
// start (409), naming the same.
func TestWorkflowStepsUnderCapacityRules(t *testing.T) {
	t.Parallel()
	e := newWorkflowEnv(t)
	const bare = `{"name": "ingest", "project": "web", "steps": [{"name": "load", "title": "Load", "kind": "ingest"}]}`
	e.postWorkflow(bare, "application/json").decode(t, http.StatusCreated, &models.Workflow{})
	var capRule models.Rule
	if err := json.Unmarshal([]byte(`{"id": "ingest-cap", "type": "Capacity", "matcher": {"kind": "ingest"}, "max_capacity": 100}`), &capRule); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.ReplaceRules(context.Background(), []models.Rule{capRule}, "ops"); err != nil {
		t.Fatal(err)
	}
	const why = "steps[0] (load).expected_count: required: the Capacity rule rules[0] (ingest-cap) (max_capacity 100) applies to the step's tasks (project web, kind ingest)"
	e.do("POST", "/api/v1/workflows/ingest/runs", "").wantError(t, http.StatusConflict, models.CodeConflict, why)
	e.postWorkflow(bare, "application/json").wantError(t, http.StatusBadRequest, models.CodeInvalid, why)
	e.postWorkflow(`{"name": "ingest", "project": "web", "steps": [{"name": "load", "title": "Load", "kind": "ingest", "expected_count": 500}]}`,
		"application/json").wantError(t, http.StatusBadRequest, models.CodeInvalid,
		"steps[0] (load).expected_count: 500 exceeds max_capacity 100 of the Capacity rule rules[0] (ingest-cap)")

	var w models.Workflow
	e.postWorkflow("name: ingest\nproject: web\nsteps:\n  - name: load\n    title: Load\n    kind: ingest\n    expected_count: 40\n",
		"application/yaml").decode(t, http.StatusOK, &w)
	if len(w.Steps) != 1 || w.Steps[0].ExpectedCount == nil || w.Steps[0].ExpectedCount.Count != 40 {
		t.Fatalf("saved workflow: %+v", w.Steps)
	}
	var run models.WorkflowRun
	e.do("POST", "/api/v1/workflows/ingest/runs", "").decode(t, http.StatusCreated, &run)
	ts, err := e.client.RunTasks(context.Background(), run.ID)
	if err != nil || len(ts) != 1 || ts[0].ExpectedCount != 40 {
		t.Fatalf("tasks of the run: %+v, %v", ts, err)
	}
}
