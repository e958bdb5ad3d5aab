package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestDeskListsWhatWaitsOnAPerson: GET /api/v1/desk lists a question whose
// run ended (the daemon restarted while it waited) with the command that
// answers it, and not a task a person cancelled on purpose nor the task
// blocked behind it; ?project= keeps one project's items, and an unknown
// project is a 404 naming it.
func TestDeskListsWhatWaitsOnAPerson(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	ctx := context.Background()
	zero := int64(0)
	for _, p := range []models.Project{{ID: "web"}, {ID: "docs", BudgetLimit: &zero}} {
		if _, err := e.client.CreateProject(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	res, err := e.client.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{
		{LocalID: "ask", Title: "Asks"}, {LocalID: "gone", Title: "Cancelled"},
		{LocalID: "behind", Title: "Behind", Dependencies: []models.BatchDependency{{ID: "gone"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	asking, gone, behind := res[0].TaskID, res[1].TaskID, res[2].TaskID
	if _, err := e.client.CreateTasks(ctx, models.TaskBatch{ProjectID: "docs", Tasks: []models.BatchTask{
		{LocalID: "x", Title: "Waits for budget"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.RegisterAgent(ctx, models.AgentRegistration{ID: "a", AgentType: "codex"}.Agent()); err != nil {
		t.Fatal(err)
	}
	run, _, err := e.store.ClaimTask(ctx, asking, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.StartRun(ctx, run.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	q, err := e.store.AskQuestionWith(ctx, run.ID, models.Ask{Question: "Which database?"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventRecovery,
		Outcome: models.RunOutcomeRecovered}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CancelTask(ctx, gone, api.CancelRequest{Reason: "not needed", Actor: "ann"}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		project string
		want    []models.DeskKind
	}{
		{"", []models.DeskKind{models.DeskQuestion, models.DeskBudget}},
		{"web", []models.DeskKind{models.DeskQuestion}},
		{"docs", []models.DeskKind{models.DeskBudget}},
	}
	for _, tt := range tests {
		d, err := e.client.Desk(ctx, tt.project)
		if err != nil {
			t.Fatalf("Desk(%q): %v", tt.project, err)
		}
		kinds := map[models.DeskKind]bool{}
		for _, it := range d.Items {
			kinds[it.Kind] = true
			if it.TaskID == gone || it.TaskID == behind {
				t.Errorf("Desk(%q) lists %s, which waits on nobody: %+v", tt.project, it.TaskID, it)
			}
			if tt.project != "" && it.ProjectID != tt.project {
				t.Errorf("Desk(%q) lists an item of %q: %+v", tt.project, it.ProjectID, it)
			}
			if it.Kind == models.DeskQuestion && (it.QuestionID != q.ID || !it.RunEnded || it.TaskID != asking ||
				!strings.Contains(it.Action.Command, "question answer") || it.ExpiresAt == nil) {
				t.Errorf("the question whose run ended: %+v", it)
			}
		}
		if len(d.Items) != len(tt.want) {
			t.Errorf("Desk(%q) = %+v, want kinds %v", tt.project, d.Items, tt.want)
		}
		for _, k := range tt.want {
			if !kinds[k] {
				t.Errorf("Desk(%q) has no %s item: %+v", tt.project, k, d.Items)
			}
		}
	}

	_, err = e.client.Desk(ctx, "nope")
	var me *models.Error
	if !errors.As(err, &me) || me.Code != models.CodeNotFound || !strings.Contains(me.Message, "nope") {
		t.Errorf("Desk(nope) = %#v, want not_found naming the project", err)
	}
	if r := e.do("GET", "/api/v1/desk?project=nope", ""); r.status != 404 || !strings.Contains(string(r.body), "nope") {
		t.Errorf("GET /api/v1/desk?project=nope: %d %s, want a 404 naming it", r.status, r.body)
	}
	for _, path := range []string{"/api/v1/desk?project=web&project=docs", "/api/v1/desk?x=1"} {
		if r := e.do("GET", path, ""); r.status != 400 {
			t.Errorf("GET %s: %d %s, want 400", path, r.status, r.body)
		}
	}
	if r := e.do("GET", "/api/v1/desk", ""); r.status != 200 || !strings.Contains(string(r.body), `"items":[`) {
		t.Errorf("GET /api/v1/desk: %d %s", r.status, r.body)
	}
}
