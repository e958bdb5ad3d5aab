package api_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/hooks"
	"github.com/agentqueued/agentqueued/internal/models"
)

// newHookEnv starts a server with hook endpoints over a fresh store and a
// real hook engine; the test waits for the engine's runs before it ends.
func newHookEnv(t *testing.T) (*testEnv, *hooks.Engine) {
	t.Helper()
	return newHookEnvWith(t, api.Config{})
}

// newHookEnvWith is newHookEnv with cfg (its Logger and Hooks are set here).
func newHookEnvWith(t *testing.T, cfg api.Config) (*testEnv, *hooks.Engine) {
	t.Helper()
	logger, logs := newLogger()
	k := newKit(t, logger)
	cfg.Logger, cfg.Hooks = logger, k.Service
	return serveKit(t, cfg, k, logs), k.Hooks()
}

// reportHook is a manual hook that completes without an LLM.
const reportHook = `{"project_id":"web","name":"Nightly Report!","trigger":{"type":"manual"},
	"context_steps":[{"type":"db_query","query":"task_counts"}]}`

func TestHookRoutesNeedAHookService(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.do("GET", "/api/v1/hooks", "").wantError(t, http.StatusNotFound, models.CodeNotFound, "no such endpoint")
	e.do("GET", "/api/v1/hook-runs/x", "").wantError(t, http.StatusNotFound, models.CodeNotFound, "no such endpoint")
}

func TestCreateHookEndpoint(t *testing.T) {
	t.Parallel()
	e, _ := newHookEnv(t)
	e.createProject("web")

	r := e.do("POST", "/api/v1/hooks", reportHook)
	var h models.Hook
	r.decode(t, http.StatusCreated, &h)
	if h.ID != "nightly-report" || h.ProjectID != "web" || h.Name != "Nightly Report!" || !h.Enabled ||
		h.CooldownSeconds != models.DefaultHookCooldown || len(h.ContextSteps) != 1 || h.ContextSteps[0].Query != "task_counts" ||
		h.CreatedAt.IsZero() || h.ScheduleFrom.IsZero() {
		t.Fatalf("created %+v", h)
	}
	if loc := r.header.Get("Location"); loc != "/api/v1/hooks/nightly-report" {
		t.Errorf("Location = %q", loc)
	}
	if !strings.Contains(e.logs.String(), `msg="hook created" hook_id=nightly-report project_id=web`) {
		t.Errorf("creation not logged:\n%s", e.logs)
	}

	tests := []struct {
		name, body string
		status     int
		code       models.ErrorCode
		msg        string
	}{
		{"unknown field", `{"project_id":"web","name":"x","trigger":{"type":"manual"},"colour":"red"}`,
			400, models.CodeInvalid, `unknown field "colour"`},
		{"unknown trigger field", `{"project_id":"web","name":"x","trigger":{"type":"manual","every":"day"}}`,
			400, models.CodeInvalid, `unknown field "every"`},
		{"bad trigger type", `{"project_id":"web","name":"x","trigger":{"type":"hourly"}}`,
			400, models.CodeInvalid, "trigger.type: must be periodic, cron, event or manual"},
		{"bad cron expression", `{"project_id":"web","name":"x","trigger":{"type":"cron","expr":"61 * * * *"}}`,
			400, models.CodeInvalid, `trigger.expr: "61 * * * *" is not a cron expression`},
		{"short interval", `{"project_id":"web","name":"x","trigger":{"type":"periodic","interval_seconds":5}}`,
			400, models.CodeInvalid, "trigger.interval_seconds: must be between 60 and"},
		{"unknown placeholder", `{"project_id":"web","name":"x","trigger":{"type":"manual"},"prompt_template":"Report {{weather}}"}`,
			400, models.CodeInvalid, "prompt_template: unknown placeholder {{weather}}"},
		{"placeholder past the steps", `{"project_id":"web","name":"x","trigger":{"type":"manual"},"prompt_template":"{{step_0}}"}`,
			400, models.CodeInvalid, "prompt_template: {{step_0}}: the hook has 0 context steps"},
		{"unknown query", `{"project_id":"web","name":"x","trigger":{"type":"manual"},"context_steps":[{"type":"db_query","query":"all"}]}`,
			400, models.CodeInvalid, "context_steps[0].query"},
		{"command not allowed", `{"project_id":"web","name":"x","trigger":{"type":"manual"},"context_steps":[{"type":"run_command","command":"make test"}]}`,
			400, models.CodeInvalid, `context_steps[0].command: "make test" is not one of project web's hook_commands`},
		{"wrong type", `{"project_id":"web","name":"x","trigger":{"type":"manual"},"cooldown_seconds":"soon"}`,
			400, models.CodeInvalid, `field "cooldown_seconds": expected an integer`},
		{"no name", `{"project_id":"web","trigger":{"type":"manual"}}`, 400, models.CodeInvalid, "name: required"},
		{"name without an id in it", `{"project_id":"web","name":"!!!","trigger":{"type":"manual"}}`, 400, models.CodeInvalid,
			`id: the name "!!!" has no letter or digit`},
		{"bad id", `{"id":"Bad Id","project_id":"web","name":"x","trigger":{"type":"manual"}}`, 400, models.CodeInvalid, `id: "Bad Id" is not a hook id`},
		{"trailing data", `{"project_id":"web","name":"x","trigger":{"type":"manual"}} {}`, 400, models.CodeInvalid, "unexpected data"},
		{"duplicate id", reportHook, 409, models.CodeConflict, `hook "nightly-report" exists already`},
		{"unknown project", `{"project_id":"ghost","name":"x","trigger":{"type":"manual"}}`, 404, models.CodeNotFound, `project "ghost" not found`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.do("POST", "/api/v1/hooks", tc.body).wantError(t, tc.status, tc.code, tc.msg)
		})
	}
	var list api.HookList
	e.do("GET", "/api/v1/hooks", "").decode(t, http.StatusOK, &list)
	if len(list.Hooks) != 1 {
		t.Fatalf("refused bodies created hooks: %+v", list.Hooks)
	}
}

