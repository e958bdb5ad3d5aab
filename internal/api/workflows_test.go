package api_test

import (
	"context"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// newWorkflowEnv starts a server with workflow endpoints over the real
// service and its workflow engine, with project web.
func newWorkflowEnv(t *testing.T) *testEnv {
	t.Helper()
	logger, logs := newLogger()
	k := newKit(t, logger)
	e := serveKit(t, api.Config{Logger: logger, Workflows: k.Service}, k, logs)
	e.createProject("web")
	return e
}

// pipelineYAML builds, shards the tests two ways, then reports.
const pipelineYAML = `# A pipeline.
name: pipeline
project: web
description: Build, test in shards, report.
schedule: "0 2 * * *"
timezone: Europe/Paris
steps:
  - name: build
    title: "Build for {{run.id}}"
  - name: shards
    title: "Test shard {{index}} of {{count}}"
    depends_on: [build]
    parallel: 2
  - name: report
    title: Report
    depends_on:
      - step: shards
        requires_success: false
`

// reviewJSON is a workflow document in JSON.
const reviewJSON = `{"name": "review", "project": "web", "steps": [{"name": "read", "title": "Read the diff"}]}`

// postWorkflow posts a document with a Content-Type ("" for none).
func (e *testEnv) postWorkflow(doc, contentType string) response {
	e.t.Helper()
	return e.do("POST", "/api/v1/workflows", doc, "Content-Type", contentType)
}

func TestWorkflowRoutesNeedAWorkflowService(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	for _, path := range []string{"/api/v1/workflows", "/api/v1/workflows/pipeline", "/api/v1/runs", "/api/v1/runs/pipeline-1/tasks"} {
		e.do("GET", path, "").wantError(t, http.StatusNotFound, models.CodeNotFound, "no such endpoint")
	}
}

func TestSaveWorkflowEndpoint(t *testing.T) {
	t.Parallel()
	e := newWorkflowEnv(t)

	r := e.postWorkflow(pipelineYAML, "application/yaml")
	var created models.Workflow
	r.decode(t, http.StatusCreated, &created)
	if created.Name != "pipeline" || created.ProjectID != "web" || created.Origin != models.WorkflowFromAPI ||
		created.Schedule != "0 2 * * *" || created.Timezone != "Europe/Paris" || !created.ScheduleEnabled ||
		created.Source != pipelineYAML || len(created.Steps) != 3 || created.Steps[1].Parallel == nil ||
		created.Steps[1].Parallel.Count != 2 || created.Steps[2].DependsOn[0].Required() || created.CreatedAt.IsZero() {
		t.Fatalf("created %+v", created)
	}
	if loc := r.header.Get("Location"); loc != "/api/v1/workflows/pipeline" {
		t.Errorf("Location = %q", loc)
	}
	if !strings.Contains(e.logs.String(), `msg="workflow created" workflow=pipeline project_id=web steps=3`) {
		t.Errorf("creation not logged:\n%s", e.logs)
	}

	// JSON is a workflow document too, with its own type or none.
	var review models.Workflow
	e.postWorkflow(reviewJSON, "application/json; charset=utf-8").decode(t, http.StatusCreated, &review)
	if review.Name != "review" || review.Schedule != "" || !review.ScheduleEnabled || len(review.Steps) != 1 ||
		review.Steps[0].Title != "Read the diff" {
		t.Fatalf("created from JSON %+v", review)
	}

	// The same name replaces: 200, no Location, the creation time kept.
	replacement := strings.Replace(pipelineYAML, "parallel: 2", "parallel: 3", 1)
	for _, ct := range []string{"application/yaml; charset=utf-8", "text/yaml", "application/x-yaml"} {
		r := e.postWorkflow(replacement, ct)
		var replaced models.Workflow
		r.decode(t, http.StatusOK, &replaced)
		if replaced.Steps[1].Parallel.Count != 3 || !replaced.CreatedAt.Equal(created.CreatedAt) ||
			!replaced.UpdatedAt.After(created.UpdatedAt) || replaced.Source != replacement {
			t.Fatalf("replaced (Content-Type %q) %+v, created %+v", ct, replaced, created)
		}
		if loc := r.header.Get("Location"); loc != "" {
			t.Errorf("a replacement answered Location %q", loc)
		}
	}
	if !strings.Contains(e.logs.String(), `msg="workflow replaced" workflow=pipeline project_id=web`) {
		t.Errorf("replacement not logged:\n%s", e.logs)
	}

	tests := []struct {
		name, doc, contentType string
		status                 int
		code                   models.ErrorCode
		msg                    string // the whole message when exact
		exact                  bool
	}{
		{"unknown step", "name: broken\nproject: web\nsteps:\n  - name: build\n    title: Build\n  - name: test\n    title: Test\n    depends_on: [tets]\n",
			"application/yaml", 400, models.CodeInvalid,
			`request:8:18: steps[1].depends_on[0]: unknown step "tets" (steps: build, test)`, true},
		{"every problem, a line each", "name: Broken\nproject: web\nsteps:\n  - name: build\n    title: Build {{colour}}\n    verification: MAYBE\n",
			"application/yaml", 400, models.CodeInvalid,
			`request:1:7: name: "Broken" is not a workflow name (1-64 lower-case letters, digits, '-' or '_')` + "\n" +
				`request:5:12: steps[0].title: {{colour}}: unknown placeholder; allowed here: {{run.id}}, {{run.workflow}}` + "\n" +
				`request:6:19: steps[0].verification: must be AUTO_TEST, QA_AGENT or HUMAN (got "MAYBE")`, true},
		{"unknown key in JSON", `{"name":"j","project":"web","steps":[{"name":"a","title":"A","colour":"red"}]}`,
			"application/json", 400, models.CodeInvalid, `request:1:62: steps[0].colour: unknown key; known keys: name, title,`, false},
		{"not YAML", "name: x\nproject: web\nsteps:\n  - name: a\n   title: A\n", "application/yaml", 400, models.CodeInvalid,
			"request:3: not valid YAML: did not find expected '-' indicator", true},
		{"empty", "", "application/yaml", 400, models.CodeInvalid, "request:1:1: empty document; a workflow has name, project and steps", true},
		{"no steps", "name: x\nproject: web\nsteps: []\n", "application/yaml", 400, models.CodeInvalid, "request:3:8: steps: required (at least one step)", true},
		{"unknown project", "name: x\nproject: ghost\nsteps:\n  - name: a\n    title: A\n", "application/yaml", 404, models.CodeNotFound,
			`project "ghost" not found`, false},
		{"no media type", pipelineYAML, "", 415, models.CodeInvalid,
			`Content-Type must be one of application/yaml, application/x-yaml, text/yaml, application/json (got none)`, false},
		{"wrong media type", pipelineYAML, "text/plain", 415, models.CodeInvalid,
			`Content-Type must be one of application/yaml, application/x-yaml, text/yaml, application/json (got "text/plain")`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.postWorkflow(tc.doc, tc.contentType)
			r.wantError(t, tc.status, tc.code, tc.msg)
			if tc.exact {
				var eb api.ErrorBody
				r.decode(t, tc.status, &eb)
				if eb.Error.Message != tc.msg {
					t.Errorf("message:\n%s\nwant exactly:\n%s", eb.Error.Message, tc.msg)
				}
			}
		})
	}
	e.do("POST", "/api/v1/workflows?dry_run=1", pipelineYAML, "Content-Type", "application/yaml").
		wantError(t, 400, models.CodeInvalid, "query parameters are not accepted")

	ws, err := e.store.ListWorkflows(context.Background(), "")
	if err != nil || len(ws) != 2 || ws[0].Name != "pipeline" || ws[1].Name != "review" || ws[0].Steps[1].Parallel.Count != 3 {
		t.Fatalf("refused documents changed the workflows: %+v, %v", ws, err)
	}
}

