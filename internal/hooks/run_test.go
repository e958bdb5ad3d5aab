package hooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/hooks"
	"github.com/agentqueued/agentqueued/internal/llm/llmtest"
	"github.com/agentqueued/agentqueued/internal/models"
)

// web serves the pages http_get steps fetch in these tests.
func web(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			fmt.Fprint(w, "all green")
		case "/broken":
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, "3 checks failing")
		case "/empty-list":
			fmt.Fprint(w, "[ ]\n")
		case "/away":
			http.Redirect(w, r, "http://elsewhere.invalid/", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func allowLocal(c *hooks.Config) { c.HTTPAllowHosts = []string{"127.0.0.1"} }

func TestEveryContextStepFeedsThePrompt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, allowLocal)
	srv := web(t)
	h.commit(map[string]string{"src/c.go": "package c\n"}, "second")
	h.project("web", func(p *models.Project) { p.Settings.HookCommands = []string{"echo checked   out"} })
	h.task("web", "Open work")
	steps := `[
		{"type":"read_file","path":"README.md"},
		{"type":"list_files","path":"src","pattern":"*.go"},
		{"type":"git_diff"},
		{"type":"git_log","since":"8760h","max_count":5},
		{"type":"db_query","query":"tasks","status":"READY"},
		{"type":"http_get","url":"` + srv.URL + `/ok"},
		{"type":"run_command","command":"echo checked out"}]`
	tmpl := "readme={{step_0}}|files={{step_1}}|n={{step_1.count}}|diff={{step_2}}|commits={{step_3.count}}|" +
		"tasks={{step_4.count}}|page={{step_5}} {{step_5.status}}|cmd={{step_6}}exit={{step_6.exit_code}}|" +
		"verbatim={{ step_0 }}"
	hk := h.hook(`{"project_id":"web","name":"Everything","trigger":{"type":"manual"},"context_steps":` + steps +
		`,"prompt_template":` + quote(tmpl) + `}`)
	h.llm.Enqueue(llmtest.Reply{Content: "Nothing to do.", Usage: llmtest.Usage{PromptTokens: 120, CompletionTokens: 4}})
	r := h.fire(hk.ID, models.HookFire{})
	if r.Status != models.HookRunCompleted || deref(r.LLMResponse) != "Nothing to do." || r.TokensUsed != 124 || r.ActionsTaken != nil {
		t.Fatalf("run: %s %q tokens %d error %q", r.Status, deref(r.LLMResponse), r.TokensUsed, r.Error)
	}
	res := results(t, r)
	if len(res) != 7 {
		t.Fatalf("%d results", len(res))
	}
	if !strings.Contains(res[2].Output, "+package c") || !strings.Contains(res[2].Output, "src/c.go") {
		t.Fatalf("git_diff: %q", res[2].Output)
	}
	if *res[3].Count != 2 || !strings.Contains(res[3].Output, "t: second") {
		t.Fatalf("git_log: %d %q", *res[3].Count, res[3].Output)
	}
	var tasks []map[string]any
	mustJSON(t, res[4].Output, &tasks)
	if len(tasks) != 1 || tasks[0]["title"] != "Open work" || tasks[0]["status"] != "READY" {
		t.Fatalf("db_query: %s", res[4].Output)
	}
	want := "readme=# demo\n|files=src/a.go\nsrc/b.go\nsrc/c.go|n=3|diff=" + res[2].Output + "|commits=2|tasks=1|" +
		"page=all green 200|cmd=checked out\nexit=0|verbatim=# demo\n"
	if deref(r.PromptSent) != want {
		t.Fatalf("prompt:\n%s\nwant:\n%s", deref(r.PromptSent), want)
	}
	reqs := h.llm.Requests()
	if len(reqs) != 1 || reqs[0].Messages[1].Content != want || reqs[0].Model != "test-model" || len(reqs[0].Tools) != 3 {
		t.Fatalf("LLM request: %+v", reqs)
	}
	ledger, err := h.st.TokensUsedSince(context.Background(), "web", start.Add(-time.Hour))
	if err != nil || ledger != 124 {
		t.Fatalf("ledger %d, %v", ledger, err)
	}
}

