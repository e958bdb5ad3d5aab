package api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestTaskJSONSaysWhyATaskWaits: a READY task's waiting reason is part of
// its JSON, in its detail and in listings.
func TestTaskJSONSaysWhyATaskWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.createProject("web")
	id := e.createTasks(`{"project_id":"web","tasks":[{"title":"t"}]}`)[0].TaskID
	if _, err := e.store.SetWaiting(context.Background(), []models.WaitingUpdate{{ProjectID: "web", Scope: models.WaitAll,
		Code: models.WaitingNoAgent, Reason: "no agent works on project web"}}); err != nil {
		t.Fatal(err)
	}
	raw := string(e.do("GET", "/api/v1/tasks/"+id, "").body)
	if !strings.Contains(raw, `"waiting_code":"no_agent"`) || !strings.Contains(raw, `"waiting_reason":"no agent works on project web"`) {
		t.Fatalf("task JSON without its waiting reason: %s", raw)
	}
	if ts := e.listTasks("?project=web"); len(ts) != 1 || ts[0].WaitingCode != models.WaitingNoAgent {
		t.Fatalf("listing: %+v", ts)
	}
}