func TestListGetScheduleAndDeleteWorkflows(t *testing.T) {
	t.Parallel()
	e := newWorkflowEnv(t)
	e.createProject("ops")
	e.createProject("idle")
	e.postWorkflow(pipelineYAML, "application/yaml").decode(t, http.StatusCreated, &models.Workflow{})
	e.postWorkflow(reviewJSON, "application/json").decode(t, http.StatusCreated, &models.Workflow{})
	e.postWorkflow("name: backup\nproject: ops\nsteps:\n  - name: check\n    title: Check the backups\n", "text/yaml").
		decode(t, http.StatusCreated, &models.Workflow{})

	names := func(query string) string {
		t.Helper()
		var l api.WorkflowList
		e.do("GET", "/api/v1/workflows"+query, "").decode(t, http.StatusOK, &l)
		var out []string
		for _, w := range l.Workflows {
			out = append(out, w.Name)
		}
		return strings.Join(out, ",")
	}
	for query, want := range map[string]string{"": "backup,pipeline,review", "?project=web": "pipeline,review",
		"?project=ops": "backup", "?project=idle": ""} {
		if got := names(query); got != want {
			t.Errorf("GET /api/v1/workflows%s = %q, want %q", query, got, want)
		}
	}
	if r := e.do("GET", "/api/v1/workflows?project=idle", ""); !strings.Contains(string(r.body), `"workflows":[]`) {
		t.Errorf("an empty list is not []: %s", r.body)
	}
	e.do("GET", "/api/v1/workflows?project=ghost", "").wantError(t, 404, models.CodeNotFound, `project "ghost" not found`)
	e.do("GET", "/api/v1/workflows?team=web", "").wantError(t, 400, models.CodeInvalid, `query parameter "team": unknown (known: project)`)
	e.do("GET", "/api/v1/workflows?project=web&project=ops", "").wantError(t, 400, models.CodeInvalid, "given more than once")

	var got models.Workflow
	e.do("GET", "/api/v1/workflows/pipeline", "").decode(t, http.StatusOK, &got)
	if got.Name != "pipeline" || got.Source != pipelineYAML || len(got.Steps) != 3 {
		t.Fatalf("GET answered %+v", got)
	}
	e.do("GET", "/api/v1/workflows/ghost", "").wantError(t, 404, models.CodeNotFound, `workflow "ghost" not found`)
	e.do("GET", "/api/v1/workflows/pipeline?verbose=1", "").wantError(t, 400, models.CodeInvalid, "query parameters are not accepted")

	// The schedule, off then on: on again, it counts from then.
	var off, on models.Workflow
	e.do("PATCH", "/api/v1/workflows/pipeline", `{"schedule_enabled":false}`).decode(t, http.StatusOK, &off)
	if off.ScheduleEnabled || off.Schedule != "0 2 * * *" || off.NextRun != nil {
		t.Fatalf("schedule off answered %+v", off)
	}
	if w, err := e.store.GetWorkflow(context.Background(), "pipeline"); err != nil || w.ScheduleEnabled {
		t.Fatalf("stored %+v, %v", w, err)
	}
	if !strings.Contains(e.logs.String(), `msg="workflow schedule changed" workflow=pipeline project_id=web schedule_enabled=false`) {
		t.Errorf("schedule change not logged:\n%s", e.logs)
	}
	e.do("PATCH", "/api/v1/workflows/pipeline", `{"schedule_enabled":true}`).decode(t, http.StatusOK, &on)
	if !on.ScheduleEnabled || !on.ScheduleFrom.After(off.ScheduleFrom) {
		t.Fatalf("schedule on answered %+v (off %+v)", on, off)
	}
	patches := []struct {
		name, workflow, body string
		status               int
		code                 models.ErrorCode
		msg                  string
	}{
		{"empty patch", "pipeline", `{}`, 400, models.CodeInvalid, "nothing to change (set schedule_enabled)"},
		{"unknown field", "pipeline", `{"schedule":"@daily"}`, 400, models.CodeInvalid, `unknown field "schedule"`},
		{"wrong type", "pipeline", `{"schedule_enabled":"no"}`, 400, models.CodeInvalid, `field "schedule_enabled": expected a boolean`},
		{"unknown workflow", "ghost", `{"schedule_enabled":true}`, 404, models.CodeNotFound, `workflow "ghost" not found`},
	}
	for _, tc := range patches {
		t.Run(tc.name, func(t *testing.T) {
			e.do("PATCH", "/api/v1/workflows/"+tc.workflow, tc.body).wantError(t, tc.status, tc.code, tc.msg)
		})
	}

	if r := e.do("DELETE", "/api/v1/workflows/backup", ""); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("DELETE answered %d %s", r.status, r.body)
	}
	if !strings.Contains(e.logs.String(), `msg="workflow deleted" workflow=backup`) {
		t.Errorf("deletion not logged:\n%s", e.logs)
	}
	e.do("GET", "/api/v1/workflows/backup", "").wantError(t, 404, models.CodeNotFound, `workflow "backup" not found`)
	e.do("DELETE", "/api/v1/workflows/backup", "").wantError(t, 404, models.CodeNotFound, `workflow "backup" not found`)
	if got := names(""); got != "pipeline,review" {
		t.Errorf("workflows after the deletion: %s", got)
	}
}

