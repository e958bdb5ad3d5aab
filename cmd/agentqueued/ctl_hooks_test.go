package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

func TestCtlHooks(t *testing.T) {
	t.Parallel()
	const secret = "sk-secret"
	dir := t.TempDir()
	d := startDaemon(t, dir)
	addr := d.m.Addr()
	var outputs []string
	ctl := func(args ...string) string {
		t.Helper()
		out := mustCtl(t, addr, args...)
		outputs = append(outputs, out)
		return out
	}
	// refused runs ctl expecting exit status code and stderr containing msg.
	refused := func(code int, msg string, args ...string) {
		t.Helper()
		r := runCtl(t, addr, nil, args...)
		if r.code != code || !strings.Contains(r.stderr, msg) {
			t.Errorf("ctl %s: exit %d, stderr %q; want exit %d and %q", strings.Join(args, " "), r.code, r.stderr, code, msg)
		}
		outputs = append(outputs, r.stdout, r.stderr)
	}
	ctl("project", "create", "web")

	hookFile := writeFile(t, dir, "hook.json", `{"project_id":"web","name":"Task counts","trigger":{"type":"manual"},
		"context_steps":[{"type":"db_query","query":"task_counts"}],
		"llm_config":{"base_url":"http://127.0.0.1:1/v1","model":"small","api_key":"`+secret+`"}}`)
	out := ctl("hook", "create", "--file", hookFile)
	for _, want := range []string{"task-counts", "Task counts", "manual", "1h0m0s", "Context steps (1):",
		"step_0: db_query query=task_counts", "model small, endpoint http://127.0.0.1:1/v1, own API key"} {
		if !strings.Contains(out, want) {
			t.Errorf("hook create lacks %q:\n%s", want, out)
		}
	}
	weekly := writeFile(t, dir, "weekly.json", `{"id":"weekly","project_id":"web","name":"Weekly",
		"trigger":{"type":"cron","expr":"0 9 * * 1","timezone":"Europe/Paris"},"enabled":false}`)
	var h models.Hook
	if err := json.Unmarshal([]byte(ctl("--json", "hook", "create", "--file", weekly)), &h); err != nil ||
		h.ID != "weekly" || h.Enabled || h.Trigger.Expr != "0 9 * * 1" {
		t.Fatalf("hook create --json: %+v, %v", h, err)
	}
	refused(2, "--file is required", "hook", "create")
	refused(1, `unknown field "colour"`, "hook", "create", "--file",
		writeFile(t, dir, "colour.json", `{"project_id":"web","name":"x","trigger":{"type":"manual"},"colour":"red"}`))
	refused(1, "trigger.type", "hook", "create", "--file",
		writeFile(t, dir, "hourly.json", `{"project_id":"web","name":"x","trigger":{"type":"hourly"}}`))
	refused(1, `hook "weekly" exists already`, "hook", "create", "--file", weekly)

	list := ctl("hook", "list")
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], "task-counts") ||
		!strings.Contains(lines[2], "cron 0 9 * * 1 (Europe/Paris)") {
		t.Fatalf("hook list:\n%s", list)
	}
	var hl api.HookList
	if err := json.Unmarshal([]byte(ctl("--json", "hook", "list", "--project", "web")), &hl); err != nil || len(hl.Hooks) != 2 {
		t.Fatalf("hook list --json --project web: %+v, %v", hl, err)
	}
	refused(1, `project "ghost" not found`, "hook", "list", "--project", "ghost")

	if out := ctl("hook", "disable", "task-counts"); !strings.Contains(out, "false") {
		t.Errorf("hook disable:\n%s", out)
	}
	if out := ctl("--json", "hook", "show", "task-counts"); !strings.Contains(out, `"enabled": false`) {
		t.Errorf("hook show after disable:\n%s", out)
	}
	if out := ctl("--json", "hook", "enable", "task-counts"); !strings.Contains(out, `"enabled": true`) {
		t.Errorf("hook enable:\n%s", out)
	}
	patch := writeFile(t, dir, "patch.json", `{"name":"Counts","cooldown_seconds":60}`)
	if out := ctl("hook", "edit", "task-counts", "--file", patch); !strings.Contains(out, "Counts") || !strings.Contains(out, "1m0s") {
		t.Errorf("hook edit:\n%s", out)
	}
	refused(2, "--file is required", "hook", "edit", "task-counts")
	refused(2, "want ID", "hook", "edit", "--file", patch)
	refused(1, `unknown field "project_id"`, "hook", "edit", "task-counts", "--file",
		writeFile(t, dir, "move.json", `{"project_id":"other"}`))
	refused(1, `hook "ghost" not found`, "hook", "show", "ghost")

	// Firing records the run before it answers, whatever the run does next.
	var run models.HookRun
	if err := json.Unmarshal([]byte(ctl("--json", "hook", "fire", "task-counts", "--actor", "alice")), &run); err != nil ||
		run.ID == "" || run.HookID != "task-counts" || run.TriggerReason != models.TriggerReasonManual || run.TriggerDetail != "fired by alice" {
		t.Fatalf("hook fire --json: %+v, %v", run, err)
	}
	event := writeFile(t, dir, "event.json", `{"type":"task.failed","title":"Flaky"}`)
	if out := ctl("hook", "fire", "task-counts", "--event-file", event); !strings.HasPrefix(out, "hook task-counts fired: run ") {
		t.Errorf("hook fire --event-file:\n%s", out)
	}
	refused(1, `unknown field "colour"`, "hook", "fire", "task-counts", "--event-file",
		writeFile(t, dir, "bad-event.json", `{"type":"task.failed","colour":"red"}`))
	refused(1, `hook "ghost" not found`, "hook", "fire", "ghost")

	var rl api.HookRunList
	if err := json.Unmarshal([]byte(ctl("--json", "hook", "runs", "task-counts")), &rl); err != nil || len(rl.Runs) != 2 ||
		rl.Runs[1].ID != run.ID || rl.Runs[0].EventData == nil || !strings.Contains(*rl.Runs[0].EventData, "Flaky") {
		t.Fatalf("hook runs --json: %+v, %v", rl, err)
	}
	if out := ctl("hook", "runs", "task-counts", "--limit", "1"); len(strings.Split(strings.TrimSpace(out), "\n")) != 2 ||
		!strings.HasPrefix(out, "RUN") || strings.Contains(out, run.ID) {
		t.Errorf("hook runs --limit 1 (the newest only):\n%s", out)
	}
	refused(1, "status: must be one of running, completed, failed, skipped", "hook", "runs", "task-counts", "--status", "done")
	refused(1, `hook "ghost" not found`, "hook", "runs", "ghost")
	if out := ctl("hook", "run", run.ID); !strings.Contains(out, run.ID) || !strings.Contains(out, "fired by alice") ||
		!strings.Contains(out, "task-counts") {
		t.Errorf("hook run:\n%s", out)
	}
	refused(1, `hook run "ghost" not found`, "hook", "run", "ghost")

	if out := ctl("hook", "delete", "weekly"); !strings.Contains(out, "hook weekly deleted") {
		t.Errorf("hook delete:\n%s", out)
	}
	refused(1, `hook "weekly" not found`, "hook", "show", "weekly")
	refused(2, "missing or unknown command", "hook")

	for _, o := range outputs {
		if strings.Contains(o, secret) {
			t.Errorf("ctl printed the API key:\n%s", o)
		}
	}
	if strings.Contains(d.logs.String(), secret) {
		t.Errorf("the daemon logged the API key")
	}
}
