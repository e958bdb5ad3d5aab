package api_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestArchivedRunTasksOverTheAPI: once the tasks of a cancelled run are
// archived, GET /runs/{id} still counts them (archived_tasks says how many
// are), GET /runs/{id}/tasks lists them with archived_at, and POST
// /runs/{id}/retry answers 409 naming them and how to run again — not a
// success of no tasks.
func TestArchivedRunTasksOverTheAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newWorkflowEnv(t)
	e.postWorkflow(reviewJSON, "application/json").decode(t, http.StatusCreated, &models.Workflow{})
	var run models.WorkflowRun
	e.do("POST", "/api/v1/workflows/review/runs", "").decode(t, http.StatusCreated, &run)
	e.do("POST", "/api/v1/runs/"+run.ID+"/cancel", `{"actor":"bob"}`).decode(t, http.StatusOK, &models.WorkflowRun{})
	ids, err := e.store.ArchiveTasks(ctx, time.Now().Add(time.Hour), 10)
	if err != nil || len(ids) != 1 {
		t.Fatalf("archived %v (%v), want the run's one task", ids, err)
	}

	var got models.WorkflowRun
	e.do("GET", "/api/v1/runs/"+run.ID, "").decode(t, http.StatusOK, &got)
	if got.Status != models.RunCancelled || got.ArchivedTasks != 1 || got.Tasks[models.StatusBlocked] != 1 {
		t.Fatalf("GET run after the archive: %s, tasks %v, archived %d", got.Status, got.Tasks, got.ArchivedTasks)
	}
	var l api.RunTaskList
	e.do("GET", "/api/v1/runs/"+run.ID+"/tasks", "").decode(t, http.StatusOK, &l)
	if len(l.Tasks) != 1 || l.Tasks[0].ID != ids[0] || l.Tasks[0].Name != "read" || l.Tasks[0].ArchivedAt == nil ||
		l.Tasks[0].Status != models.StatusBlocked {
		t.Fatalf("GET run tasks after the archive: %+v", l.Tasks)
	}
	if ts, err := e.client.RunTasks(ctx, run.ID); err != nil || len(ts) != 1 || ts[0].ArchivedAt == nil {
		t.Fatalf("Client.RunTasks: %+v, %v", ts, err)
	}
	if got := e.runTaskNames(run.ID); !slices.Equal(got, []string{"read=BLOCKED"}) {
		t.Fatalf("run tasks: %v", got)
	}

	e.do("POST", "/api/v1/runs/"+run.ID+"/retry", `{"actor":"bob"}`).wantError(t, http.StatusConflict, models.CodeConflict,
		"run "+run.ID+" cannot be retried: its tasks "+ids[0]+" (read) were archived BLOCKED")
	e.do("GET", "/api/v1/runs/"+run.ID, "").decode(t, http.StatusOK, &got)
	if got.Status != models.RunCancelled {
		t.Fatalf("a refused retry left the run %s", got.Status)
	}
	if _, err := e.client.RetryRun(ctx, run.ID, "bob"); models.ErrorCodeOf(err) != models.CodeConflict ||
		!strings.Contains(err.Error(), "POST /api/v1/workflows/review/runs") {
		t.Fatalf("Client.RetryRun: %v", err)
	}
}
