package api_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func TestHealthz(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{Token: "t0ken"})
	e.token = "" // healthz needs no token
	var h api.Health
	e.do("GET", "/healthz", "").decode(t, http.StatusOK, &h)
	if h.Status != "ok" {
		t.Errorf("status = %q, want ok", h.Status)
	}
	if h.Database != "" {
		t.Errorf("database = %q without a DatabaseID", h.Database)
	}
}

// TestHealthzNamesTheDatabase: the answer, healthy or not, carries the
// configured database id, without a token.
func TestHealthzNamesTheDatabase(t *testing.T) {
	t.Parallel()
	for _, healthy := range []bool{true, false} {
		e := newEnv(t, api.Config{Token: "t0ken", DatabaseID: "sha256:0123456789abcdef"})
		e.token = ""
		status := http.StatusOK
		if !healthy {
			if err := e.store.Close(); err != nil {
				t.Fatal(err)
			}
			status = http.StatusServiceUnavailable
		}
		var h api.Health
		e.do("GET", "/healthz", "").decode(t, status, &h)
		if h.Database != "sha256:0123456789abcdef" {
			t.Errorf("healthy %v: database = %q", healthy, h.Database)
		}
	}
}

// TestHealthzNoticesDamagedDatabase: a database damaged while the daemon
// ran kept /healthz at 200 (its check read nothing) while lists answered
// 500; it is a 503 saying the database is damaged.
func TestHealthzNoticesDamagedDatabase(t *testing.T) {
	t.Parallel()
	e, path := newEnvWithDB(t)
	e.createProject("web")
	e.createTasks(`{"project_id":"web","tasks":[{"title":"One"},{"title":"Two"}]}`)
	e.do("GET", "/healthz", "").decode(t, http.StatusOK, &api.Health{})
	storetest.DamageTable(t, path, "tasks")
	if r := e.do("GET", "/api/v1/tasks?project=web", ""); r.status != http.StatusInternalServerError {
		t.Fatalf("a list of the damaged tasks: %d %s", r.status, r.body)
	}
	e.do("GET", "/healthz", "").wantError(t, http.StatusServiceUnavailable, models.CodeInternal,
		"store unavailable: the database is damaged")
}

func TestHealthzReportsStoreFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	r := e.do("GET", "/healthz", "")
	r.wantError(t, http.StatusServiceUnavailable, models.CodeInternal, "store unavailable")
	if !strings.Contains(e.logs.String(), "health check failed") {
		t.Errorf("the failure was not logged; logs:\n%s", e.logs)
	}
}

func TestProjects(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})

	r := e.do("POST", "/api/v1/projects", `{"id":"web","name":"Web site","max_concurrent_agents":3,
		"repo":{"source_type":"CLONE","url":"https://example.com/web.git"}}`)
	var p models.Project
	r.decode(t, http.StatusCreated, &p)
	if p.ID != "web" || p.Name != "Web site" || p.MaxConcurrentAgents != 3 || p.CreditWeight != models.DefaultCreditWeight ||
		p.Status != models.ProjectActive {
		t.Errorf("created project = %+v", p)
	}
	if p.Repo == nil || p.Repo.URL != "https://example.com/web.git" || p.Repo.DefaultBranch != models.DefaultBranch {
		t.Errorf("created repo = %+v", p.Repo)
	}
	if loc := r.header.Get("Location"); loc != "/api/v1/projects/web" {
		t.Errorf("Location = %q", loc)
	}
	e.createProject("api")

	var got models.Project
	e.do("GET", "/api/v1/projects/web", "").decode(t, http.StatusOK, &got)
	if got.ID != "web" || got.Repo == nil || got.Repo.URL != p.Repo.URL {
		t.Errorf("GET project = %+v", got)
	}

	var list api.ProjectList
	e.do("GET", "/api/v1/projects", "").decode(t, http.StatusOK, &list)
	if len(list.Projects) != 2 || list.Projects[0].ID != "api" || list.Projects[1].ID != "web" {
		t.Errorf("list = %+v", list.Projects)
	}

	var patched models.Project
	e.do("PATCH", "/api/v1/projects/web", `{"name":"Website","status":"PAUSED","budget_limit":1000}`).
		decode(t, http.StatusOK, &patched)
	if patched.Name != "Website" || patched.Status != models.ProjectPaused || patched.BudgetLimit == nil ||
		*patched.BudgetLimit != 1000 || patched.MaxConcurrentAgents != 3 {
		t.Errorf("patched = %+v", patched)
	}
	e.do("GET", "/api/v1/projects/web", "").decode(t, http.StatusOK, &got)
	if got.Name != "Website" || got.Status != models.ProjectPaused {
		t.Errorf("GET after PATCH = %+v", got)
	}
}

func TestProjectErrorsWriteNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.createProject("web")

	tests := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		code   models.ErrorCode
		msg    string
	}{
		{"duplicate", "POST", "/api/v1/projects", `{"id":"web"}`, 409, models.CodeConflict, `project "web" already exists`},
		{"bad id", "POST", "/api/v1/projects", `{"id":"Not Valid"}`, 400, models.CodeInvalid, `project id "Not Valid"`},
		{"bad repo", "POST", "/api/v1/projects", `{"id":"x","repo":{"source_type":"CLONE"}}`, 400, models.CodeInvalid, "repo.url: required"},
		{"unknown field", "POST", "/api/v1/projects", `{"id":"x","nmae":"X"}`, 400, models.CodeInvalid, `request body: unknown field "nmae"`},
		{"daemon-owned field", "POST", "/api/v1/projects", `{"id":"x","total_tokens_used":5}`, 400, models.CodeInvalid, `unknown field "total_tokens_used"`},
		{"malformed", "POST", "/api/v1/projects", `{"id":"x",}`, 400, models.CodeInvalid, "request body: invalid JSON at offset 11: invalid character"},
		{"trailing data", "POST", "/api/v1/projects", `{"id":"x"} {"id":"y"}`, 400, models.CodeInvalid, "unexpected data after the JSON value"},
		{"wrong type", "POST", "/api/v1/projects", `{"id":"x","max_concurrent_agents":"two"}`, 400, models.CodeInvalid,
			`field "max_concurrent_agents": expected an integer, got JSON string`},
		{"empty body", "POST", "/api/v1/projects", ``, 400, models.CodeInvalid, "request body: empty"},
		{"truncated", "POST", "/api/v1/projects", `{"id":"x"`, 400, models.CodeInvalid, "request body: JSON ends unexpectedly"},
		{"get missing", "GET", "/api/v1/projects/nope", ``, 404, models.CodeNotFound, `project "nope" not found`},
		{"patch missing", "PATCH", "/api/v1/projects/nope", `{"name":"N"}`, 404, models.CodeNotFound, `project "nope" not found`},
		{"patch invalid", "PATCH", "/api/v1/projects/web", `{"max_concurrent_agents":0}`, 400, models.CodeInvalid, "max_concurrent_agents"},
		{"patch unknown field", "PATCH", "/api/v1/projects/web", `{"name":"N","id":"other"}`, 400, models.CodeInvalid, `unknown field "id"`},
		{"query on list", "GET", "/api/v1/projects?x=1", ``, 400, models.CodeInvalid, "query parameters are not accepted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.do(tt.method, tt.path, tt.body).wantError(t, tt.status, tt.code, tt.msg)
		})
	}

	var list api.ProjectList
	e.do("GET", "/api/v1/projects", "").decode(t, http.StatusOK, &list)
	if len(list.Projects) != 1 || list.Projects[0].ID != "web" || list.Projects[0].Name != "web" ||
		list.Projects[0].MaxConcurrentAgents != models.DefaultMaxConcurrentAgents {
		t.Errorf("after bad requests, projects = %+v", list.Projects)
	}
}

