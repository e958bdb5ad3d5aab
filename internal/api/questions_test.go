package api_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

func TestQuestionsEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	ctx := context.Background()
	e.createProject("web")
	id := e.createTasks(`{"project_id":"web","tasks":[{"title":"a"}]}`)[0].TaskID
	if _, err := e.store.RegisterAgent(ctx, models.Agent{ID: "a1", AgentType: "command", AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	run, _, err := e.store.ClaimTask(ctx, id, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.StartRun(ctx, run.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	q, err := e.store.AskQuestion(ctx, run.ID, "Which database?")
	if err != nil {
		t.Fatal(err)
	}

	var list api.QuestionList
	e.do("GET", "/api/v1/questions", "").decode(t, 200, &list)
	if len(list.Questions) != 1 || list.Questions[0].Text != "Which database?" || list.Questions[0].TaskID != id {
		t.Fatalf("open questions %+v", list)
	}
	path := fmt.Sprintf("/api/v1/questions/%d/answer", q.ID)
	e.do("POST", path, `{"answer":""}`).wantError(t, 400, models.CodeInvalid, "answer: required")
	e.do("POST", path, `{"answer":"SQLite","by":"x"}`).wantError(t, 400, models.CodeInvalid, `unknown field "by"`)
	e.do("POST", "/api/v1/questions/abc/answer", `{"answer":"x"}`).wantError(t, 400, models.CodeInvalid, "not a number")
	e.do("POST", "/api/v1/questions/999/answer", `{"answer":"x"}`).wantError(t, 404, models.CodeNotFound, "question 999 not found")

	var got models.Question
	e.do("POST", path, `{"answer":"SQLite","answered_by":"alice"}`).decode(t, 200, &got)
	if got.Answer == nil || *got.Answer != "SQLite" || got.AnsweredBy != "alice" {
		t.Fatalf("answered %+v", got)
	}
	if st := e.taskDetail(id).Task.Status; st != models.StatusInProgress {
		t.Fatalf("after the answer the task is %s", st)
	}
	e.do("POST", path, `{"answer":"Postgres"}`).wantError(t, 409, models.CodeConflict, "already answered by alice")
	e.do("GET", "/api/v1/questions", "").decode(t, 200, &list)
	if len(list.Questions) != 0 {
		t.Fatalf("answered question still open: %+v", list)
	}
	if qs, err := e.client.OpenQuestions(ctx); err != nil || len(qs) != 0 {
		t.Fatalf("client: %v %v", qs, err)
	}
}

func TestPauseAndResumeAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.do("POST", "/api/v1/agents", `{"id":"a1","agent_type":"command","command":"/bin/true"}`).decode(t, 201, new(models.Agent))
	var a models.Agent
	e.do("POST", "/api/v1/agents/a1/pause", "").decode(t, 200, &a)
	if !a.Paused {
		t.Fatalf("after pause: %+v", a)
	}
	e.do("POST", "/api/v1/agents/a1/resume", "").decode(t, 200, &a)
	if a.Paused {
		t.Fatalf("after resume: %+v", a)
	}
	e.do("POST", "/api/v1/agents/ghost/pause", "").wantError(t, 404, models.CodeNotFound, `agent "ghost" not found`)
	if got, err := e.client.SetAgentPaused(context.Background(), "a1", true); err != nil || !got.Paused {
		t.Fatalf("client pause: %+v %v", got, err)
	}
}