// runTaskNames lists a run's tasks over the API as name=STATUS, in the
// answer's order.
func (e *testEnv) runTaskNames(runID string) []string {
	e.t.Helper()
	var l api.RunTaskList
	e.do("GET", "/api/v1/runs/"+runID+"/tasks", "").decode(e.t, http.StatusOK, &l)
	out := []string{}
	for _, t := range l.Tasks {
		if t.RunID != runID {
			e.t.Errorf("task %s of run %s listed for run %s", t.ID, t.RunID, runID)
		}
		out = append(out, t.Name+"="+string(t.Status))
	}
	return out
}

func TestWorkflowRunLifecycle(t *testing.T) {
	t.Parallel()
	e := newWorkflowEnv(t)
	e.postWorkflow(pipelineYAML, "application/yaml").decode(t, http.StatusCreated, &models.Workflow{})

	r := e.do("POST", "/api/v1/workflows/pipeline/runs", `{"actor":"alice"}`)
	var run models.WorkflowRun
	r.decode(t, http.StatusCreated, &run)
	if run.ID != "pipeline-1" || run.Workflow != "pipeline" || run.ProjectID != "web" || run.Status != models.RunPending ||
		run.Trigger != models.TriggerByHand || run.TriggeredBy != "alice" || run.Tasks[models.StatusReady] != 1 ||
		run.Tasks[models.StatusDefined] != 3 {
		t.Fatalf("trigger answered %+v", run)
	}
	if loc := r.header.Get("Location"); loc != "/api/v1/runs/pipeline-1" {
		t.Errorf("Location = %q", loc)
	}
	if !strings.Contains(e.logs.String(), `msg="workflow run started by hand" workflow=pipeline project_id=web run_id=pipeline-1 status=pending actor=alice`) {
		t.Errorf("trigger not logged:\n%s", e.logs)
	}
	want := []string{"build=READY", "report=DEFINED", "shards[0]=DEFINED", "shards[1]=DEFINED"}
	if got := e.runTaskNames(run.ID); !slices.Equal(sorted(got), want) {
		t.Fatalf("tasks of the run: %v, want %v", got, want)
	}
	var got models.WorkflowRun
	e.do("GET", "/api/v1/runs/"+run.ID, "").decode(t, http.StatusOK, &got)
	if got.ID != run.ID || got.Status != models.RunPending || len(got.Definition) == 0 || got.Tasks[models.StatusDefined] != 3 {
		t.Fatalf("GET run answered %+v", got)
	}

	// Without a body the actor is the API's.
	var second models.WorkflowRun
	e.do("POST", "/api/v1/workflows/pipeline/runs", "").decode(t, http.StatusCreated, &second)
	if second.ID != "pipeline-2" || second.TriggeredBy != api.DefaultActor {
		t.Fatalf("second trigger answered %+v", second)
	}

	// Cancel: the run is cancelled, every task BLOCKED.
	var cancelled models.WorkflowRun
	e.do("POST", "/api/v1/runs/pipeline-1/cancel", `{"actor":"bob"}`).decode(t, http.StatusOK, &cancelled)
	if cancelled.ID != run.ID || cancelled.Status != models.RunCancelled || cancelled.Reason != "cancelled by bob" ||
		cancelled.EndedAt == nil || cancelled.Tasks[models.StatusBlocked] != 4 {
		t.Fatalf("cancel answered %+v", cancelled)
	}
	for _, nt := range e.runTaskNames(run.ID) {
		if !strings.HasSuffix(nt, "=BLOCKED") {
			t.Errorf("task of the cancelled run: %s, want BLOCKED", nt)
		}
	}
	if !strings.Contains(e.logs.String(), `msg="workflow run cancelled" workflow=pipeline project_id=web run_id=pipeline-1 status=cancelled actor=bob`) {
		t.Errorf("cancel not logged:\n%s", e.logs)
	}

	// Retry: the run goes on, its first task READY again and the shards
	// waiting for it.
	var retried models.WorkflowRun
	e.do("POST", "/api/v1/runs/pipeline-1/retry", "").decode(t, http.StatusOK, &retried)
	if retried.Status != models.RunPending || retried.EndedAt != nil || retried.Reason != "" || retried.Tasks[models.StatusBlocked] != 0 {
		t.Fatalf("retry answered %+v", retried)
	}
	after := e.runTaskNames(run.ID)
	for _, want := range []string{"build=READY", "shards[0]=DEFINED", "shards[1]=DEFINED"} {
		if !slices.Contains(after, want) {
			t.Errorf("tasks of the retried run: %v, want %s among them", after, want)
		}
	}
	if !strings.Contains(e.logs.String(), `msg="workflow run retried" workflow=pipeline project_id=web run_id=pipeline-1 status=pending actor=api`) {
		t.Errorf("retry not logged:\n%s", e.logs)
	}

	// Logs, by the task's name in the run; a bracket is escaped in the path.
	tasks := map[string]string{}
	var l api.RunTaskList
	e.do("GET", "/api/v1/runs/pipeline-1/tasks", "").decode(t, http.StatusOK, &l)
	for _, t := range l.Tasks {
		tasks[t.Name] = t.ID
	}
	// The agents' logs are the orchestrator's files: shards[1] has one of
	// its second attempt, shards[0] none.
	logDir := filepath.Join(e.kit.RunDir, tasks["shards[1]"])
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logDir, "2.log"), []byte("second try\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs models.TaskLogs
	r = e.do("GET", "/api/v1/runs/pipeline-1/tasks/shards%5B1%5D/logs?attempt=2", "")
	r.decode(t, http.StatusOK, &logs)
	if logs.TaskID != tasks["shards[1]"] || logs.TaskID == "" || len(logs.Attempts) != 1 || logs.Attempts[0].Attempt != 2 ||
		logs.Attempts[0].Log != "second try\n" {
		t.Fatalf("logs of shards[1]: %+v (tasks %v)", logs, tasks)
	}
	r = e.do("GET", "/api/v1/runs/pipeline-1/tasks/shards%5B0%5D/logs", "")
	r.decode(t, http.StatusOK, &logs)
	if logs.TaskID != tasks["shards[0]"] || logs.TaskID == "" || logs.Attempts == nil || len(logs.Attempts) != 0 {
		t.Fatalf("logs of shards[0]: %+v (tasks %v)", logs, tasks)
	}
	if !strings.Contains(string(r.body), `"attempts":[]`) {
		t.Errorf("no attempt is not []: %s", r.body)
	}

	refusals := []struct {
		name, method, path, body string
		status                   int
		code                     models.ErrorCode
		msg                      string
	}{
		{"run an unknown workflow", "POST", "/api/v1/workflows/ghost/runs", "", 404, models.CodeNotFound, `workflow "ghost" not found`},
		{"unknown run field", "POST", "/api/v1/workflows/pipeline/runs", `{"by":"bob"}`, 400, models.CodeInvalid, `unknown field "by"`},
		{"run with a query", "POST", "/api/v1/workflows/pipeline/runs?now=1", "", 400, models.CodeInvalid, "query parameters are not accepted"},
		{"cancel an unknown run", "POST", "/api/v1/runs/ghost/cancel", "", 404, models.CodeNotFound, `run "ghost" not found`},
		{"retry an unknown run", "POST", "/api/v1/runs/ghost/retry", `{"actor":"bob"}`, 404, models.CodeNotFound, `run "ghost" not found`},
		{"retry a running run", "POST", "/api/v1/runs/pipeline-1/retry", "", 409, models.CodeConflict,
			"run pipeline-1 is pending: only a failed or cancelled run is retried"},
		{"cancel with a bad body", "POST", "/api/v1/runs/pipeline-1/cancel", `{"actor":7}`, 400, models.CodeInvalid,
			`field "actor": expected a string`},
		{"unknown run", "GET", "/api/v1/runs/ghost", "", 404, models.CodeNotFound, `run "ghost" not found`},
		{"tasks of an unknown run", "GET", "/api/v1/runs/ghost/tasks", "", 404, models.CodeNotFound, `run "ghost" not found`},
		{"logs of an unknown task", "GET", "/api/v1/runs/pipeline-1/tasks/deploy/logs", "", 404, models.CodeNotFound,
			`run pipeline-1 has no task "deploy" (tasks: build, report, shards[0], shards[1])`},
		{"logs of an unknown run", "GET", "/api/v1/runs/ghost/tasks/build/logs", "", 404, models.CodeNotFound, `run "ghost" not found`},
		{"attempt 0", "GET", "/api/v1/runs/pipeline-1/tasks/build/logs?attempt=0", "", 400, models.CodeInvalid,
			`attempt: must be a positive integer (got "0")`},
		{"attempt not a number", "GET", "/api/v1/runs/pipeline-1/tasks/build/logs?attempt=last", "", 400, models.CodeInvalid,
			`attempt: must be a positive integer (got "last")`},
		{"logs with an unknown parameter", "GET", "/api/v1/runs/pipeline-1/tasks/build/logs?tail=10", "", 400, models.CodeInvalid,
			`query parameter "tail": unknown (known: attempt)`},
		{"run with a wrong method", "PUT", "/api/v1/runs/pipeline-1", "", 405, models.CodeInvalid, "allowed: GET"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			e.do(tc.method, tc.path, tc.body).wantError(t, tc.status, tc.code, tc.msg)
		})
	}
	if rs, err := e.store.ListWorkflowRuns(context.Background(), models.RunFilter{}); err != nil || len(rs) != 2 {
		t.Fatalf("refused requests changed the runs: %d, %v", len(rs), err)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestListWorkflowRuns(t *testing.T) {
	t.Parallel()
	e := newWorkflowEnv(t)
	e.createProject("ops")
	e.postWorkflow(pipelineYAML, "application/yaml").decode(t, http.StatusCreated, &models.Workflow{})
	e.postWorkflow(reviewJSON, "application/json").decode(t, http.StatusCreated, &models.Workflow{})
	e.postWorkflow("name: backup\nproject: ops\nsteps:\n  - name: check\n    title: Check\n", "text/yaml").decode(t, http.StatusCreated, &models.Workflow{})
	for _, name := range []string{"pipeline", "review", "pipeline", "backup"} {
		e.do("POST", "/api/v1/workflows/"+name+"/runs", "").decode(t, http.StatusCreated, &models.WorkflowRun{})
	}
	e.do("POST", "/api/v1/runs/pipeline-1/cancel", "").decode(t, http.StatusOK, &models.WorkflowRun{})

	ids := func(query string) string {
		t.Helper()
		var l api.WorkflowRunList
		e.do("GET", "/api/v1/runs"+query, "").decode(t, http.StatusOK, &l)
		var out []string
		for _, r := range l.Runs {
			if len(r.Definition) != 0 {
				t.Errorf("listed run %s carries its definition", r.ID)
			}
			out = append(out, r.ID)
		}
		return strings.Join(out, ",")
	}
	for query, want := range map[string]string{
		"":                                    "backup-1,pipeline-2,review-1,pipeline-1",
		"?workflow=pipeline":                  "pipeline-2,pipeline-1",
		"?project=web":                        "pipeline-2,review-1,pipeline-1",
		"?project=ops":                        "backup-1",
		"?status=cancelled":                   "pipeline-1",
		"?status=pending":                     "backup-1,pipeline-2,review-1",
		"?status=success":                     "",
		"?workflow=pipeline&status=pending":   "pipeline-2",
		"?limit=2":                            "backup-1,pipeline-2",
		"?workflow=ghost":                     "",
		"?project=web&workflow=backup":        "",
		"?project=web&status=pending&limit=1": "pipeline-2",
	} {
		if got := ids(query); got != want {
			t.Errorf("GET /api/v1/runs%s = %q, want %q", query, got, want)
		}
	}
	if r := e.do("GET", "/api/v1/runs?status=failed", ""); !strings.Contains(string(r.body), `"runs":[]`) {
		t.Errorf("an empty list is not []: %s", r.body)
	}

	refusals := []struct {
		name, query string
		status      int
		code        models.ErrorCode
		msg         string
	}{
		{"unknown status", "?status=done", 400, models.CodeInvalid,
			`status: must be one of pending, running, success, failed, cancelled (got "done")`},
		{"upper-case status", "?status=RUNNING", 400, models.CodeInvalid, `(got "RUNNING")`},
		{"zero limit", "?limit=0", 400, models.CodeInvalid, `limit: must be an integer between 1 and 500 (got "0")`},
		{"huge limit", "?limit=501", 400, models.CodeInvalid, "limit: must be an integer between 1 and 500"},
		{"limit not a number", "?limit=all", 400, models.CodeInvalid, `(got "all")`},
		{"unknown parameter", "?run=x", 400, models.CodeInvalid, `query parameter "run": unknown (known: workflow, project, status, limit, after)`},
		{"repeated parameter", "?status=pending&status=running", 400, models.CodeInvalid, `query parameter "status": given more than once`},
		{"unknown project", "?project=ghost", 404, models.CodeNotFound, `project "ghost" not found`},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			e.do("GET", "/api/v1/runs"+tc.query, "").wantError(t, tc.status, tc.code, tc.msg)
		})
	}

	// A workflow's runs outlive it.
	e.do("DELETE", "/api/v1/workflows/pipeline", "")
	if got := ids("?workflow=pipeline"); got != "pipeline-2,pipeline-1" {
		t.Errorf("runs of the deleted workflow: %q", got)
	}
	var run models.WorkflowRun
	e.do("GET", "/api/v1/runs/pipeline-2", "").decode(t, http.StatusOK, &run)
	if run.Workflow != "pipeline" || run.Status != models.RunPending {
		t.Errorf("a run of the deleted workflow: %+v", run)
	}
}