func TestCreateTasksAndDetail(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.createProject("web")

	results := e.createTasks(`{"project_id":"web","created_by":"alice","tasks":[
		{"id":"schema","title":"Design the schema","priority":10,"test_commands":["go test ./..."]},
		{"id":"api","title":"Build the API","dependencies":[{"id":"schema"}],"metadata":{"area":"backend"}},
		{"id":"docs","title":"Write docs","dependencies":[{"id":"api","requires_success":false}]}]}`)
	if len(results) != 3 {
		t.Fatalf("results = %+v", results)
	}
	wantStatus := []models.TaskStatus{models.StatusReady, models.StatusDefined, models.StatusDefined}
	for i, r := range results {
		if r.Status != wantStatus[i] || r.TaskID == "" || r.Skipped {
			t.Errorf("results[%d] = %+v, want status %s", i, r, wantStatus[i])
		}
	}
	if results[0].LocalID != "schema" || results[1].LocalID != "api" {
		t.Errorf("local ids not echoed: %+v", results)
	}
	schemaID, apiID, docsID := results[0].TaskID, results[1].TaskID, results[2].TaskID

	d := e.taskDetail(apiID)
	if d.Task.ID != apiID || d.Task.Title != "Build the API" || d.Task.CreatedBy != "alice" ||
		d.Task.ProjectID != "web" || d.Task.Metadata["area"] != "backend" {
		t.Errorf("detail task = %+v", d.Task)
	}
	if len(d.Dependencies) != 1 || d.Dependencies[0].Upstream != schemaID || !d.Dependencies[0].RequiresSuccess ||
		d.Dependencies[0].Resolution != models.EdgePending {
		t.Errorf("dependencies = %+v", d.Dependencies)
	}
	if len(d.Dependents) != 1 || d.Dependents[0].Downstream != docsID || d.Dependents[0].RequiresSuccess {
		t.Errorf("dependents = %+v", d.Dependents)
	}
	if d.Events == nil {
		t.Error("events is null, want an array")
	}

	// A bare array whose entries name their project, depending on an existing task.
	results = e.createTasks(`[{"project_id":"web","title":"Deploy","dependencies":[{"id":"` + docsID + `"}]}]`)
	if len(results) != 1 || results[0].Status != models.StatusDefined {
		t.Fatalf("array batch results = %+v", results)
	}
	if got := e.listTasks("?project=web"); len(got) != 4 {
		t.Errorf("project has %d tasks, want 4", len(got))
	}

	e.do("GET", "/api/v1/tasks/no-such-task", "").wantError(t, http.StatusNotFound, models.CodeNotFound, `task "no-such-task" not found`)
}

func TestCreateTasksBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.createProject("web")
	existing := e.createTasks(`{"project_id":"web","tasks":[{"title":"existing"}]}`)[0].TaskID

	tests := []struct {
		name   string
		body   string
		header []string
		status int
		code   models.ErrorCode
		msg    string
	}{
		{"malformed JSON", `{"project_id":"web","tasks":[{"title":"a"]}`, nil, 400, models.CodeInvalid, "request body: invalid JSON at offset"},
		{"unknown field", `{"project_id":"web","tasks":[{"titel":"a"}]}`, nil, 400, models.CodeInvalid, `request body: unknown field "titel"`},
		{"unknown batch field", `{"project":"web","tasks":[{"title":"a"}]}`, nil, 400, models.CodeInvalid, `request body: unknown field "project"`},
		{"trailing data", `{"project_id":"web","tasks":[{"title":"a"}]}x`, nil, 400, models.CodeInvalid, "unexpected data after the JSON value"},
		{"trailing array", `[{"project_id":"web","title":"a"}] []`, nil, 400, models.CodeInvalid, "unexpected data after the JSON value"},
		{"cycle", `{"project_id":"web","tasks":[
			{"id":"a","title":"A","dependencies":[{"id":"c"}]},
			{"id":"b","title":"B","dependencies":[{"id":"a"}]},
			{"id":"c","title":"C","dependencies":[{"id":"b"}]}]}`, nil, 400, models.CodeInvalid, "dependency cycle"},
		{"self dependency", `{"project_id":"web","tasks":[{"id":"a","title":"A","dependencies":[{"id":"a"}]}]}`, nil, 400, models.CodeInvalid, "cannot depend on itself"},
		{"missing project", `{"project_id":"nope","tasks":[{"title":"a"}]}`, nil, 404, models.CodeNotFound, `project "nope" not found`},
		{"no project", `[{"title":"a"}]`, nil, 400, models.CodeInvalid, "project_id: required"},
		{"unknown dependency", `{"project_id":"web","tasks":[{"title":"a"},{"title":"b","dependencies":[{"id":"ghost"}]}]}`, nil, 404, models.CodeNotFound, `"ghost"`},
		{"second entry invalid", `{"project_id":"web","tasks":[{"title":"ok"},{"title":""}]}`, nil, 400, models.CodeInvalid, "tasks[1]: title: required"},
		{"empty batch", `{"project_id":"web","tasks":[]}`, nil, 400, models.CodeInvalid, "the batch is empty"},
		{"unknown agent type", `{"project_id":"web","tasks":[{"id":"a","title":"A","agent_type":"gpt"}]}`, nil, 400, models.CodeInvalid,
			`tasks[0] (a): agent_type: "gpt" is not an agent type (claude, codex, cursor, aider, command)`},
		{"name and title differ", `{"project_id":"web","tasks":[{"id":"a","name":"One","title":"Two"}]}`, nil, 400, models.CodeInvalid,
			`tasks[0] (a): name and title: both given and different (name "One", title "Two")`},
		{"wrong type", `{"project_id":"web","tasks":[{"title":"a","priority":"high"}]}`, nil, 400, models.CodeInvalid, `field "tasks.priority": expected an integer`},
		{"wrong content type", `{"project_id":"web","tasks":[{"title":"a"}]}`, []string{"Content-Type", "text/plain"}, 415, models.CodeInvalid, "Content-Type must be application/json"},
		{"not an object", `"tasks"`, nil, 400, models.CodeInvalid, "request body: expected an object, got JSON string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.do("POST", "/api/v1/tasks", tt.body, tt.header...).wantError(t, tt.status, tt.code, tt.msg)
		})
	}
	if got := e.listTasks(""); len(got) != 1 || got[0].ID != existing {
		t.Errorf("after bad batches, tasks = %+v, want only %s", got, existing)
	}
	if d := e.taskDetail(existing); len(d.Dependents) != 0 {
		t.Errorf("a failed batch left edges: %+v", d.Dependents)
	}
}