func TestShortCircuitsSkipTheLLM(t *testing.T) {
	t.Parallel()
	h := newHarness(t, allowLocal)
	srv := web(t)
	h.commit(map[string]string{"empty.txt": ""}, "empty file")
	h.project("web", func(p *models.Project) { p.Settings.HookCommands = []string{"true", "false"} })
	h.task("web", "one task, so that task_counts has a row")
	cases := []struct {
		name, step string
		skip       string // the skipped reason; empty: the LLM is called
	}{
		{"exit zero", `{"type":"run_command","command":"true","skip_llm_if":"exit_code_zero"}`,
			"context_steps[0] (run_command): the command exited 0, so the LLM was not called"},
		{"exit one", `{"type":"run_command","command":"false","skip_llm_if":"exit_code_zero"}`, ""},
		{"empty output", `{"type":"read_file","path":"empty.txt","skip_llm_if":"output_empty"}`,
			"context_steps[0] (read_file): the output is empty, so the LLM was not called"},
		{"output", `{"type":"read_file","path":"README.md","skip_llm_if":"output_empty"}`, ""},
		{"status ok", `{"type":"http_get","url":"` + srv.URL + `/ok","skip_llm_if":"status_ok"}`,
			"context_steps[0] (http_get): the HTTP status is 200, so the LLM was not called"},
		{"status 500", `{"type":"http_get","url":"` + srv.URL + `/broken","skip_llm_if":"status_ok"}`, ""},
		{"no rows", `{"type":"db_query","query":"failed_tasks","skip_llm_if":"output_empty"}`,
			"context_steps[0] (db_query): the query returned no rows, so the LLM was not called"},
		{"rows", `{"type":"db_query","query":"task_counts","skip_llm_if":"output_empty"}`, ""},
		{"empty list", `{"type":"http_get","url":"` + srv.URL + `/empty-list","skip_llm_if":"output_empty"}`,
			"context_steps[0] (http_get): the output is an empty list, so the LLM was not called"},
	}
	for i, c := range cases {
		hk := h.hook(fmt.Sprintf(`{"project_id":"web","name":"case %d","trigger":{"type":"manual"},
			"context_steps":[%s],"prompt_template":"look: {{step_0}}"}`, i, c.step))
		before := len(h.llm.Requests())
		// A reply is queued even when the LLM must not be called, so that a
		// wrong call fails the case instead of waiting for a reply.
		h.llm.Enqueue(llmtest.Reply{Content: "ok", Usage: llmtest.Usage{PromptTokens: 1, CompletionTokens: 1}})
		r := h.fire(hk.ID, models.HookFire{})
		calls := len(h.llm.Requests()) - before
		if c.skip != "" && (r.Status != models.HookRunSkipped || deref(r.SkippedReason) != c.skip || calls != 0 || r.TokensUsed != 0) {
			t.Errorf("%s: %s %q, %d calls", c.name, r.Status, deref(r.SkippedReason), calls)
		}
		if c.skip == "" && (r.Status != models.HookRunCompleted || calls != 1) {
			t.Errorf("%s: %s (%s), %d calls", c.name, r.Status, r.Error, calls)
		}
		if len(results(t, r)) != 1 {
			t.Errorf("%s: results not kept", c.name)
		}
	}
}