func TestWorkflowClient(t *testing.T) {
	t.Parallel()
	e := newWorkflowEnv(t)
	ctx := context.Background()
	c := e.client

	w, created, err := c.SaveWorkflow(ctx, []byte(pipelineYAML))
	if err != nil || !created || w.Name != "pipeline" || len(w.Steps) != 3 {
		t.Fatalf("SaveWorkflow: %+v, %v, %v", w, created, err)
	}
	if w, created, err := c.SaveWorkflow(ctx, []byte(reviewJSON)); err != nil || !created || w.Name != "review" {
		t.Fatalf("SaveWorkflow of JSON: %+v, %v, %v", w, created, err)
	}
	if w, created, err := c.SaveWorkflow(ctx, []byte(pipelineYAML)); err != nil || created || w.Name != "pipeline" {
		t.Fatalf("SaveWorkflow of an existing name: %+v, %v, %v", w, created, err)
	}
	_, _, err = c.SaveWorkflow(ctx, []byte("name: x\nproject: web\nsteps: []\n"))
	if models.ErrorCodeOf(err) != models.CodeInvalid || models.ErrorMessageOf(err) != "request:3:8: steps: required (at least one step)" {
		t.Fatalf("SaveWorkflow of an invalid document: %v", err)
	}
	if ws, err := c.ListWorkflows(ctx, "web"); err != nil || len(ws) != 2 {
		t.Fatalf("ListWorkflows: %+v, %v", ws, err)
	}
	if _, err := c.ListWorkflows(ctx, "ghost"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("ListWorkflows of an unknown project: %v", err)
	}
	if w, err := c.SetWorkflowSchedule(ctx, "pipeline", false); err != nil || w.ScheduleEnabled {
		t.Fatalf("SetWorkflowSchedule off: %+v, %v", w, err)
	}
	if w, err := c.GetWorkflow(ctx, "pipeline"); err != nil || w.ScheduleEnabled {
		t.Fatalf("GetWorkflow: %+v, %v", w, err)
	}
	if w, err := c.SetWorkflowSchedule(ctx, "pipeline", true); err != nil || !w.ScheduleEnabled {
		t.Fatalf("SetWorkflowSchedule on: %+v, %v", w, err)
	}

	run, err := c.StartRun(ctx, "pipeline", "carol")
	if err != nil || run.ID != "pipeline-1" || run.TriggeredBy != "carol" {
		t.Fatalf("StartRun: %+v, %v", run, err)
	}
	if run, err := c.StartRun(ctx, "review", ""); err != nil || run.TriggeredBy != api.DefaultActor {
		t.Fatalf("StartRun without an actor: %+v, %v", run, err)
	}
	if rs, err := c.ListWorkflowRuns(ctx, models.RunFilter{Workflow: "pipeline", Status: models.RunPending, Limit: 5}); err != nil ||
		len(rs) != 1 || rs[0].ID != run.ID {
		t.Fatalf("ListWorkflowRuns: %+v, %v", rs, err)
	}
	if _, err := c.ListWorkflowRuns(ctx, models.RunFilter{Status: "done"}); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("ListWorkflowRuns with an unknown status: %v", err)
	}
	ts, err := c.RunTasks(ctx, run.ID)
	if err != nil || len(ts) != 4 {
		t.Fatalf("RunTasks: %+v, %v", ts, err)
	}
	var shard models.RunTask
	for _, t := range ts {
		if t.Name == "shards[1]" {
			shard = t
		}
	}
	// The name's brackets go escaped in the path, and arrive whole.
	if logs, err := c.RunTaskLogs(ctx, run.ID, "shards[1]", 0); err != nil || shard.ID == "" || logs.TaskID != shard.ID {
		t.Fatalf("RunTaskLogs of shards[1] (task %s): %+v, %v", shard.ID, logs, err)
	}
	if _, err := c.RunTaskLogs(ctx, run.ID, "shards[7]", 1); models.ErrorCodeOf(err) != models.CodeNotFound ||
		!strings.Contains(err.Error(), `has no task "shards[7]"`) {
		t.Fatalf("RunTaskLogs of an unknown task: %v", err)
	}
	if r, err := c.CancelRun(ctx, run.ID, "dave"); err != nil || r.Status != models.RunCancelled || r.Reason != "cancelled by dave" {
		t.Fatalf("CancelRun: %+v, %v", r, err)
	}
	if r, err := c.RetryRun(ctx, run.ID, "dave"); err != nil || r.Status != models.RunPending {
		t.Fatalf("RetryRun: %+v, %v", r, err)
	}
	if r, err := c.GetWorkflowRun(ctx, run.ID); err != nil || r.Status != models.RunPending || r.Tasks[models.StatusBlocked] != 0 {
		t.Fatalf("GetWorkflowRun: %+v, %v", r, err)
	}
	if err := c.DeleteWorkflow(ctx, "pipeline"); err != nil {
		t.Fatalf("DeleteWorkflow: %v", err)
	}
	if _, err := c.GetWorkflow(ctx, "pipeline"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("GetWorkflow after DeleteWorkflow: %v", err)
	}
}