// TestCreateTasksTakesTheSpecificationsName checks that an entry may name
// its title "name", as the specification does, or give both when equal.
func TestCreateTasksTakesTheSpecificationsName(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.createProject("web")
	res := e.createTasks(`{"project_id":"web","tasks":[{"id":"a","name":"Fix the login"},
		{"id":"b","name":"Same","title":"Same","dependencies":[{"id":"a"}]}]}`)
	for i, want := range []string{"Fix the login", "Same"} {
		if got := e.taskDetail(res[i].TaskID).Task.Title; got != want {
			t.Errorf("tasks[%d]: title %q, want %q", i, got, want)
		}
	}
}

// TestCreateTasksKeepsTheAgentType checks that a task's agent_type is
// stored and answered.
func TestCreateTasksKeepsTheAgentType(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.createProject("web")
	res := e.createTasks(`{"project_id":"web","tasks":[{"title":"Review","agent_type":"codex"},{"title":"Any"}]}`)
	for i, want := range []string{"codex", ""} {
		if got := e.taskDetail(res[i].TaskID).Task.AgentType; got != want {
			t.Errorf("tasks[%d]: agent_type %q, want %q", i, got, want)
		}
	}
}

func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{MaxBodyBytes: 64})
	body := `{"id":"web","name":"` + strings.Repeat("x", 100) + `"}`
	e.do("POST", "/api/v1/projects", body).wantError(t, http.StatusRequestEntityTooLarge, models.CodeInvalid, "larger than 64 bytes")
	var list api.ProjectList
	e.do("GET", "/api/v1/projects", "").decode(t, http.StatusOK, &list)
	if len(list.Projects) != 0 {
		t.Errorf("projects = %+v", list.Projects)
	}
}