func TestDisallowedCommandsHostsAndPathsAreRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, allowLocal)
	srv := web(t)
	if err := os.Symlink("/etc", filepath.Join(h.user, "escape")); err != nil {
		t.Fatal(err)
	}
	h.commit(nil, "a link out")
	h.project("web", func(p *models.Project) { p.Settings.HookCommands = []string{"echo hi"} })
	ctx := context.Background()
	spec := func(step string) models.Hook {
		var s models.HookSpec
		mustJSON(t, `{"project_id":"web","name":"x","trigger":{"type":"manual"},"context_steps":[`+step+`]}`, &s)
		return s.Hook()
	}
	// Refused when the hook is saved, naming what is wrong.
	for _, c := range []struct{ step, want string }{
		{`{"type":"run_command","command":"rm -rf /"}`, `context_steps[0].command: "rm -rf /" is not one of project web's hook_commands`},
		{`{"type":"run_command","command":"echo hi there"}`, `context_steps[0].command: "echo hi there" is not one of project web's hook_commands`},
		{`{"type":"http_get","url":"http://example.com/x"}`, `context_steps[0].url: host "example.com" is not on the allow list (hooks.http_allow_hosts)`},
	} {
		err := h.eng.Check(ctx, spec(c.step))
		if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), c.want) {
			t.Errorf("check %s: %v", c.step, err)
		}
	}
	for _, c := range []struct{ step, want string }{
		{`{"type":"read_file","path":"../db.sqlite"}`, `context_steps[0].path: "../db.sqlite" must be relative to the checkout, without ..`},
		{`{"type":"read_file","path":"/etc/passwd"}`, `context_steps[0].path: "/etc/passwd" must be relative`},
		{`{"type":"git_diff","base":"--output=/tmp/x"}`, `context_steps[0].base: "--output=/tmp/x" is not a git revision`},
		{`{"type":"http_get","url":"file:///etc/passwd"}`, `context_steps[0].url: "file:///etc/passwd" is not an http(s) URL`},
		{`{"type":"run_command","command":"  "}`, `context_steps[0].command: required`},
		{`{"type":"db_query","query":"DROP TABLE tasks"}`, `context_steps[0].query: must be one of tasks, failed_tasks`},
		{`{"type":"read_file","path":"a","url":"http://x"}`, `context_steps[0].url: not used by read_file steps`},
		{`{"type":"read_file","path":"a","skip_llm_if":"exit_code_zero"}`, `context_steps[0].skip_llm_if: read_file steps support output_empty`},
	} {
		hk := spec(c.step)
		if err := hk.Validate(); models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), c.want) {
			t.Errorf("validate %s: %v", c.step, err)
		}
	}
	// Refused again when the hook runs: settings and allow lists may have
	// changed since it was saved; links may lead out of the checkout.
	echo := h.hook(`{"project_id":"web","name":"Echo","trigger":{"type":"manual"},
		"context_steps":[{"type":"run_command","command":"echo hi"}]}`)
	empty := []string{}
	if _, err := h.st.UpdateProject(ctx, "web", models.ProjectPatch{Settings: &models.ProjectSettings{HookCommands: empty}}); err != nil {
		t.Fatal(err)
	}
	if r := h.fire(echo.ID, models.HookFire{}); r.Status != models.HookRunFailed ||
		r.Error != `context_steps[0] (run_command): "echo hi" is not one of project web's hook_commands (settings.hook_commands)` {
		t.Fatalf("run of a command no longer allowed: %s %q", r.Status, r.Error)
	}
	away := h.hook(`{"project_id":"web","name":"Away","trigger":{"type":"manual"},
		"context_steps":[{"type":"http_get","url":"` + srv.URL + `/away"}]}`)
	if r := h.fire(away.ID, models.HookFire{}); r.Status != models.HookRunFailed ||
		!strings.Contains(r.Error, `redirected to host "elsewhere.invalid", which is not on the allow list`) {
		t.Fatalf("redirect off the allow list: %s %q", r.Status, r.Error)
	}
	link := h.hook(`{"project_id":"web","name":"Link","trigger":{"type":"manual"},
		"context_steps":[{"type":"read_file","path":"escape/passwd"}]}`)
	if r := h.fire(link.ID, models.HookFire{}); r.Status != models.HookRunFailed ||
		r.Error != "context_steps[0] (read_file): escape/passwd: leads outside the checkout" {
		t.Fatalf("read through a link: %s %q", r.Status, r.Error)
	}
	strict := h.engineWith(func(c *hooks.Config) { c.HTTPAllowHosts = nil })
	page := h.hook(`{"project_id":"web","name":"Page","trigger":{"type":"manual"},
		"context_steps":[{"type":"http_get","url":"` + srv.URL + `/ok"}]}`)
	if _, err := strict.Fire(ctx, page.ID, "tester", models.HookFire{}); err != nil {
		t.Fatal(err)
	}
	if r := h.waitRun(); r.Status != models.HookRunFailed ||
		r.Error != `context_steps[0] (http_get): host "127.0.0.1" is not on the allow list (hooks.http_allow_hosts)` {
		t.Fatalf("host no longer allowed: %s %q", r.Status, r.Error)
	}
	strict.Wait()
}

func TestCommandsRunWithoutTheDaemonsSecretsAndWithinTheirTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *hooks.Config) {
		c.Environ = []string{"PATH=" + os.Getenv("PATH"), "HOME=/nowhere", "GITHUB_TOKEN=ghp_secret", "OPENAI_API_KEY=sk-secret"}
	})
	h.project("web", func(p *models.Project) { p.Settings.HookCommands = []string{"env", "sleep 30"} })
	hk := h.hook(`{"project_id":"web","name":"Env","trigger":{"type":"manual"},
		"context_steps":[{"type":"run_command","command":"env"}]}`)
	r := h.fire(hk.ID, models.HookFire{})
	out := results(t, r)[0].Output
	if r.Status != models.HookRunCompleted || strings.Contains(out, "secret") || !strings.Contains(out, "HOME=/nowhere") {
		t.Fatalf("env of a hook command: %s\n%s", r.Status, out)
	}
	slow := h.hook(`{"project_id":"web","name":"Slow","trigger":{"type":"manual"},
		"context_steps":[{"type":"run_command","command":"sleep 30","timeout_seconds":1}]}`)
	if r := h.fire(slow.ID, models.HookFire{}); r.Status != models.HookRunFailed ||
		r.Error != `context_steps[0] (run_command): "sleep 30" did not finish within 1s` {
		t.Fatalf("slow command: %s %q", r.Status, r.Error)
	}
}

