package api_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestCancelTask cancels a queued task through POST /tasks/{id}/cancel: it
// becomes BLOCKED naming who cancelled it and why, its dependent requiring
// success is blocked, a repeat answers the same result, and the refusals
// say what was wrong.
func TestCancelTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{Token: "tok"})
	e.createProject("web")
	res := e.createTasks(`{"project_id":"web","tasks":[{"id":"a","title":"A"},{"id":"b","title":"B","dependencies":[{"id":"a"}]},
		{"id":"c","title":"C","dependencies":[{"id":"a","requires_success":false}]},{"id":"done","title":"Done"}]}`)
	a, b, c, done := res[0].TaskID, res[1].TaskID, res[2].TaskID, res[3].TaskID

	var tr models.TransitionResult
	e.do("POST", "/api/v1/tasks/"+a+"/cancel", `{"reason":"not needed","actor":"bob"}`).decode(t, http.StatusOK, &tr)
	if tr.From != models.StatusReady || tr.To != models.StatusBlocked || tr.Duplicate ||
		tr.Task.StatusReason != "cancelled by bob: not needed" || !slices.Equal(tr.Blocked, []string{b}) ||
		!slices.Equal(tr.Promoted, []string{c}) {
		t.Fatalf("cancel = %+v", tr)
	}
	var again models.TransitionResult
	e.do("POST", "/api/v1/tasks/"+a+"/cancel", `{"actor":"bob"}`).decode(t, http.StatusOK, &again)
	if !again.Duplicate || again.To != models.StatusBlocked || again.Task.StatusReason != tr.Task.StatusReason {
		t.Fatalf("repeated cancel = %+v", again)
	}
	d := e.taskDetail(c)
	if len(d.Dependencies) != 1 || d.Dependencies[0].UpstreamOutcome != models.OutcomeCancelled {
		t.Fatalf("soft dependent's edge = %+v", d.Dependencies)
	}
	for _, ev := range []models.TaskEvent{models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted, models.EventVerifyPassed} {
		if _, err := e.store.ApplyEvent(context.Background(), models.TransitionRequest{TaskID: done, Event: ev, AgentID: "a1", Actor: "test"}); err != nil {
			t.Fatal(err)
		}
	}

	// Without a body the actor is the API's default.
	solo := e.createTasks(`{"project_id":"web","tasks":[{"id":"s","title":"S"}]}`)[0].TaskID
	e.do("POST", "/api/v1/tasks/"+solo+"/cancel", "").decode(t, http.StatusOK, &tr)
	if tr.Task.StatusReason != "cancelled by "+api.DefaultActor {
		t.Fatalf("cancel without a body: %+v", tr.Task)
	}

	for _, tc := range []struct {
		name, task, body string
		status           int
		code             models.ErrorCode
		msg              string
	}{
		{"completed", done, `{}`, 409, models.CodeConflict, "is COMPLETED: a completed task cannot be cancelled"},
		{"blocked by the cascade", b, `{}`, 409, models.CodeConflict, "is already BLOCKED (upstream " + a},
		{"missing task", "no-such-task", `{}`, 404, models.CodeNotFound, `task "no-such-task" not found`},
		{"unknown field", c, `{"event":"ADMIN_SKIP"}`, 400, models.CodeInvalid, `unknown field "event"`},
		{"multi-line actor", c, `{"actor":"a\nb"}`, 400, models.CodeInvalid, "actor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.do("POST", "/api/v1/tasks/"+tc.task+"/cancel", tc.body).wantError(t, tc.status, tc.code, tc.msg)
		})
	}
	// The guard applies: no token, no cancel.
	e.do("POST", "/api/v1/tasks/"+c+"/cancel", `{}`, "Authorization", "").wantError(t, 401, models.CodeUnauthorized, "bearer")
	if st := e.taskDetail(c).Task.Status; st != models.StatusReady {
		t.Fatalf("refused cancels changed the task to %s", st)
	}

	// The client.
	got, err := e.client.CancelTask(context.Background(), c, api.CancelRequest{Reason: "dup", Actor: "eve"})
	if err != nil || got.To != models.StatusBlocked || got.Task.StatusReason != "cancelled by eve: dup" {
		t.Fatalf("client CancelTask = %+v, %v", got, err)
	}
	_, err = e.client.CancelTask(context.Background(), done, api.CancelRequest{})
	if models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), "cannot be cancelled") {
		t.Fatalf("client CancelTask of a completed task: %v", err)
	}
}
