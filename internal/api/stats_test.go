package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestStats: GET /api/v1/stats answers each project's figures, through
// the HTTP API and its Client, and refuses a query it does not take.
func TestStats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, api.Config{Token: "tok"})
	e.createProject("web")
	e.createProject("api")
	res := e.createTasks(`{"project_id":"web","tasks":[{"id":"a","title":"A"},{"id":"b","title":"B"}]}`)
	for _, ev := range []models.TaskEvent{models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted, models.EventVerifyPassed} {
		if _, err := e.store.ApplyEvent(ctx, models.TransitionRequest{TaskID: res[0].TaskID, Event: ev, AgentID: "a1", Actor: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	var st models.Stats
	e.do("GET", "/api/v1/stats", "").decode(t, http.StatusOK, &st)
	if len(st.Projects) != 2 || st.Projects[1].ProjectID != "web" {
		t.Fatalf("stats projects %+v", st.Projects)
	}
	web := st.Projects[1]
	if web.ByStatus[models.StatusCompleted] != 1 || web.ByStatus[models.StatusReady] != 1 || web.Completed != 1 ||
		len(web.CompletionsPerHour) != 24 || web.CompletionsPerHour[23].Count != 1 {
		t.Errorf("web: %+v", web)
	}
	viaClient, err := e.client.Stats(ctx)
	if err != nil || len(viaClient.Projects) != 2 || viaClient.Projects[1].Completed != 1 {
		t.Errorf("Client.Stats = %+v, %v", viaClient, err)
	}
	e.do("GET", "/api/v1/stats?project=web", "").wantError(t, http.StatusBadRequest, models.CodeInvalid, "query parameters are not accepted")
}
