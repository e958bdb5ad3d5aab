package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

func TestEditTaskEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.createProject("web")
	res := e.createTasks(`{"project_id":"web","tasks":[{"id":"a","title":"A","test_commands":["make"]},{"id":"b","title":"B"}]}`)
	a, running := res[0].TaskID, res[1].TaskID
	if _, err := e.store.ApplyEvent(context.Background(), models.TransitionRequest{TaskID: running, Event: models.EventAssigned, AgentID: "x"}); err != nil {
		t.Fatal(err)
	}

	var got models.Task
	e.do("PATCH", "/api/v1/tasks/"+a, `{"title":"A, renamed","priority":3,"test_commands":[],"verification_type":"HUMAN"}`).
		decode(t, http.StatusOK, &got)
	if got.ID != a || got.Title != "A, renamed" || got.Priority != 3 || len(got.TestCommands) != 0 ||
		got.VerificationType != models.VerifyHuman || got.Status != models.StatusReady {
		t.Fatalf("PATCH answered %+v", got)
	}
	if d := e.taskDetail(a); d.Task.Title != "A, renamed" || len(d.Task.TestCommands) != 0 {
		t.Fatalf("stored %+v", d.Task)
	}
	// The fields a task is created with that route it can change too.
	e.do("PATCH", "/api/v1/tasks/"+a, `{"agent_type":"codex","timeout":"90s","expected_count":4,"kind":"ingest",
		"metadata":{"source":"web"}}`).decode(t, http.StatusOK, &got)
	if got.AgentType != "codex" || got.Timeout != models.Duration(90*time.Second) || got.ExpectedCount != 4 || got.Kind != "ingest" ||
		got.Metadata["source"] != "web" {
		t.Fatalf("PATCH of the routing fields answered %+v", got)
	}
	e.do("PATCH", "/api/v1/tasks/"+a, `{"agent_type":"","timeout":0,"metadata":{}}`).decode(t, http.StatusOK, &got)
	if d := e.taskDetail(a); d.Task.AgentType != "" || d.Task.Timeout != 0 || len(d.Task.Metadata) != 0 || d.Task.Kind != "ingest" {
		t.Fatalf("clearing agent_type, timeout and metadata stored %+v", d.Task)
	}
	if !strings.Contains(e.logs.String(), `msg="task edited" task_id=`+a) {
		t.Errorf("edit not logged:\n%s", e.logs)
	}

	tests := []struct {
		name, id, body string
		status         int
		code           models.ErrorCode
		msg            string
	}{
		{"running task", running, `{"title":"x"}`, 409, models.CodeConflict, "is ASSIGNED"},
		{"running task's agent type", running, `{"agent_type":"codex"}`, 409, models.CodeConflict, "is ASSIGNED"},
		{"unknown agent type", a, `{"agent_type":"gpt"}`, 400, models.CodeInvalid, `agent_type: "gpt" is not an agent type`},
		{"bad timeout", a, `{"timeout":"soon"}`, 400, models.CodeInvalid, `"soon" is not a duration`},
		{"timeout too long", a, `{"timeout":"200h"}`, 400, models.CodeInvalid, "timeout: must be 0 (none) or between"},
		{"negative expected_count", a, `{"expected_count":-2}`, 400, models.CodeInvalid, "expected_count: must not be negative"},
		{"metadata of numbers", a, `{"metadata":{"n":1}}`, 400, models.CodeInvalid, "metadata"},
		{"missing task", "no-such-task", `{"title":"x"}`, 404, models.CodeNotFound, `task "no-such-task" not found`},
		{"empty patch", a, `{}`, 400, models.CodeInvalid, "nothing to change"},
		{"bad priority", a, `{"priority":-1}`, 400, models.CodeInvalid, "priority"},
		{"wrong type", a, `{"priority":"high"}`, 400, models.CodeInvalid, `field "priority": expected an integer`},
		{"daemon-owned field", a, `{"status":"COMPLETED"}`, 400, models.CodeInvalid, `unknown field "status"`},
		{"dependencies are not edited here", a, `{"dependencies":[]}`, 400, models.CodeInvalid, `unknown field "dependencies"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.do("PATCH", "/api/v1/tasks/"+tc.id, tc.body).wantError(t, tc.status, tc.code, tc.msg)
		})
	}
	if d := e.taskDetail(a); d.Task.Title != "A, renamed" || d.Task.Priority != 3 {
		t.Fatalf("refused edits changed the task: %+v", d.Task)
	}
}

func TestDependenciesEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.createProject("web")
	res := e.createTasks(`{"project_id":"web","tasks":[{"id":"a","title":"A"},{"id":"b","title":"B","dependencies":[{"id":"a"}]},
		{"id":"c","title":"C"}]}`)
	a, b, c := res[0].TaskID, res[1].TaskID, res[2].TaskID

	var dr models.DependencyResult
	e.do("POST", "/api/v1/tasks/"+b+"/dependencies", `{"add":[{"id":"`+c+`","requires_success":false}],"remove":["`+a+`"]}`).
		decode(t, http.StatusOK, &dr)
	if dr.Task.ID != b || dr.Task.Status != models.StatusDefined || len(dr.Dependencies) != 1 || dr.Dependencies[0].Upstream != c ||
		dr.Dependencies[0].RequiresSuccess || dr.Added[0] != c || dr.Removed[0] != a {
		t.Fatalf("answer %+v", dr)
	}
	e.do("POST", "/api/v1/tasks/"+b+"/dependencies", `{"remove":["`+c+`"]}`).decode(t, http.StatusOK, &dr)
	// No dependency left: an empty array, not null.
	if dr.Task.Status != models.StatusReady || len(dr.Promoted) != 1 || dr.Promoted[0] != b || dr.Dependencies == nil {
		t.Fatalf("removing the last dependency: %+v", dr)
	}
	more := e.createTasks(`{"project_id":"web","tasks":[{"id":"x","title":"X","dependencies":[{"id":"` + a + `"}]},
		{"id":"y","title":"Y","dependencies":[{"id":"x"}]}]}`)
	x, y := more[0].TaskID, more[1].TaskID

	tests := []struct {
		name, id, body string
		status         int
		code           models.ErrorCode
		msg            string
	}{
		{"cycle", x, `{"add":[{"id":"` + y + `"}]}`, 400, models.CodeInvalid, "dependency cycle: " + x + " -> " + y + " -> " + x},
		{"unknown upstream", a, `{"add":[{"id":"no-such-task"}]}`, 404, models.CodeNotFound, `add[0]: task "no-such-task" not found`},
		{"missing edge", a, `{"remove":["` + b + `"]}`, 404, models.CodeNotFound, "does not depend on"},
		{"missing task", "no-such-task", `{"remove":["` + a + `"]}`, 404, models.CodeNotFound, `task "no-such-task" not found`},
		{"nothing", a, `{}`, 400, models.CodeInvalid, "nothing to change"},
		{"unknown field", a, `{"add":[{"id":"` + b + `","required":true}]}`, 400, models.CodeInvalid, `unknown field "required"`},
		{"ids as objects", a, `{"remove":[{"id":"` + b + `"}]}`, 400, models.CodeInvalid, "expected a string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.do("POST", "/api/v1/tasks/"+tc.id+"/dependencies", tc.body).wantError(t, tc.status, tc.code, tc.msg)
		})
	}
}

func TestDeleteEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.createProject("web")
	res := e.createTasks(`{"project_id":"web","tasks":[{"id":"a","title":"A"},{"id":"b","title":"B","dependencies":[{"id":"a"}]}]}`)
	a, b := res[0].TaskID, res[1].TaskID
	e.do("POST", "/api/v1/agents", `{"id":"a1","agent_type":"command","command":"/bin/true"}`).decode(t, 201, new(models.Agent))

	e.do("DELETE", "/api/v1/tasks/"+a, "").wantError(t, 409, models.CodeConflict, "has dependents ("+b+")")
	e.do("DELETE", "/api/v1/tasks/"+b+"?force=1", "").wantError(t, 400, models.CodeInvalid, "query parameters are not accepted")
	r := e.do("DELETE", "/api/v1/tasks/"+b, "")
	if r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("DELETE task: %d %q", r.status, r.body)
	}
	e.do("GET", "/api/v1/tasks/"+b, "").wantError(t, 404, models.CodeNotFound, "not found")
	e.do("DELETE", "/api/v1/tasks/"+b, "").wantError(t, 404, models.CodeNotFound, "not found")
	if !strings.Contains(e.logs.String(), `msg="task deleted" task_id=`+b) {
		t.Errorf("delete not logged:\n%s", e.logs)
	}

	if r := e.do("DELETE", "/api/v1/agents/a1", ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE agent: %d %s", r.status, r.body)
	}
	e.do("DELETE", "/api/v1/agents/a1", "").wantError(t, 404, models.CodeNotFound, `agent "a1" not found`)
	var al api.AgentList
	e.do("GET", "/api/v1/agents", "").decode(t, 200, &al)
	if len(al.Agents) != 0 {
		t.Fatalf("agents after removal: %+v", al.Agents)
	}

	r = e.do("PUT", "/api/v1/tasks/"+a, `{}`)
	r.wantError(t, 405, models.CodeInvalid, "allowed: GET, PATCH, DELETE")
	if got := r.header.Get("Allow"); got != "GET, PATCH, DELETE" {
		t.Errorf("Allow = %q", got)
	}
}

func TestBudgetEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.createProject("web")
	e.do("POST", "/api/v1/projects", `{"id":"api","budget_limit":50}`).decode(t, 201, new(models.Project))
	ctx := context.Background()
	for _, u := range []models.TokenUsage{
		{ProjectID: "web", Input: 30},
		{ProjectID: "api", Output: 60},
		{ProjectID: "api", Output: 1000, CreatedAt: time.Now().Add(-2 * budgetWindow)},
	} {
		if err := e.store.RecordTokenUsage(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	var b models.BudgetReport
	e.do("GET", "/api/v1/budget", "").decode(t, http.StatusOK, &b)
	if b.Window.Std() != budgetWindow || b.Global.Budget == nil || *b.Global.Budget != 100 || b.Global.TokensInWindow != 90 ||
		b.Global.Exhausted || len(b.Projects) != 2 {
		t.Fatalf("report %+v", b)
	}
	if p := b.Projects[0]; p.ProjectID != "api" || p.TokensInWindow != 60 || p.TotalTokensUsed != 1060 || *p.BudgetLimit != 50 {
		t.Errorf("api: %+v", p)
	}
	if p := b.Projects[1]; p.ProjectID != "web" || p.TokensInWindow != 30 || p.BudgetLimit != nil {
		t.Errorf("web: %+v", p)
	}
	e.do("GET", "/api/v1/budget?project=web", "").wantError(t, 400, models.CodeInvalid, "query parameters are not accepted")
	if got, err := e.client.Budget(ctx); err != nil || got.Global.TokensInWindow != 90 {
		t.Fatalf("client: %+v %v", got, err)
	}
}

func TestEditingClientMethods(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{Token: "tok"})
	c, ctx := e.client, context.Background()
	if _, err := c.CreateProject(ctx, models.ProjectSpec{ID: "web"}.Project()); err != nil {
		t.Fatal(err)
	}
	res, err := c.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{LocalID: "a", Title: "A"},
		{LocalID: "b", Title: "B", Dependencies: []models.BatchDependency{{ID: "a"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := res[0].TaskID, res[1].TaskID
	title := "B2"
	if got, err := c.EditTask(ctx, b, models.TaskPatch{Title: &title}); err != nil || got.Title != title {
		t.Fatalf("EditTask = %+v, %v", got, err)
	}
	dr, err := c.ChangeDependencies(ctx, b, models.DependencyChange{Remove: []string{a}})
	if err != nil || dr.Task.Status != models.StatusReady {
		t.Fatalf("ChangeDependencies = %+v, %v", dr, err)
	}
	if err := c.DeleteTask(ctx, b); err != nil {
		t.Fatalf("DeleteTask: %v", err)
	}
	if err := c.DeleteTask(ctx, b); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("DeleteTask again: %v", err)
	}
	if _, err := c.RegisterAgent(ctx, models.AgentRegistration{ID: "c1", AgentType: "codex"}.Agent()); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveAgent(ctx, "c1"); err != nil {
		t.Fatalf("RemoveAgent: %v", err)
	}
	if err := c.RemoveAgent(ctx, "c1"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("RemoveAgent again: %v", err)
	}
}