func TestListGetPatchAndDeleteHooks(t *testing.T) {
	t.Parallel()
	e, _ := newHookEnv(t)
	e.createProject("web")
	e.createProject("ops")
	e.createProject("idle")
	var report, backup models.Hook
	e.do("POST", "/api/v1/hooks", reportHook).decode(t, http.StatusCreated, &report)
	e.do("POST", "/api/v1/hooks", `{"id":"backup","project_id":"ops","name":"Backup check","enabled":false,
		"trigger":{"type":"periodic","interval_seconds":3600},"cooldown_seconds":0}`).decode(t, http.StatusCreated, &backup)
	if backup.Enabled || backup.CooldownSeconds != 0 {
		t.Fatalf("explicit enabled and cooldown not kept: %+v", backup)
	}

	ids := func(query string) []string {
		t.Helper()
		var l api.HookList
		e.do("GET", "/api/v1/hooks"+query, "").decode(t, http.StatusOK, &l)
		out := []string{}
		for _, h := range l.Hooks {
			out = append(out, h.ID)
		}
		return out
	}
	for query, want := range map[string]string{"": "backup,nightly-report", "?project=web": "nightly-report",
		"?project=ops": "backup", "?project=idle": ""} {
		if got := strings.Join(ids(query), ","); got != want {
			t.Errorf("GET /api/v1/hooks%s = %q, want %q", query, got, want)
		}
	}
	if r := e.do("GET", "/api/v1/hooks?project=idle", ""); !strings.Contains(string(r.body), `"hooks":[]`) {
		t.Errorf("an empty list is not []: %s", r.body)
	}
	e.do("GET", "/api/v1/hooks?project=ghost", "").wantError(t, 404, models.CodeNotFound, `project "ghost" not found`)
	e.do("GET", "/api/v1/hooks?team=web", "").wantError(t, 400, models.CodeInvalid, `query parameter "team": unknown (known: project)`)
	e.do("GET", "/api/v1/hooks?project=web&project=ops", "").wantError(t, 400, models.CodeInvalid, "given more than once")

	var got models.Hook
	e.do("GET", "/api/v1/hooks/nightly-report", "").decode(t, http.StatusOK, &got)
	if got.ID != report.ID || got.Name != report.Name || !got.CreatedAt.Equal(report.CreatedAt) {
		t.Fatalf("GET answered %+v, created %+v", got, report)
	}
	e.do("GET", "/api/v1/hooks/ghost", "").wantError(t, 404, models.CodeNotFound, `hook "ghost" not found`)
	e.do("GET", "/api/v1/hooks/nightly-report?verbose=1", "").wantError(t, 400, models.CodeInvalid, "query parameters are not accepted")

	var disabled, enabled models.Hook
	e.do("PATCH", "/api/v1/hooks/nightly-report", `{"enabled":false}`).decode(t, http.StatusOK, &disabled)
	if disabled.Enabled || disabled.Name != report.Name {
		t.Fatalf("disabling answered %+v", disabled)
	}
	if !strings.Contains(e.logs.String(), `msg="hook updated" hook_id=nightly-report project_id=web enabled=false`) {
		t.Errorf("update not logged:\n%s", e.logs)
	}
	e.do("PATCH", "/api/v1/hooks/nightly-report", `{"enabled":true,"name":"Morning report","cooldown_seconds":600}`).
		decode(t, http.StatusOK, &enabled)
	if !enabled.Enabled || enabled.Name != "Morning report" || enabled.CooldownSeconds != 600 ||
		!enabled.ScheduleFrom.After(report.ScheduleFrom) {
		t.Fatalf("enabling answered %+v (created %+v)", enabled, report)
	}
	if h, err := e.store.GetHook(context.Background(), "nightly-report"); err != nil || !h.Enabled || h.Name != "Morning report" {
		t.Fatalf("stored %+v, %v", h, err)
	}

	patches := []struct {
		name, id, body string
		status         int
		code           models.ErrorCode
		msg            string
	}{
		{"empty patch", "nightly-report", `{}`, 400, models.CodeInvalid, "nothing to change"},
		{"unknown field", "nightly-report", `{"project_id":"ops"}`, 400, models.CodeInvalid, `unknown field "project_id"`},
		{"bad trigger", "nightly-report", `{"trigger":{"type":"cron","expr":"every day"}}`, 400, models.CodeInvalid, "trigger.expr"},
		{"bad placeholder", "nightly-report", `{"prompt_template":"{{step_0.exit_code}}"}`, 400, models.CodeInvalid,
			`db_query steps have no field "exit_code"`},
		{"negative cooldown", "nightly-report", `{"cooldown_seconds":-1}`, 400, models.CodeInvalid, "cooldown_seconds"},
		{"unknown hook", "ghost", `{"enabled":true}`, 404, models.CodeNotFound, `hook "ghost" not found`},
	}
	for _, tc := range patches {
		t.Run(tc.name, func(t *testing.T) {
			e.do("PATCH", "/api/v1/hooks/"+tc.id, tc.body).wantError(t, tc.status, tc.code, tc.msg)
		})
	}
	if h, _ := e.store.GetHook(context.Background(), "nightly-report"); h.Name != "Morning report" || h.CooldownSeconds != 600 {
		t.Fatalf("refused patches changed the hook: %+v", h)
	}

	if r := e.do("DELETE", "/api/v1/hooks/backup", ""); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("DELETE answered %d %s", r.status, r.body)
	}
	if !strings.Contains(e.logs.String(), `msg="hook deleted" hook_id=backup`) {
		t.Errorf("deletion not logged:\n%s", e.logs)
	}
	e.do("GET", "/api/v1/hooks/backup", "").wantError(t, 404, models.CodeNotFound, `hook "backup" not found`)
	e.do("DELETE", "/api/v1/hooks/backup", "").wantError(t, 404, models.CodeNotFound, `hook "backup" not found`)
	if got := strings.Join(ids(""), ","); got != "nightly-report" {
		t.Errorf("hooks after the deletion: %s", got)
	}
}