func TestTemplateErrorsNameThePlaceholder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	for _, c := range []struct{ spec, want string }{
		{`{"trigger":{"type":"manual"},"prompt_template":"hi {{name}}"}`,
			"prompt_template: unknown placeholder {{name}} (use {{step_N}}, {{step_N.field}}, {{event}} or {{event.field}})"},
		{`{"trigger":{"type":"manual"},"prompt_template":"{{step_0}}"}`,
			"prompt_template: {{step_0}}: the hook has 0 context steps"},
		{`{"trigger":{"type":"manual"},"context_steps":[{"type":"read_file","path":"a"}],"prompt_template":"{{step_0.exit_code}}"}`,
			`prompt_template: {{step_0.exit_code}}: read_file steps have no field "exit_code" (fields: output, truncated)`},
		{`{"trigger":{"type":"periodic","interval_seconds":3600},"prompt_template":"{{event.title}}"}`,
			"prompt_template: {{event.title}}: only event-triggered and manual hooks have an event"},
		{`{"trigger":{"type":"event","event_type":"task.failed"},"prompt_template":"{{event.colour}}"}`,
			`prompt_template: {{event.colour}}: events have no field "colour"`},
		{`{"trigger":{"type":"event","event_type":"task.exploded"}}`, `trigger.event_type: "task.exploded" is not one of`},
		{`{"trigger":{"type":"cron","expr":"every morning"}}`, `trigger.expr: "every morning" is not a cron expression`},
		{`{"trigger":{"type":"cron","expr":"0 9 * * *","timezone":"Mars/Olympus"}}`, `trigger.timezone: "Mars/Olympus" is not a known time zone`},
		{`{"trigger":{"type":"periodic","interval_seconds":5}}`, "trigger.interval_seconds: must be between 60 and 31622400 (a year) (got 5)"},
		{`{"trigger":{"type":"hourly"}}`, `trigger.type: must be periodic, cron, event or manual (got "hourly")`},
	} {
		var s models.HookSpec
		mustJSON(t, c.spec, &s)
		s.ProjectID, s.Name = "web", "x"
		hk := s.Hook()
		if err := hk.Validate(); models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.spec, err, c.want)
		}
	}
	// At run time: an event hook fired by hand without an event fails with
	// the reason, and sends nothing.
	hk := h.hook(`{"project_id":"web","name":"Explain","trigger":{"type":"event","event_type":"task.failed"},
		"prompt_template":"Why did {{event.title}} fail?"}`)
	r := h.fire(hk.ID, models.HookFire{})
	if r.Status != models.HookRunFailed || r.PromptSent != nil ||
		r.Error != "prompt_template: {{event.title}}: this run has no event (it was fired by hand without one)" {
		t.Fatalf("%s %q", r.Status, r.Error)
	}
	h.llm.Enqueue(llmtest.Reply{Content: "ok", Usage: llmtest.Usage{PromptTokens: 1, CompletionTokens: 1}})
	r = h.fire(hk.ID, models.HookFire{Event: &models.HookEvent{TaskID: "brave-otter", Title: "Add {{step_9}} login"}})
	if r.Status != models.HookRunCompleted || deref(r.PromptSent) != "Why did Add {{step_9}} login fail?" {
		t.Fatalf("with an event: %s %q %q", r.Status, deref(r.PromptSent), r.Error)
	}
	if len(h.llm.Requests()) != 1 {
		t.Fatalf("%d requests", len(h.llm.Requests()))
	}
}

func TestRender(t *testing.T) {
	t.Parallel()
	code := 3
	res := []models.StepResult{{Type: models.StepRunCommand, Output: "boom", ExitCode: &code}}
	ev := &models.HookEvent{Type: "task.failed", TaskID: "brave-otter", Blocked: []string{"a", "b"}}
	for _, c := range []struct{ tmpl, want, err string }{
		{"{{step_0}}/{{step_0.exit_code}}/{{step_0.truncated}}", "boom/3/false", ""},
		{"{{event.task_id}} blocked {{event.blocked}}", "brave-otter blocked a, b", ""},
		{"{{step_0.status}}", "", "prompt_template: {{step_0.status}}: no such field in this run"},
		{"{{step_1}}", "", "prompt_template: {{step_1}}: the run has 1 step results"},
		{"{{step_01}}", "", `prompt_template: {{step_01}}: "01" is not a step number`},
		{"{{ event }}", "{\n  \"type\": \"task.failed\",\n  \"task_id\": \"brave-otter\",\n  \"blocked\": [\n    \"a\",\n    \"b\"\n  ]\n}", ""},
	} {
		got, err := hooks.Render("prompt_template", c.tmpl, res, ev)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%s: error %v, want %q", c.tmpl, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.tmpl, got, err, c.want)
		}
	}
}

func toolCall(name, args string) llmtest.ToolCall {
	return llmtest.ToolCall{Name: name, Arguments: args}
}