func TestListTasksQuery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.createProject("web")
	e.createProject("api")
	res := e.createTasks(`{"project_id":"web","tasks":[{"id":"a","title":"A"},{"id":"b","title":"B","dependencies":[{"id":"a"}]},{"title":"C"}]}`)
	e.createTasks(`{"project_id":"api","tasks":[{"title":"D"}]}`)

	ids := func(ts []models.Task) []string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = t.ID
		}
		return out
	}
	tests := []struct {
		query string
		want  []string
	}{
		{"", nil}, // all four, checked by count below
		{"?project=web", []string{res[0].TaskID, res[1].TaskID, res[2].TaskID}},
		{"?project=web&status=READY", []string{res[0].TaskID, res[2].TaskID}},
		{"?project=web&status=DEFINED", []string{res[1].TaskID}},
		{"?project=web&status=READY,DEFINED", []string{res[0].TaskID, res[1].TaskID, res[2].TaskID}},
		{"?project=web&status=ready&status=defined", []string{res[0].TaskID, res[1].TaskID, res[2].TaskID}},
		{"?project=web&status=Finished", []string{}},
		{"?project=web&limit=2", []string{res[0].TaskID, res[1].TaskID}},
		{"?project=web&limit=2&after=" + res[1].TaskID, []string{res[2].TaskID}},
	}
	for _, tt := range tests {
		got := ids(e.listTasks(tt.query))
		if tt.want == nil {
			if len(got) != 4 {
				t.Errorf("GET /api/v1/tasks%s = %v, want 4 tasks", tt.query, got)
			}
			continue
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("GET /api/v1/tasks%s = %v, want %v", tt.query, got, tt.want)
		}
	}

	bad := []struct {
		query  string
		status int
		code   models.ErrorCode
		msg    string
	}{
		{"?status=READY,DONE", 400, models.CodeInvalid, `status "DONE"`},
		{"?status=bogus", 400, models.CodeInvalid, `status "bogus"`},
		{"?limit=0", 400, models.CodeInvalid, `limit: must be an integer between 1 and 500 (got "0")`},
		{"?limit=ten", 400, models.CodeInvalid, `limit: must be an integer between 1 and 500 (got "ten")`},
		{"?limit=501", 400, models.CodeInvalid, `limit: must be an integer between 1 and 500 (got "501")`},
		{"?projcet=web", 400, models.CodeInvalid, `query parameter "projcet": unknown`},
		{"?project=a&project=b", 400, models.CodeInvalid, `query parameter "project": given more than once`},
		{"?project=nope", 404, models.CodeNotFound, `project "nope" not found`},
		{"?status=%zz", 400, models.CodeInvalid, "query:"},
	}
	for _, tt := range bad {
		t.Run(tt.query, func(t *testing.T) {
			e.do("GET", "/api/v1/tasks"+tt.query, "").wantError(t, tt.status, tt.code, tt.msg)
		})
	}
}

func TestTaskEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.createProject("web")
	res := e.createTasks(`{"project_id":"web","tasks":[{"id":"a","title":"A"},{"id":"b","title":"B","dependencies":[{"id":"a"}]}]}`)
	readyID, definedID := res[0].TaskID, res[1].TaskID

	// An admin event moves the DEFINED task to READY.
	var tr models.TransitionResult
	e.do("POST", "/api/v1/tasks/"+definedID+"/events", `{"event":"ADMIN_RESTART","reason":"unblock it","actor":"bob"}`).
		decode(t, http.StatusOK, &tr)
	if tr.From != models.StatusDefined || tr.To != models.StatusReady || tr.Task.Status != models.StatusReady || tr.Task.ID != definedID {
		t.Errorf("transition = %+v", tr)
	}
	d := e.taskDetail(definedID)
	last := d.Events[len(d.Events)-1]
	if last.Event != models.EventAdminRestart || last.Reason != "unblock it" || last.Actor != "bob" {
		t.Errorf("last event = %+v", last)
	}

	before := len(e.taskDetail(readyID).Events)
	tests := []struct {
		name   string
		task   string
		body   string
		status int
		code   models.ErrorCode
		msg    string
	}{
		{"illegal transition", readyID, `{"event":"ADMIN_SKIP"}`, 409, models.CodeConflict, "Invalid transition: (READY, ADMIN_SKIP)"},
		{"illegal stop", readyID, `{"event":"ADMIN_STOP","reason":"why"}`, 409, models.CodeConflict, "Invalid transition: (READY, ADMIN_STOP)"},
		{"non-admin event", readyID, `{"event":"ASSIGNED"}`, 400, models.CodeInvalid,
			`event "ASSIGNED": not accepted through the API (allowed: ADMIN_SKIP, ADMIN_STOP, ADMIN_RESTART, ADMIN_CANCEL)`},
		{"unknown event", readyID, `{"event":"EXPLODE"}`, 400, models.CodeInvalid,
			`event "EXPLODE": unknown event (allowed: ADMIN_SKIP, ADMIN_STOP, ADMIN_RESTART, ADMIN_CANCEL)`},
		{"missing event", readyID, `{"reason":"x"}`, 400, models.CodeInvalid, "event: required"},
		{"unknown field", readyID, `{"event":"ADMIN_RESTART","agent_id":"x"}`, 400, models.CodeInvalid, `unknown field "agent_id"`},
		{"missing task", "no-such-task", `{"event":"ADMIN_RESTART"}`, 404, models.CodeNotFound, `task "no-such-task" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("POST", "/api/v1/tasks/"+tt.task+"/events", tt.body)
			r.wantError(t, tt.status, tt.code, tt.msg)
			if tt.code == models.CodeConflict {
				var eb api.ErrorBody
				r.decode(t, tt.status, &eb)
				if eb.Error.Message != tt.msg {
					t.Errorf("conflict message = %q, want exactly %q", eb.Error.Message, tt.msg)
				}
			}
		})
	}
	d = e.taskDetail(readyID)
	if d.Task.Status != models.StatusReady || len(d.Events) != before {
		t.Errorf("after refused events: status %s, %d events (want READY, %d)", d.Task.Status, len(d.Events), before)
	}
}

func TestAgents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	var a models.Agent
	e.do("POST", "/api/v1/agents", `{"id":"claude-1","agent_type":"claude"}`).decode(t, http.StatusCreated, &a)
	if a.ID != "claude-1" || a.Name != "claude-1" || a.State != models.AgentIdle {
		t.Errorf("agent = %+v", a)
	}
	e.do("POST", "/api/v1/agents", `{"id":"claude-1","agent_type":"claude"}`).wantError(t, 409, models.CodeConflict, `agent "claude-1" already exists`)
	e.do("POST", "/api/v1/agents", `{"id":"x","agent_type":"robot"}`).wantError(t, 400, models.CodeInvalid, "agent_type: must be one of")
	e.do("POST", "/api/v1/agents", `{"id":"x","agent_type":"claude","color":"red"}`).wantError(t, 400, models.CodeInvalid, `unknown field "color"`)
	e.do("POST", "/api/v1/agents", `{"id":"x","agent_type":"claude","state":"BUSY","pid":99}`).wantError(t, 400, models.CodeInvalid, `unknown field "state"`)

	var list api.AgentList
	e.do("GET", "/api/v1/agents", "").decode(t, http.StatusOK, &list)
	if len(list.Agents) != 1 || list.Agents[0].ID != "claude-1" {
		t.Errorf("agents = %+v", list.Agents)
	}
	var one models.Agent
	e.do("GET", "/api/v1/agents/claude-1", "").decode(t, http.StatusOK, &one)
	if one.ID != "claude-1" || one.AgentType != "claude" || one.State != models.AgentIdle {
		t.Errorf("agent claude-1 = %+v", one)
	}
	e.do("GET", "/api/v1/agents/ghost", "").wantError(t, 404, models.CodeNotFound, `agent "ghost" not found`)
	e.do("GET", "/api/v1/agents/claude-1?x=1", "").wantError(t, 400, models.CodeInvalid, "")
}

func TestEmptyListsAreArrays(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	for _, path := range []string{"/api/v1/projects", "/api/v1/tasks", "/api/v1/agents", "/api/v1/runners"} {
		r := e.do("GET", path, "")
		if r.status != 200 || !strings.Contains(string(r.body), "[]") {
			t.Errorf("GET %s = %d %s, want an empty array", path, r.status, r.body)
		}
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token"
	e := newEnv(t, api.Config{Token: token})
	e.token = ""

	tests := []struct {
		name   string
		auth   string
		status int
		msg    string
	}{
		{"missing", "", 401, "missing bearer token"},
		{"wrong scheme", "Basic " + token, 401, "missing bearer token"},
		{"wrong token", "Bearer nope", 401, "invalid bearer token"},
		{"prefix of the token", "Bearer s3cret", 401, "invalid bearer token"},
		{"right token", "Bearer " + token, 200, ""},
		{"scheme is case-insensitive", "bearer " + token, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/api/v1/projects", "/api/v1/tasks", "/api/v1/agents", "/api/v1/nope"} {
				r := e.do("GET", path, "", "Authorization", tt.auth)
				if tt.status == 200 {
					if r.status == http.StatusUnauthorized {
						t.Errorf("GET %s with %q: 401 %s", path, tt.auth, r.body)
					}
					continue
				}
				r.wantError(t, tt.status, models.CodeUnauthorized, tt.msg)
				if r.header.Get("WWW-Authenticate") == "" {
					t.Errorf("GET %s: no WWW-Authenticate header", path)
				}
			}
		})
	}
	// A write without the token changes nothing.
	e.do("POST", "/api/v1/projects", `{"id":"web"}`).wantError(t, 401, models.CodeUnauthorized, "missing bearer token")
	e.token = token
	var list api.ProjectList
	e.do("GET", "/api/v1/projects", "").decode(t, http.StatusOK, &list)
	if len(list.Projects) != 0 {
		t.Errorf("unauthenticated POST created %+v", list.Projects)
	}
	if strings.Contains(e.logs.String(), token) {
		t.Errorf("the token appears in the logs:\n%s", e.logs)
	}
}

func TestRoutingErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.do("GET", "/api/v1/nope", "").wantError(t, 404, models.CodeNotFound, "no such endpoint: GET /api/v1/nope")
	r := e.do("DELETE", "/api/v1/projects", "")
	r.wantError(t, 405, models.CodeInvalid, "method DELETE is not allowed on /api/v1/projects (allowed: GET, POST)")
	if got := r.header.Get("Allow"); got != "GET, POST" {
		t.Errorf("Allow = %q", got)
	}
	e.do("PUT", "/api/v1/tasks/abc/events", `{}`).wantError(t, 405, models.CodeInvalid, "allowed: POST")
}

func TestInternalErrorsDoNotLeak(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	r := e.do("GET", "/api/v1/projects", "")
	r.wantError(t, 500, models.CodeInternal, "internal error")
	if strings.Contains(string(r.body), "sql") || strings.Contains(string(r.body), "closed") {
		t.Errorf("answer leaks internals: %s", r.body)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "request failed") || !strings.Contains(logs, "err=") {
		t.Errorf("internal error not logged with key err:\n%s", logs)
	}
}

func TestClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{Token: "tok"})
	c, ctx := e.client, context.Background()

	if h, err := c.Health(ctx); err != nil || h.Status != "ok" {
		t.Fatalf("Health = %+v, %v", h, err)
	}
	p, err := c.CreateProject(ctx, models.ProjectSpec{ID: "web", Name: "Web"}.Project())
	if err != nil || p.ID != "web" {
		t.Fatalf("CreateProject = %+v, %v", p, err)
	}
	_, err = c.CreateProject(ctx, models.ProjectSpec{ID: "web"}.Project())
	var me *models.Error
	if !errors.As(err, &me) || me.Code != models.CodeConflict || me.Message != `project "web" already exists` {
		t.Errorf("duplicate CreateProject error = %#v", err)
	}
	if ps, err := c.ListProjects(ctx); err != nil || len(ps) != 1 {
		t.Errorf("ListProjects = %+v, %v", ps, err)
	}
	name := "Website"
	if p, err := c.UpdateProject(ctx, "web", models.ProjectPatch{Name: &name}); err != nil || p.Name != name {
		t.Errorf("UpdateProject = %+v, %v", p, err)
	}
	if p, err := c.GetProject(ctx, "web"); err != nil || p.Name != name {
		t.Errorf("GetProject = %+v, %v", p, err)
	}
	if _, err := c.GetProject(ctx, "nope"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Errorf("GetProject(nope) error = %v", err)
	}

	results, err := c.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{
		{LocalID: "a", Title: "A"},
		{LocalID: "b", Title: "B", Dependencies: []models.BatchDependency{{ID: "a"}}},
	}})
	if err != nil || len(results) != 2 {
		t.Fatalf("CreateTasks = %+v, %v", results, err)
	}
	ts, err := c.ListTasks(ctx, models.TaskFilter{ProjectID: "web", Statuses: []models.TaskStatus{models.StatusDefined}})
	if err != nil || len(ts) != 1 || ts[0].ID != results[1].TaskID {
		t.Errorf("ListTasks = %+v, %v", ts, err)
	}
	if ts, err := c.ListTasks(ctx, models.TaskFilter{Limit: 1, AfterID: results[0].TaskID}); err != nil || len(ts) != 1 || ts[0].ID != results[1].TaskID {
		t.Errorf("ListTasks(paged) = %+v, %v", ts, err)
	}
	d, err := c.GetTask(ctx, results[1].TaskID)
	if err != nil || len(d.Dependencies) != 1 {
		t.Errorf("GetTask = %+v, %v", d, err)
	}
	_, err = c.SendEvent(ctx, results[0].TaskID, api.EventRequest{Event: models.EventAdminSkip})
	if !errors.As(err, &me) || me.Code != models.CodeConflict || me.Message != "Invalid transition: (READY, ADMIN_SKIP)" {
		t.Errorf("SendEvent(illegal) error = %#v", err)
	}
	tr, err := c.SendEvent(ctx, results[1].TaskID, api.EventRequest{Event: models.EventAdminRestart, Reason: "go"})
	if err != nil || tr.To != models.StatusReady {
		t.Errorf("SendEvent = %+v, %v", tr, err)
	}
	if a, err := c.RegisterAgent(ctx, models.AgentRegistration{ID: "c1", AgentType: "codex"}.Agent()); err != nil || a.ID != "c1" {
		t.Errorf("RegisterAgent = %+v, %v", a, err)
	}
	if as, err := c.ListAgents(ctx); err != nil || len(as) != 1 {
		t.Errorf("ListAgents = %+v, %v", as, err)
	}

	bad, err := api.NewClient(e.srv.URL, "wrong", e.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.ListProjects(ctx); models.ErrorCodeOf(err) != models.CodeUnauthorized {
		t.Errorf("wrong token error = %v", err)
	}
}

func TestNewClientRejectsBadURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "127.0.0.1:7700", "ftp://host", "http://"} {
		if _, err := api.NewClient(u, "", nil); err == nil {
			t.Errorf("NewClient(%q) succeeded", u)
		}
	}
}

func TestApproveAndRejectEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	ctx := context.Background()
	if _, err := e.client.CreateProject(ctx, models.ProjectSpec{ID: "web"}.Project()); err != nil {
		t.Fatal(err)
	}
	res, err := e.client.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{Title: "a"}, {Title: "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		storetest.Apply(t, e.store, r.TaskID, append(storetest.ToVerifying, models.EventApprovalRequested)...)
	}
	a, b := res[0].TaskID, res[1].TaskID
	got, err := e.client.ApproveTask(ctx, a, "ana", "fine")
	if err != nil || got.To != models.StatusCompleted || got.Task.ID != a {
		t.Fatalf("approve: %+v %v", got, err)
	}
	var rejected models.TransitionResult
	e.do("POST", "/api/v1/tasks/"+b+"/reject", `{"feedback":"add a test","by":"ana"}`).decode(t, 200, &rejected)
	if rejected.From != models.StatusAwaitingApproval || rejected.To != models.StatusReady {
		t.Fatalf("reject: %+v", rejected)
	}
	if fb, _ := e.store.TaskFeedback(ctx, b); len(fb) != 1 || fb[0].Text != "add a test" || fb[0].Source != "ana" {
		t.Fatalf("feedback %+v", fb)
	}
	if r := e.do("POST", "/api/v1/tasks/"+b+"/approve", `{"feedback":"x","colour":"red"}`); r.status != 400 || !strings.Contains(string(r.body), "colour") {
		t.Fatalf("unknown field: %d %s", r.status, r.body)
	}
	e.do("POST", "/api/v1/tasks/"+a+"/approve", `{}`).wantError(t, http.StatusConflict, models.CodeConflict, "nothing waits for approval")
	if r := e.do("POST", "/api/v1/tasks/no-such/reject", `{"feedback":"x"}`); r.status != 404 {
		t.Fatalf("rejecting a missing task: %d %s", r.status, r.body)
	}
}