// A run's inputs come in the request's "inputs", are answered with the run,
// and bad ones are refused naming the input.
func TestWorkflowRunInputs(t *testing.T) {
	t.Parallel()
	e := newWorkflowEnv(t)
	doc := "name: release\nproject: web\ninputs:\n  - name: version\n    required: true\n  - name: channel\n    default: stable\n" +
		"steps:\n  - name: tag\n    title: \"Tag {{inputs.version}} ({{inputs.channel}})\"\n"
	e.postWorkflow(doc, "application/yaml").decode(t, http.StatusCreated, &models.Workflow{})

	var run models.WorkflowRun
	e.do("POST", "/api/v1/workflows/release/runs", `{"actor":"alice","inputs":{"version":"1.4"}}`).decode(t, http.StatusCreated, &run)
	if want := map[string]string{"version": "1.4", "channel": "stable"}; !maps.Equal(run.Inputs, want) {
		t.Fatalf("inputs answered %v, want %v", run.Inputs, want)
	}
	var got models.WorkflowRun
	e.do("GET", "/api/v1/runs/"+run.ID, "").decode(t, http.StatusOK, &got)
	if got.Inputs["version"] != "1.4" {
		t.Fatalf("GET run answered inputs %v", got.Inputs)
	}
	if names := e.runTaskNames(run.ID); len(names) != 1 {
		t.Fatalf("tasks %v", names)
	}
	tests := []struct {
		name, body string
		status     int
		msg        string
	}{
		{"missing required", `{}`, http.StatusBadRequest, "inputs.version: required"},
		{"no body", ``, http.StatusBadRequest, "inputs.version: required"},
		{"unknown input", `{"inputs":{"version":"1","chanel":"beta"}}`, http.StatusBadRequest,
			"inputs.chanel: unknown input (inputs: version, channel)"},
		{"not text", `{"inputs":{"version":1}}`, http.StatusBadRequest, "inputs"},
	}
	for _, tc := range tests {
		r := e.do("POST", "/api/v1/workflows/release/runs", tc.body)
		if r.status != tc.status || !strings.Contains(string(r.body), tc.msg) {
			t.Errorf("%s: %d %s; want %d containing %q", tc.name, r.status, r.body, tc.status, tc.msg)
		}
	}
}