func TestToolsCreateTasksOnceAndPostAndFeedBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	h.project("api")
	ours := h.task("web", "Ours")
	theirs := h.task("api", "Theirs")
	hk := h.hook(`{"project_id":"web","name":"Triage","trigger":{"type":"manual"},"prompt_template":"triage"}`)
	calls := []llmtest.ToolCall{
		toolCall("create_task", `{"title":"Fix the flaky login test","description":"It fails one run in five.","priority":5,"kind":"bug"}`),
		toolCall("post_message", `{"text":"Filed the flaky login test."}`),
		toolCall("add_task_feedback", `{"task_id":"`+ours+`","feedback":"Mind the flaky test."}`),
		toolCall("add_task_feedback", `{"task_id":"`+theirs+`","feedback":"Not yours."}`),
		toolCall("run_shell", `{"cmd":"rm -rf /"}`),
		toolCall("create_task", `{"title":"x","description":"y","repo":"evil"}`),
		toolCall("create_task", `{"title":"   ","description":"y"}`),
	}
	script := func() {
		h.llm.Enqueue(
			llmtest.Reply{ToolCalls: calls, InventsTools: true, Usage: llmtest.Usage{PromptTokens: 200, CompletionTokens: 80}},
			llmtest.Reply{Content: "Filed one task.", Usage: llmtest.Usage{PromptTokens: 300, CompletionTokens: 10}})
	}
	script()
	r := h.fire(hk.ID, models.HookFire{})
	if r.Status != models.HookRunCompleted || deref(r.LLMResponse) != "Filed one task." || r.TokensUsed != 590 {
		t.Fatalf("run: %s %q %d %q", r.Status, deref(r.LLMResponse), r.TokensUsed, r.Error)
	}
	acts := actions(t, r)
	if len(acts) != len(calls) {
		t.Fatalf("%d actions: %+v", len(acts), acts)
	}
	var created struct {
		TaskID  string `json:"task_id"`
		Created bool   `json:"created"`
	}
	mustJSON(t, acts[0].Result, &created)
	if !created.Created || acts[0].Error != "" {
		t.Fatalf("create_task: %+v", acts[0])
	}
	wantErrs := []string{"", "", "",
		`task "` + theirs + `" not found`,
		`there is no tool "run_shell" (tools: create_task, post_message, add_task_feedback)`,
		`the arguments are not valid for create_task: json: unknown field "repo"`,
		"title: required"}
	for i, w := range wantErrs {
		if acts[i].Error != w {
			t.Errorf("action %d (%s): error %q, want %q", i, acts[i].Tool, acts[i].Error, w)
		}
	}
	// What the model was told of each call.
	second := h.llm.Requests()[1].Messages
	if tool := second[len(second)-3]; tool.Role != "tool" || !strings.HasPrefix(tool.Content, "error: there is no tool") {
		t.Fatalf("tool answer: %+v", tool)
	}
	task, err := h.st.GetTask(context.Background(), created.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if task.ProjectID != "web" || task.Priority != 5 || task.Kind != "bug" || task.CreatedBy != "hook:triage" ||
		task.Metadata["hook_id"] != "triage" || task.Metadata["hook_run_id"] != r.ID || task.Status != models.StatusReady {
		t.Fatalf("task: %+v", task)
	}
	fb, err := h.st.TaskFeedback(context.Background(), ours)
	if err != nil || len(fb) != 1 || fb[0].Text != "Mind the flaky test." || fb[0].Source != "hook:triage" || fb[0].Verdict != models.VerdictComment {
		t.Fatalf("feedback %+v, %v", fb, err)
	}
	if fb, _ := h.st.TaskFeedback(context.Background(), theirs); len(fb) != 0 {
		t.Fatalf("feedback reached another project's task: %+v", fb)
	}
	msgs := h.outbox("hook.message")
	if len(msgs) != 1 || !strings.Contains(msgs[0].Payload, `"text":"Filed the flaky login test."`) || msgs[0].ProjectID != "web" {
		t.Fatalf("messages %+v", msgs)
	}

	// The same finding again: deduplicated against the open task.
	script()
	r2 := h.fire(hk.ID, models.HookFire{})
	var again struct {
		TaskID  string `json:"task_id"`
		Created bool   `json:"created"`
	}
	mustJSON(t, actions(t, r2)[0].Result, &again)
	if again.Created || again.TaskID != created.TaskID {
		t.Fatalf("second create_task: %+v", again)
	}
	tasks, err := h.st.ListTasks(context.Background(), models.TaskFilter{ProjectID: "web"})
	if err != nil || len(tasks) != 2 {
		t.Fatalf("%d tasks in web, %v", len(tasks), err)
	}
	if n := len(h.outbox("hook.message")); n != 2 {
		t.Fatalf("%d messages after two runs", n)
	}
}