func TestFireHookAndItsRuns(t *testing.T) {
	t.Parallel()
	e, engine := newHookEnv(t)
	e.createProject("web")
	e.createTasks(`{"project_id":"web","tasks":[{"title":"A"},{"title":"B"}]}`)
	e.do("POST", "/api/v1/hooks", reportHook).decode(t, http.StatusCreated, &models.Hook{})
	e.do("PATCH", "/api/v1/hooks/nightly-report", `{"enabled":false}`).decode(t, http.StatusOK, &models.Hook{})

	// A disabled hook still fires by hand; with no body the actor is the API's.
	var run models.HookRun
	e.do("POST", "/api/v1/hooks/nightly-report/fire", "").decode(t, http.StatusAccepted, &run)
	if run.ID == "" || run.HookID != "nightly-report" || run.ProjectID != "web" || run.Status != models.HookRunRunning ||
		run.TriggerReason != models.TriggerReasonManual || run.TriggerDetail != "fired by "+api.DefaultActor {
		t.Fatalf("fire answered %+v", run)
	}
	engine.Wait()
	var got models.HookRun
	e.do("GET", "/api/v1/hook-runs/"+run.ID, "").decode(t, http.StatusOK, &got)
	if got.ID != run.ID || got.Status != models.HookRunCompleted || got.CompletedAt == nil || got.ContextResults == nil ||
		!strings.Contains(*got.ContextResults, "READY") || got.PromptSent != nil {
		t.Fatalf("the run after it ended: %+v (context %s)", got, strDeref(got.ContextResults))
	}
	if !strings.Contains(e.logs.String(), `msg="hook fired by hand" hook_id=nightly-report project_id=web run_id=`+run.ID) {
		t.Errorf("firing not logged:\n%s", e.logs)
	}

	// A second firing, by a person and with an event.
	var second models.HookRun
	e.do("POST", "/api/v1/hooks/nightly-report/fire", `{"actor":"alice","event":{"type":"task.failed","task_id":"t1","title":"Flaky"}}`).
		decode(t, http.StatusAccepted, &second)
	if second.TriggerDetail != "fired by alice" || second.EventData == nil || !strings.Contains(*second.EventData, `"title":"Flaky"`) ||
		!strings.Contains(*second.EventData, `"project_id":"web"`) {
		t.Fatalf("fire with an event answered %+v (event %s)", second, strDeref(second.EventData))
	}
	engine.Wait()

	var runs api.HookRunList
	e.do("GET", "/api/v1/hooks/nightly-report/runs", "").decode(t, http.StatusOK, &runs)
	if len(runs.Runs) != 2 || runs.Runs[0].ID != second.ID || runs.Runs[1].ID != run.ID {
		t.Fatalf("runs %+v; want the second then the first", runs.Runs)
	}
	for _, r := range runs.Runs {
		if r.Status != models.HookRunCompleted {
			t.Errorf("run %s is %s", r.ID, r.Status)
		}
	}
	e.do("GET", "/api/v1/hooks/nightly-report/runs?status=completed&limit=1", "").decode(t, http.StatusOK, &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].ID != second.ID {
		t.Fatalf("completed runs, limit 1: %+v", runs.Runs)
	}
	if r := e.do("GET", "/api/v1/hooks/nightly-report/runs?status=failed", ""); !strings.Contains(string(r.body), `"runs":[]`) {
		t.Errorf("no failed run: %s", r.body)
	}

	refusals := []struct {
		name, method, path, body string
		status                   int
		code                     models.ErrorCode
		msg                      string
	}{
		{"fire an unknown hook", "POST", "/api/v1/hooks/ghost/fire", "", 404, models.CodeNotFound, `hook "ghost" not found`},
		{"unknown fire field", "POST", "/api/v1/hooks/nightly-report/fire", `{"by":"bob"}`, 400, models.CodeInvalid, `unknown field "by"`},
		{"event of the wrong shape", "POST", "/api/v1/hooks/nightly-report/fire", `{"event":"task.failed"}`, 400, models.CodeInvalid,
			`field "event": expected an object`},
		{"runs of an unknown hook", "GET", "/api/v1/hooks/ghost/runs", "", 404, models.CodeNotFound, `hook "ghost" not found`},
		{"unknown status", "GET", "/api/v1/hooks/nightly-report/runs?status=done", "", 400, models.CodeInvalid,
			`status: must be one of running, completed, failed, skipped (got "done")`},
		{"zero limit", "GET", "/api/v1/hooks/nightly-report/runs?limit=0", "", 400, models.CodeInvalid, "limit: must be an integer"},
		{"unknown parameter", "GET", "/api/v1/hooks/nightly-report/runs?hook=x", "", 400, models.CodeInvalid,
			`query parameter "hook": unknown (known: status, limit, after)`},
		{"unknown run", "GET", "/api/v1/hook-runs/ghost", "", 404, models.CodeNotFound, `hook run "ghost" not found`},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			e.do(tc.method, tc.path, tc.body).wantError(t, tc.status, tc.code, tc.msg)
		})
	}
	if rs, err := e.store.ListHookRuns(context.Background(), models.HookRunFilter{HookID: "nightly-report"}); err != nil || len(rs) != 2 {
		t.Fatalf("refused firings recorded runs: %d, %v", len(rs), err)
	}

	// Deleting the hook deletes its runs.
	e.do("DELETE", "/api/v1/hooks/nightly-report", "")
	e.do("GET", "/api/v1/hooks/nightly-report/runs", "").wantError(t, 404, models.CodeNotFound, `hook "nightly-report" not found`)
	e.do("GET", "/api/v1/hook-runs/"+run.ID, "").wantError(t, 404, models.CodeNotFound, "not found")
}

