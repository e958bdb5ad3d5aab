package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// awaitApproval runs one attempt of the task on agent and brings it to
// AWAITING_APPROVAL, as a run whose work needs a person's approval ends.
func (e *env) awaitApproval(taskID, agent string) {
	e.t.Helper()
	ctx := context.Background()
	run, _, err := e.store.ClaimTask(ctx, taskID, agent)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.StartRun(ctx, run.ID, 0, ""); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted,
		Outcome: models.RunOutcomeCompleted}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.ApplyEvent(ctx, models.TransitionRequest{TaskID: taskID, Event: models.EventApprovalRequested, Actor: "t"}); err != nil {
		e.t.Fatal(err)
	}
}

var attemptField = regexp.MustCompile(`/approve"><input type="hidden" name="csrf" value="[^"]+"><input type="hidden" name="attempt" value="(\d+)">`)

// TestDecisionAppliesToTheAttemptShown: the approve and reject forms post
// the attempt whose work the page showed, and a decision read for an
// attempt the task has left is refused with "reload" and changes nothing.
func TestDecisionAppliesToTheAttemptShown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		action string
		form   url.Values
		after  models.TaskStatus
	}{
		{"approve", url.Values{"note": {"fine"}}, models.StatusCompleted},
		{"reject", url.Values{"feedback": {"not yet"}}, models.StatusReady},
	}
	for _, tc := range tests {
		t.Run(tc.action, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, "")
			ctx := context.Background()
			if _, err := e.store.RegisterAgent(ctx, models.Agent{ID: "a1", Name: "worker", AgentType: "command",
				AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
				t.Fatal(err)
			}
			id := e.task("web", "Build")
			e.awaitApproval(id, "a1")
			old := e.get("/ui/tasks/" + id)
			m := attemptField.FindStringSubmatch(old.body)
			if m == nil || m[1] != "1" {
				t.Fatalf("the page of attempt 1 has no attempt 1 in its approve form:\n%s", old.body)
			}
			csrf := csrfField.FindStringSubmatch(old.body)[1]
			// The task is restarted and its second attempt awaits approval
			// while the person still reads the first one's page.
			if _, err := e.store.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventAdminRestart, Actor: "t"}); err != nil {
				t.Fatal(err)
			}
			e.awaitApproval(id, "a1")

			form := url.Values{"csrf": {csrf}, "attempt": {m[1]}}
			for k, v := range tc.form {
				form[k] = v
			}
			if p := e.post("/ui/tasks/"+id+"/"+tc.action, form); p.status != http.StatusSeeOther {
				t.Fatalf("%s: %d\n%s", tc.action, p.status, p.body)
			}
			p := e.get("/ui/tasks/" + id)
			if !strings.Contains(p.body, "the work changed since this page was read; reload") {
				t.Errorf("a %s of attempt 1 while attempt 2 waits was not refused:\n%s", tc.action, p.body)
			}
			if task, err := e.store.GetTask(ctx, id); err != nil || task.Status != models.StatusAwaitingApproval {
				t.Fatalf("after the stale %s the task is %v (%v), want AWAITING_APPROVAL", tc.action, task.Status, err)
			}
			m = attemptField.FindStringSubmatch(p.body)
			if m == nil || m[1] != "2" {
				t.Fatalf("the reloaded page has no attempt 2 in its approve form:\n%s", p.body)
			}
			form.Set("attempt", m[1])
			if p := e.post("/ui/tasks/"+id+"/"+tc.action, form); p.status != http.StatusSeeOther {
				t.Fatalf("%s: %d\n%s", tc.action, p.status, p.body)
			}
			if task, err := e.store.GetTask(ctx, id); err != nil || task.Status != tc.after {
				t.Fatalf("after the %s of the attempt shown the task is %v (%v), want %s", tc.action, task.Status, err, tc.after)
			}
		})
	}
}

// TestAnswerOnlyTheTasksOwnQuestion: the answer form under a task's page
// answers only that task's questions; another task's is refused and stays
// open.
func TestAnswerOnlyTheTasksOwnQuestion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	ctx := context.Background()
	if _, err := e.store.RegisterAgent(ctx, models.Agent{ID: "a1", Name: "worker", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	asking, other := e.task("web", "Asks"), e.task("web", "Other")
	run, _, err := e.store.ClaimTask(ctx, asking, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.StartRun(ctx, run.ID, 0, ""); err != nil {
		t.Fatal(err)
	}
	q, err := e.store.AskQuestion(ctx, run.ID, "Which database?")
	if err != nil {
		t.Fatal(err)
	}
	csrf := e.csrf("/ui/tasks/" + other)
	tests := []struct {
		task, want string
		answered   bool
	}{
		{other, fmt.Sprintf("question %d: not a question of task %s", q.ID, other), false},
		{asking, "Answer sent.", true},
	}
	for _, tc := range tests {
		form := url.Values{"csrf": {csrf}, "question": {fmt.Sprint(q.ID)}, "answer": {"SQLite"}}
		if p := e.post("/ui/tasks/"+tc.task+"/answer", form); p.status != http.StatusSeeOther {
			t.Fatalf("answer under %s: %d\n%s", tc.task, p.status, p.body)
		}
		if p := e.get("/ui/tasks/" + tc.task); !strings.Contains(p.body, tc.want) {
			t.Errorf("answer under %s: the page lacks %q:\n%s", tc.task, tc.want, p.body)
		}
		open, err := e.store.OpenQuestions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if answered := len(open) == 0; answered != tc.answered {
			t.Errorf("answer under %s: answered %v, want %v", tc.task, answered, tc.answered)
		}
	}
}
