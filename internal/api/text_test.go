package api_test

import (
	"net/http"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestEventsAndDecisionsRefuseTextThatBreaksLater: an event's reason and
// actor are single lines, a decision's feedback is text; control
// characters are refused naming the field, and nothing changes.
func TestEventsAndDecisionsRefuseTextThatBreaksLater(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.createProject("web")
	id := e.createTasks(`{"project_id":"web","tasks":[{"title":"Ship it"}]}`)[0].TaskID
	for _, c := range []struct{ path, body, field string }{
		{"/events", `{"event":"ADMIN_SKIP","reason":"done\u0000"}`, "reason"},
		{"/events", `{"event":"ADMIN_SKIP","reason":"two\nlines"}`, "reason"},
		{"/events", `{"event":"ADMIN_SKIP","actor":"\u001b[31mroot"}`, "actor"},
		{"/approve", `{"by":"ann\u0000"}`, "by"},
		{"/reject", `{"feedback":"redo \u0000 it"}`, "feedback"},
	} {
		e.do("POST", api.APIPrefix+"/tasks/"+id+c.path, c.body).wantError(t, http.StatusBadRequest, models.CodeInvalid, c.field)
	}
	if d := e.taskDetail(id); d.Task.Status != models.StatusReady || len(d.Events) != 1 {
		t.Fatalf("a refused request changed the task: %s, %d events", d.Task.Status, len(d.Events))
	}
}