func strDeref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func TestHookAnswersNeverCarryTheAPIKey(t *testing.T) {
	t.Parallel()
	const secret = "sk-secret"
	e, engine := newHookEnv(t)
	e.createProject("web")
	bodies := map[string][]byte{}
	check := func(what string, r response, status int) {
		t.Helper()
		if r.status != status {
			t.Fatalf("%s: status %d, want %d: %s", what, r.status, status, r.body)
		}
		bodies[what] = r.body
	}
	check("POST", e.do("POST", "/api/v1/hooks", `{"project_id":"web","name":"Own model","trigger":{"type":"manual"},
		"llm_config":{"model":"m","base_url":"http://127.0.0.1:1/v1","api_key":"`+secret+`"}}`), http.StatusCreated)
	check("GET", e.do("GET", "/api/v1/hooks/own-model", ""), http.StatusOK)
	check("list", e.do("GET", "/api/v1/hooks", ""), http.StatusOK)
	check("list of the project", e.do("GET", "/api/v1/hooks?project=web", ""), http.StatusOK)
	check("PATCH", e.do("PATCH", "/api/v1/hooks/own-model", `{"name":"Own model, renamed"}`), http.StatusOK)
	// An edited copy of an answer sends the redacted key back: the stored key stays.
	check("PATCH with the redacted key", e.do("PATCH", "/api/v1/hooks/own-model",
		`{"llm_config":{"model":"m2","base_url":"http://127.0.0.1:1/v1","api_key":"[redacted]"}}`), http.StatusOK)
	check("fire", e.do("POST", "/api/v1/hooks/own-model/fire", ""), http.StatusAccepted)
	engine.Wait()
	check("runs", e.do("GET", "/api/v1/hooks/own-model/runs", ""), http.StatusOK)

	for what, body := range bodies {
		if strings.Contains(string(body), secret) {
			t.Errorf("%s answered the API key: %s", what, body)
		}
	}
	for _, what := range []string{"POST", "GET", "list", "PATCH"} {
		if !strings.Contains(string(bodies[what]), `"api_key":"[redacted]"`) {
			t.Errorf("%s does not say a key is set: %s", what, bodies[what])
		}
	}
	h, err := e.store.GetHook(context.Background(), "own-model")
	if err != nil || h.LLMConfig == nil || h.LLMConfig.APIKey != secret || h.LLMConfig.Model != "m2" {
		t.Fatalf("stored %+v, %v; want the key kept and the model changed", h.LLMConfig, err)
	}
	if strings.Contains(e.logs.String(), secret) {
		t.Errorf("the key was logged:\n%s", e.logs)
	}
}