func TestTheTokenCapStopsTheToolLoop(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	hk := h.hook(`{"project_id":"web","name":"Greedy","trigger":{"type":"manual"},"prompt_template":"go",
		"max_tokens_per_run":1000}`)
	h.llm.Enqueue(
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{toolCall("post_message", `{"text":"one"}`)},
			Usage: llmtest.Usage{PromptTokens: 250, CompletionTokens: 50}},
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{toolCall("create_task", `{"title":"Too far","description":"d"}`)},
			Usage: llmtest.Usage{PromptTokens: 600, CompletionTokens: 150}})
	r := h.fire(hk.ID, models.HookFire{})
	if r.Status != models.HookRunFailed || r.TokensUsed != 1050 ||
		r.Error != "max_tokens_per_run (1000) reached after 2 LLM calls (1050 tokens); the last answer's 1 tool calls were not run" {
		t.Fatalf("%s %d %q", r.Status, r.TokensUsed, r.Error)
	}
	reqs := h.llm.Requests()
	if len(reqs) != 2 || reqs[0].MaxTokens != 1000 || reqs[1].MaxTokens != 700 {
		t.Fatalf("max_tokens sent: %d requests %+v", len(reqs), reqs)
	}
	acts := actions(t, r)
	if len(acts) != 2 || acts[0].Error != "" || acts[1].Error != "not run: max_tokens_per_run was reached" {
		t.Fatalf("actions %+v", acts)
	}
	if tasks, _ := h.st.ListTasks(context.Background(), models.TaskFilter{ProjectID: "web"}); len(tasks) != 0 {
		t.Fatalf("a task was created past the cap: %+v", tasks)
	}
	used, err := h.st.TokensUsedSince(context.Background(), "web", start.Add(-time.Hour))
	if err != nil || used != 1050 {
		t.Fatalf("ledger %d, %v", used, err)
	}
	if p, _ := h.st.GetProject(context.Background(), "web"); p.TotalTokensUsed != 1050 {
		t.Fatalf("project total %d", p.TotalTokensUsed)
	}
}

