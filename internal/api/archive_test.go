package api_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestArchivedTasksStayReadable: an archived task is found by GET
// /tasks/{id} (saying when it was archived) and listed by
// GET /tasks?archived=true, through the HTTP API and its Client, and no
// longer by the plain listing.
func TestArchivedTasksStayReadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, api.Config{Token: "tok"})
	e.createProject("web")
	res := e.createTasks(`{"project_id":"web","tasks":[{"id":"done","title":"Done"},{"id":"gone","title":"Gone"},{"id":"open","title":"Open"}]}`)
	done, gone, open := res[0].TaskID, res[1].TaskID, res[2].TaskID
	for _, ev := range []models.TaskEvent{models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted, models.EventVerifyPassed} {
		if _, err := e.store.ApplyEvent(ctx, models.TransitionRequest{TaskID: done, Event: ev, AgentID: "a1", Actor: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	e.do("POST", "/api/v1/tasks/"+gone+"/cancel", `{"actor":"bob"}`).decode(t, http.StatusOK, &models.TransitionResult{})
	archived, err := e.store.ArchiveTasks(ctx, time.Now().Add(time.Hour), 10)
	if err != nil || len(archived) != 2 {
		t.Fatalf("archived %v (%v), want the two finished tasks", archived, err)
	}

	d := e.taskDetail(done)
	if d.ArchivedAt == nil || d.Task.Status != models.StatusCompleted || len(d.Events) != 5 {
		t.Errorf("GET archived task: archived_at %v, status %s, %d events", d.ArchivedAt, d.Task.Status, len(d.Events))
	}
	if d, err := e.client.GetTask(ctx, gone); err != nil || d.ArchivedAt == nil || d.Task.StatusReason != "cancelled by bob" {
		t.Errorf("Client.GetTask(archived) = %+v, %v", d.Task, err)
	}
	ids := func(ts []models.Task) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.ID)
		}
		slices.Sort(out)
		return out
	}
	want := []string{done, gone}
	slices.Sort(want)
	if got := ids(e.listTasks("?archived=true&project=web")); !slices.Equal(got, want) {
		t.Errorf("GET /tasks?archived=true = %v, want %v", got, want)
	}
	if got := ids(e.listTasks("?archived=true&status=BLOCKED")); !slices.Equal(got, []string{gone}) {
		t.Errorf("archived BLOCKED = %v, want %s", got, gone)
	}
	if got := ids(e.listTasks("?project=web")); !slices.Equal(got, []string{open}) {
		t.Errorf("GET /tasks = %v, want only %s", got, open)
	}
	viaClient, err := e.client.ListTasks(ctx, models.TaskFilter{Archived: true, Limit: 1})
	if err != nil || len(viaClient) != 1 {
		t.Errorf("Client.ListTasks(archived, limit 1) = %v, %v", ids(viaClient), err)
	}
	all, err := e.client.ListTasks(ctx, models.TaskFilter{Archived: true})
	if err != nil || !slices.Equal(ids(all), want) {
		t.Errorf("Client.ListTasks(archived) = %v, %v", ids(all), err)
	}
	e.do("GET", "/api/v1/tasks?archived=maybe", "").wantError(t, http.StatusBadRequest, models.CodeInvalid, `"archived"`)
	e.do("GET", "/api/v1/tasks/nope", "").wantError(t, http.StatusNotFound, models.CodeNotFound, "nope")
}