func TestHookClient(t *testing.T) {
	t.Parallel()
	e, engine := newHookEnv(t)
	e.createProject("web")
	ctx := context.Background()
	c := e.client

	h, err := c.CreateHook(ctx, models.HookSpec{ProjectID: "web", Name: "Counts", Trigger: models.HookTrigger{Type: models.TriggerManual},
		ContextSteps: []models.HookStep{{Type: models.StepDBQuery, Query: "task_counts"}}})
	if err != nil || h.ID != "counts" || !h.Enabled {
		t.Fatalf("CreateHook: %+v, %v", h, err)
	}
	var me *models.Error
	if _, err := c.CreateHook(ctx, models.HookSpec{ProjectID: "web", Name: "Counts", Trigger: models.HookTrigger{Type: models.TriggerManual}}); !errors.As(err, &me) || me.Code != models.CodeConflict {
		t.Fatalf("CreateHook of an existing id: %v", err)
	}
	if hs, err := c.ListHooks(ctx, "web"); err != nil || len(hs) != 1 || hs[0].ID != "counts" {
		t.Fatalf("ListHooks: %+v, %v", hs, err)
	}
	if _, err := c.ListHooks(ctx, "ghost"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("ListHooks of an unknown project: %v", err)
	}
	off := false
	if h, err := c.UpdateHook(ctx, "counts", models.HookPatch{Enabled: &off}); err != nil || h.Enabled {
		t.Fatalf("UpdateHook: %+v, %v", h, err)
	}
	if h, err := c.GetHook(ctx, "counts"); err != nil || h.Enabled {
		t.Fatalf("GetHook: %+v, %v", h, err)
	}
	run, err := c.FireHook(ctx, "counts", api.FireRequest{Actor: "bob"})
	if err != nil || run.TriggerDetail != "fired by bob" {
		t.Fatalf("FireHook: %+v, %v", run, err)
	}
	engine.Wait()
	if runs, err := c.HookRuns(ctx, "counts", string(models.HookRunCompleted), 5); err != nil || len(runs) != 1 || runs[0].ID != run.ID {
		t.Fatalf("HookRuns: %+v, %v", runs, err)
	}
	if _, err := c.HookRuns(ctx, "counts", "finished", 0); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("HookRuns with an unknown status: %v", err)
	}
	if r, err := c.GetHookRun(ctx, run.ID); err != nil || r.Status != models.HookRunCompleted {
		t.Fatalf("GetHookRun: %+v, %v", r, err)
	}
	if err := c.DeleteHook(ctx, "counts"); err != nil {
		t.Fatalf("DeleteHook: %v", err)
	}
	if _, err := c.GetHook(ctx, "counts"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("GetHook after DeleteHook: %v", err)
	}
}