func TestLLMErrorsBackOffAndFailAfterBoundedTries(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	hk := h.hook(`{"project_id":"web","name":"Ask","trigger":{"type":"manual"},"prompt_template":"hello"}`)

	// A 429 with Retry-After is waited out, then the call succeeds.
	h.llm.Enqueue(llmtest.RateLimited(7*time.Second),
		llmtest.Reply{Content: "hi", Usage: llmtest.Usage{PromptTokens: 3, CompletionTokens: 1}})
	run, err := h.eng.Fire(context.Background(), hk.ID, "tester", models.HookFire{})
	if err != nil {
		t.Fatal(err)
	}
	if d := <-h.clock.Armed(); d != 7*time.Second {
		t.Fatalf("waited %s after a 429 with Retry-After 7", d)
	}
	h.clock.Advance(7 * time.Second)
	if r := h.waitRun(); r.ID != run.ID || r.Status != models.HookRunCompleted || deref(r.LLMResponse) != "hi" {
		t.Fatalf("after the 429: %s %q", r.Status, r.Error)
	}

	// Server failures back off 2s, 4s, 8s, then the run fails.
	h.llm.Enqueue(llmtest.ServerError(), llmtest.ServerError(), llmtest.ServerError(), llmtest.ServerError())
	if _, err := h.eng.Fire(context.Background(), hk.ID, "tester", models.HookFire{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second} {
		if d := <-h.clock.Armed(); d != want {
			t.Fatalf("waited %s, want %s", d, want)
		}
		h.clock.Advance(want)
	}
	r := h.waitRun()
	if r.Status != models.HookRunFailed || !strings.HasPrefix(r.Error, "LLM call 1: the endpoint answered 500: ") ||
		!strings.HasSuffix(r.Error, "(after 4 tries)") {
		t.Fatalf("after four 500s: %s %q", r.Status, r.Error)
	}

	// A refused request is not retried.
	h.llm.Enqueue(llmtest.ErrorReply(400, "context length exceeded"))
	before := len(h.llm.Requests())
	r = h.fire(hk.ID, models.HookFire{})
	if r.Status != models.HookRunFailed || r.Error != "LLM call 1: the endpoint answered 400: context length exceeded" ||
		len(h.llm.Requests()) != before+1 {
		t.Fatalf("after a 400: %s %q", r.Status, r.Error)
	}
}

func TestTheDaemonsKeyGoesOnlyToTheDaemonsEndpoint(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	theirs := llmtest.New(llmtest.Options{APIKey: "their-key"})
	t.Cleanup(theirs.Close)
	// A hook naming another endpoint without its own key sends none.
	bare := h.hook(`{"project_id":"web","name":"Elsewhere","trigger":{"type":"manual"},"prompt_template":"hi",
		"llm_config":{"base_url":"` + theirs.URL() + `","model":"their-model"}}`)
	r := h.fire(bare.ID, models.HookFire{})
	reqs := theirs.Requests()
	if r.Status != models.HookRunFailed || len(reqs) != 1 || reqs[0].Authorization != "Bearer" && reqs[0].Authorization != "" ||
		!strings.Contains(r.Error, "answered 401") {
		t.Fatalf("%s %q, %d requests", r.Status, r.Error, len(reqs))
	}
	keyed := h.hook(`{"project_id":"web","name":"Keyed","trigger":{"type":"manual"},"prompt_template":"hi",
		"llm_config":{"base_url":"` + theirs.URL() + `","api_key":"their-key","model":"their-model","temperature":0.2}}`)
	theirs.Enqueue(llmtest.Reply{Content: "hello", Usage: llmtest.Usage{PromptTokens: 1, CompletionTokens: 1}})
	if r := h.fire(keyed.ID, models.HookFire{}); r.Status != models.HookRunCompleted {
		t.Fatalf("%s %q", r.Status, r.Error)
	}
	if got := theirs.Requests()[1]; got.Model != "their-model" || !strings.Contains(string(got.Raw), `"temperature":0.2`) ||
		got.Authorization != "Bearer their-key" {
		t.Fatalf("request %s (%s)", got.Raw, got.Authorization)
	}
	// An edit that moves the hook to another endpoint does not take the
	// stored key along, even when the redacted key is sent back.
	other := "http://127.0.0.1:1/v1"
	moved := models.HookPatch{LLMConfig: &models.HookLLMConfig{BaseURL: other, APIKey: models.RedactedKey}}.Apply(keyed, start)
	same := models.HookPatch{LLMConfig: &models.HookLLMConfig{BaseURL: theirs.URL(), APIKey: models.RedactedKey}}.Apply(keyed, start)
	if moved.LLMConfig.APIKey != "" || same.LLMConfig.APIKey != "their-key" {
		t.Fatalf("keys after edits: moved %q, same %q", moved.LLMConfig.APIKey, same.LLMConfig.APIKey)
	}
	if n := len(h.llm.Requests()); n != 0 {
		t.Fatalf("the daemon's endpoint got %d requests", n)
	}
	if red := keyed.Redacted(); red.LLMConfig.APIKey != "[redacted]" || keyed.LLMConfig.APIKey != "their-key" {
		t.Fatalf("redaction: %+v", red.LLMConfig)
	}
}

func TestTemperatureZeroAndReasoningModelsAreSentAsAsked(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	reasoning := llmtest.New(llmtest.Options{APIKey: "k"})
	t.Cleanup(reasoning.Close)
	cold := h.hook(`{"project_id":"web","name":"Cold","trigger":{"type":"manual"},"prompt_template":"hi",
		"llm_config":{"temperature":0}}`)
	h.llm.Enqueue(llmtest.Reply{Content: "ok", Usage: llmtest.Usage{PromptTokens: 1, CompletionTokens: 1}})
	if r := h.fire(cold.ID, models.HookFire{}); r.Status != models.HookRunCompleted {
		t.Fatalf("%s %q", r.Status, r.Error)
	}
	if raw := string(h.llm.Requests()[0].Raw); !strings.Contains(raw, `"temperature":1e-45`) {
		t.Fatalf("a zero temperature was not sent: %s", raw)
	}
	o3 := h.hook(`{"project_id":"web","name":"Reasoner","trigger":{"type":"manual"},"prompt_template":"hi","max_tokens_per_run":900,
		"llm_config":{"base_url":"` + reasoning.URL() + `","api_key":"k","model":"o3-mini"}}`)
	reasoning.Enqueue(llmtest.Reply{Content: "ok", Usage: llmtest.Usage{PromptTokens: 1, CompletionTokens: 1}})
	if r := h.fire(o3.ID, models.HookFire{}); r.Status != models.HookRunCompleted {
		t.Fatalf("%s %q", r.Status, r.Error)
	}
	if raw := string(reasoning.Requests()[0].Raw); !strings.Contains(raw, `"max_completion_tokens":900`) || strings.Contains(raw, `"max_tokens"`) {
		t.Fatalf("the cap of a reasoning model's call: %s", raw)
	}
}

func TestAProjectGoingOverBudgetDuringARunStopsIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	limit := int64(1000)
	h.project("web", func(p *models.Project) { p.BudgetLimit = &limit })
	hk := h.hook(`{"project_id":"web","name":"Spender","trigger":{"type":"manual"},"prompt_template":"go"}`)
	h.llm.Enqueue(llmtest.Reply{ToolCalls: []llmtest.ToolCall{toolCall("post_message", `{"text":"spent"}`)},
		Usage: llmtest.Usage{PromptTokens: 900, CompletionTokens: 300}})
	r := h.fire(hk.ID, models.HookFire{})
	if r.Status != models.HookRunFailed || r.Error != "project web went over its token budget during the run (1200 of 1000 tokens used)" ||
		len(h.llm.Requests()) != 1 {
		t.Fatalf("%s %q, %d calls", r.Status, r.Error, len(h.llm.Requests()))
	}
}

func TestMessagesWithTheSameCallIDAreEachPosted(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	hk := h.hook(`{"project_id":"web","name":"Chatty","trigger":{"type":"manual"},"prompt_template":"go"}`)
	for range 2 {
		h.llm.Enqueue(
			llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "same", Name: "post_message", Arguments: `{"text":"one"}`},
				{ID: "same", Name: "post_message", Arguments: `{"text":"two"}`}}, Usage: llmtest.Usage{PromptTokens: 1, CompletionTokens: 1}},
			llmtest.Reply{Content: "done", Usage: llmtest.Usage{PromptTokens: 1, CompletionTokens: 1}})
	}
	h.fire(hk.ID, models.HookFire{})
	// Deleted and made again: its runs are numbered anew, and post again.
	if err := h.st.DeleteHook(context.Background(), hk.ID); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Second)
	hk = h.hook(`{"project_id":"web","name":"Chatty","trigger":{"type":"manual"},"prompt_template":"go"}`)
	if r := h.fire(hk.ID, models.HookFire{}); r.ID != "chatty.1" {
		t.Fatalf("run %s", r.ID)
	}
	if n := len(h.outbox("hook.message")); n != 4 {
		t.Fatalf("%d messages posted, want 4", n)
	}
}

func TestCommandsLeaveNothingRunningAndFIFOsDoNotHang(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.commit(map[string]string{"bg.sh": "sleep 30 &\necho $!\n"}, "a script that leaves a child")
	h.project("web", func(p *models.Project) { p.Settings.HookCommands = []string{"sh bg.sh", "mkfifo pipe"} })
	bg := h.hook(`{"project_id":"web","name":"Background","trigger":{"type":"manual"},
		"context_steps":[{"type":"run_command","command":"sh bg.sh"}]}`)
	r := h.fire(bg.ID, models.HookFire{})
	res := results(t, r)
	if r.Status != models.HookRunCompleted || *res[0].ExitCode != 0 {
		t.Fatalf("%s %q", r.Status, r.Error)
	}
	pid := strings.TrimSpace(res[0].Output)
	if alive, stat := stillRuns(pid); alive {
		t.Fatalf("the command's child %s still runs: %s", pid, stat)
	}
	fifo := h.hook(`{"project_id":"web","name":"Fifo","trigger":{"type":"manual"},
		"context_steps":[{"type":"run_command","command":"mkfifo pipe"},{"type":"read_file","path":"pipe"}]}`)
	if r := h.fire(fifo.ID, models.HookFire{}); r.Status != models.HookRunFailed || r.Error != "context_steps[1] (read_file): pipe: not a regular file" {
		t.Fatalf("%s %q", r.Status, r.Error)
	}
}

// stillRuns reports whether the process pid can still run: it exists, is
// not a zombie, and has no SIGKILL pending. A process killed a moment ago
// on a busy machine may not have been scheduled to die yet, but with
// SIGKILL pending it never runs another instruction.
func stillRuns(pid string) (bool, string) {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false, ""
	}
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
		return false, string(stat)
	}
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return false, string(stat)
	}
	const sigkill = 1 << (9 - 1) // bit 9-1 of the pending-signal masks
	for line := range strings.Lines(string(status)) {
		name, mask, ok := strings.Cut(line, ":")
		if !ok || (name != "SigPnd" && name != "ShdPnd") {
			continue
		}
		if m, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64); err == nil && m&sigkill != 0 {
			return false, string(stat)
		}
	}
	return true, string(stat)
}

// outbox returns the notices of a kind.
func (h *harness) outbox(kind models.NoticeKind) []models.OutboxMessage {
	h.t.Helper()
	all, err := h.st.PendingOutbox(context.Background(), 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []models.OutboxMessage
	for _, m := range all {
		if m.Kind == kind {
			out = append(out, m)
		}
	}
	return out
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestAPromptWithoutAnLLMIsRefused: a hook with a prompt is refused when it
// is saved while no LLM is configured for it, naming what to set; one
// without a prompt, or with its own model, is accepted.
func TestAPromptWithoutAnLLMIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *hooks.Config) { c.LLM = hooks.LLMConfig{} })
	h.project("web")
	ctx := context.Background()
	for _, c := range []struct {
		spec, want string
	}{
		{`{"project_id":"web","name":"x","trigger":{"type":"manual"},"prompt_template":"Summarise"}`, "prompt_template"},
		{`{"project_id":"web","name":"x","trigger":{"type":"manual"}}`, ""},
		{`{"project_id":"web","name":"x","trigger":{"type":"manual"},"prompt_template":"Summarise",
			"llm_config":{"base_url":"http://127.0.0.1:1/v1","model":"own"}}`, ""},
	} {
		var s models.HookSpec
		mustJSON(t, c.spec, &s)
		err := h.eng.Check(ctx, s.Hook())
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.spec, err)
		case c.want != "" && (models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), "llm.model")):
			t.Errorf("%s: %v, want invalid naming %s and llm.model", c.spec, err, c.want)
		}
	}
}
