package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// ctlPipeline builds, tests in two shards, then reports.
const ctlPipeline = `name: pipeline
project: web
description: Build, test in shards, report.
schedule: "0 2 * * *"
timezone: Europe/Paris
steps:
  - name: build
    title: "Build for {{run.id}}"
    kind: build
    expected_count: 3
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

func TestCtlWorkflows(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDaemon(t, dir)
	addr := d.m.Addr()
	ctl := func(args ...string) string {
		t.Helper()
		return mustCtl(t, addr, args...)
	}
	// refused runs ctl expecting exit status code and stderr containing msg.
	refused := func(code int, msg string, args ...string) {
		t.Helper()
		r := runCtl(t, addr, nil, args...)
		if r.code != code || !strings.Contains(r.stderr, msg) {
			t.Errorf("ctl %s: exit %d, stderr %q; want exit %d and %q", strings.Join(args, " "), r.code, r.stderr, code, msg)
		}
	}
	ctl("project", "create", "web")

	pipeline := writeFile(t, dir, "pipeline.yaml", ctlPipeline)
	out := ctl("workflow", "add", "--file", pipeline)
	for _, want := range []string{"workflow pipeline created", "Build, test in shards, report.", "0 2 * * * (Europe/Paris)",
		"Origin:", "api", "Steps (3):", "Build for {{run.id}}", "parallel 2", "after build",
		"after shards (whatever its result)", "kind build", "expected_count 3", "Document:", "  timezone: Europe/Paris"} {
		if !strings.Contains(out, want) {
			t.Errorf("workflow add lacks %q:\n%s", want, out)
		}
	}
	if out := ctl("workflow", "add", "--file", pipeline); !strings.HasPrefix(out, "workflow pipeline replaced\n") {
		t.Errorf("workflow add of the same name:\n%s", out)
	}
	review := writeFile(t, dir, "review.json", `{"name":"review","project":"web","steps":[{"name":"read","title":"Read the diff"}]}`)
	var wf models.Workflow
	if err := json.Unmarshal([]byte(ctl("--json", "workflow", "add", "--file", review)), &wf); err != nil ||
		wf.Name != "review" || wf.Origin != models.WorkflowFromAPI || len(wf.Steps) != 1 {
		t.Fatalf("workflow add --json of a JSON document: %+v, %v", wf, err)
	}
	// An invalid document's lines name the file.
	broken := writeFile(t, dir, "broken.yaml",
		"name: broken\nproject: web\nsteps:\n  - name: build\n    title: Build\n  - name: test\n    title: Test\n    depends_on: [tets]\n")
	refused(1, "error: "+broken+`:8:18: steps[1].depends_on[0]: unknown step "tets" (steps: build, test)`+"\n",
		"workflow", "add", "--file", broken)
	twoProblems := writeFile(t, dir, "two.yaml", "name: Two\nproject: web\nsteps:\n  - name: a\n    title: A\n    verification: MAYBE\n")
	refused(1, twoProblems+":1:7: name: \"Two\" is not a workflow name", "workflow", "add", "--file", twoProblems)
	refused(1, "\n"+twoProblems+`:6:19: steps[0].verification: must be AUTO_TEST, QA_AGENT or HUMAN (got "MAYBE")`,
		"workflow", "add", "--file", twoProblems)
	refused(1, `project "ghost" not found`, "workflow", "add", "--file",
		writeFile(t, dir, "ghost.yaml", "name: g\nproject: ghost\nsteps:\n  - name: a\n    title: A\n"))
	refused(2, "--file is required", "workflow", "add")
	refused(1, "read workflow", "workflow", "add", "--file", filepath.Join(dir, "missing.yaml"))

	list := ctl("workflow", "list")
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "pipeline") ||
		!strings.Contains(lines[1], "0 2 * * * (Europe/Paris)") || !strings.Contains(lines[1], " on ") ||
		!strings.HasPrefix(lines[2], "review") {
		t.Fatalf("workflow list:\n%s", list)
	}
	var wl api.WorkflowList
	if err := json.Unmarshal([]byte(ctl("--json", "workflow", "list", "--project", "web")), &wl); err != nil || len(wl.Workflows) != 2 {
		t.Fatalf("workflow list --json --project web: %+v, %v", wl, err)
	}
	refused(1, `project "ghost" not found`, "workflow", "list", "--project", "ghost")
	if out := ctl("workflow", "show", "review"); !strings.Contains(out, "Read the diff") || !strings.Contains(out, "Steps (1):") {
		t.Errorf("workflow show:\n%s", out)
	}
	refused(1, `workflow "ghost" not found`, "workflow", "show", "ghost")

	if out := ctl("workflow", "schedule", "pipeline", "off"); !strings.Contains(out, " off ") {
		t.Errorf("workflow schedule off:\n%s", out)
	}
	if out := ctl("--json", "workflow", "show", "pipeline"); !strings.Contains(out, `"schedule_enabled": false`) {
		t.Errorf("workflow show after schedule off:\n%s", out)
	}
	if out := ctl("--json", "workflow", "schedule", "pipeline", "on"); !strings.Contains(out, `"schedule_enabled": true`) {
		t.Errorf("workflow schedule on:\n%s", out)
	}
	refused(2, `want on or off, got "maybe"`, "workflow", "schedule", "pipeline", "maybe")
	refused(2, "want NAME on|off", "workflow", "schedule", "pipeline")
	refused(1, `workflow "ghost" not found`, "workflow", "schedule", "ghost", "off")

	// Runs: no agent is configured, so their tasks stay where they start.
	out = ctl("workflow", "run", "pipeline", "--actor", "alice")
	for _, want := range []string{"workflow pipeline: run pipeline-1 started", "pending", "manual by alice", "DEFINED=3, READY=1"} {
		if !strings.Contains(out, want) {
			t.Errorf("workflow run lacks %q:\n%s", want, out)
		}
	}
	var run models.WorkflowRun
	if err := json.Unmarshal([]byte(ctl("--json", "workflow", "run", "review")), &run); err != nil ||
		run.ID != "review-1" || run.Workflow != "review" || run.Trigger != models.TriggerByHand {
		t.Fatalf("workflow run --json: %+v, %v", run, err)
	}
	refused(1, `workflow "ghost" not found`, "workflow", "run", "ghost")

	runs := ctl("run", "list")
	lines = strings.Split(strings.TrimSpace(runs), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "RUN") || !strings.HasPrefix(lines[1], "review-1") ||
		!strings.HasPrefix(lines[2], "pipeline-1") || !strings.Contains(lines[2], "manual by alice") {
		t.Fatalf("run list (newest first):\n%s", runs)
	}
	var rl api.WorkflowRunList
	if err := json.Unmarshal([]byte(ctl("--json", "run", "list", "--workflow", "pipeline", "--status", "PENDING", "--project", "web")), &rl); err != nil ||
		len(rl.Runs) != 1 || rl.Runs[0].ID != "pipeline-1" {
		t.Fatalf("run list --json --workflow pipeline --status PENDING: %+v, %v", rl, err)
	}
	if out := ctl("run", "list", "--limit", "1"); len(strings.Split(strings.TrimSpace(out), "\n")) != 2 || !strings.Contains(out, "review-1") {
		t.Errorf("run list --limit 1:\n%s", out)
	}
	refused(1, "status: must be one of pending, running, success, failed, cancelled", "run", "list", "--status", "done")
	refused(2, "--limit must not be negative", "run", "list", "--limit", "-1")
	refused(1, `project "ghost" not found`, "run", "list", "--project", "ghost")

	if out := ctl("run", "show", "pipeline-1"); !strings.Contains(out, "pipeline-1") || !strings.Contains(out, "Tasks:") ||
		!strings.Contains(out, "DEFINED=3, READY=1") || !strings.Contains(out, "manual by alice") {
		t.Errorf("run show:\n%s", out)
	}
	refused(1, `run "ghost" not found`, "run", "show", "ghost")

	var tl api.RunTaskList
	if err := json.Unmarshal([]byte(ctl("--json", "run", "tasks", "pipeline-1")), &tl); err != nil || len(tl.Tasks) != 4 {
		t.Fatalf("run tasks --json: %+v, %v", tl, err)
	}
	ids := map[string]string{}
	for _, tk := range tl.Tasks {
		ids[tk.Name] = tk.ID
	}
	tasks := ctl("run", "tasks", "pipeline-1")
	if lines := strings.Split(strings.TrimSpace(tasks), "\n"); len(lines) != 5 || !strings.HasPrefix(lines[0], "NAME") ||
		!strings.Contains(tasks, "Build for pipeline-1") || !strings.Contains(tasks, "shards[1]") || !strings.Contains(tasks, ids["build"]) {
		t.Errorf("run tasks:\n%s", tasks)
	}

	// Logs: by the task's name in the run, brackets and all.
	if out := ctl("run", "logs", "pipeline-1", "shards[1]"); out != "task shards[1] ("+ids["shards[1]"]+") has no log yet\n" {
		t.Errorf("run logs of a task without a log: %q", out)
	}
	logDir := filepath.Join(dir, "runs", ids["build"])
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, logDir, "1.log", "compiling\n\x1b[31mbroken\x1b[0m\tat main.go:3\n")
	writeFile(t, logDir, "2.log", "compiling\nok\n")
	out = ctl("run", "logs", "pipeline-1", "build")
	if want := "== attempt 1 ==\ncompiling\n\\x1b[31mbroken\\x1b[0m\tat main.go:3\n\n== attempt 2 ==\ncompiling\nok\n"; out != want {
		t.Errorf("run logs:\n%q\nwant\n%q", out, want)
	}
	if out := ctl("run", "logs", "pipeline-1", "build", "--attempt", "2"); out != "== attempt 2 ==\ncompiling\nok\n" {
		t.Errorf("run logs --attempt 2: %q", out)
	}
	var logs models.TaskLogs
	if err := json.Unmarshal([]byte(ctl("--json", "run", "logs", "pipeline-1", "build")), &logs); err != nil ||
		logs.TaskID != ids["build"] || len(logs.Attempts) != 2 || logs.Attempts[1].Attempt != 2 || logs.Attempts[1].Log != "compiling\nok\n" {
		t.Fatalf("run logs --json: %+v, %v", logs, err)
	}
	refused(1, `run pipeline-1 has no task "deploy" (tasks: build, report, shards[0], shards[1])`, "run", "logs", "pipeline-1", "deploy")
	refused(1, "has no log of attempt 5", "run", "logs", "pipeline-1", "build", "--attempt", "5")
	refused(2, "--attempt must not be negative", "run", "logs", "pipeline-1", "build", "--attempt", "-1")
	refused(2, "want ID NAME", "run", "logs", "pipeline-1")

	// Cancel, then retry.
	if out := ctl("run", "cancel", "pipeline-1", "--actor", "bob"); out != "run pipeline-1: cancelled (tasks: BLOCKED=4)\n" {
		t.Errorf("run cancel: %q", out)
	}
	if out := ctl("run", "show", "pipeline-1"); !strings.Contains(out, "cancelled by bob") {
		t.Errorf("run show after cancel:\n%s", out)
	}
	for _, line := range strings.Split(strings.TrimSpace(ctl("run", "tasks", "pipeline-1")), "\n")[1:] {
		if !strings.Contains(line, " BLOCKED ") || !strings.HasSuffix(line, "cancelled") {
			t.Errorf("task of the cancelled run: %s", line)
		}
	}
	if err := json.Unmarshal([]byte(ctl("--json", "run", "retry", "pipeline-1")), &run); err != nil ||
		run.Status != models.RunPending || run.Tasks[models.StatusBlocked] != 0 {
		t.Fatalf("run retry --json: %+v, %v", run, err)
	}
	refused(1, "run pipeline-1 is pending: only a failed or cancelled run is retried", "run", "retry", "pipeline-1")
	refused(1, `run "ghost" not found`, "run", "cancel", "ghost")

	// Deleting a workflow keeps its runs.
	if out := ctl("workflow", "delete", "review"); out != "workflow review deleted (its runs stay)\n" {
		t.Errorf("workflow delete: %q", out)
	}
	refused(1, `workflow "review" not found`, "workflow", "delete", "review")
	if out := ctl("run", "list", "--workflow", "review"); !strings.Contains(out, "review-1") {
		t.Errorf("runs of the deleted workflow:\n%s", out)
	}
	refused(2, "missing or unknown command", "workflow")
	refused(2, "missing or unknown command", "run")
	refused(2, `unknown command "run start"`, "run", "start", "pipeline")
}

// ctl workflow run --input gives a run its inputs; run show lists them; a
// missing or unknown input is refused naming it.
func TestCtlWorkflowRunInputs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDaemon(t, dir)
	addr := d.m.Addr()
	mustCtl(t, addr, "project", "create", "web")
	doc := writeFile(t, dir, "release.yaml", "name: release\nproject: web\ninputs:\n  - name: version\n    required: true\n"+
		"    description: the version to tag\n  - name: channel\n    default: stable\nsteps:\n  - name: tag\n"+
		"    title: \"Tag {{inputs.version}} on {{inputs.channel}}\"\n")
	mustCtl(t, addr, "workflow", "add", "--file", doc)

	out := mustCtl(t, addr, "workflow", "run", "release", "--input", "version=2.3", "--input", "channel=beta")
	for _, want := range []string{"run release-1 started", "Input channel:", "beta", "Input version:", "2.3"} {
		if !strings.Contains(out, want) {
			t.Errorf("workflow run lacks %q:\n%s", want, out)
		}
	}
	if out := mustCtl(t, addr, "run", "show", "release-1"); !strings.Contains(out, "Input version:") || !strings.Contains(out, "2.3") {
		t.Errorf("run show:\n%s", out)
	}
	if out := mustCtl(t, addr, "run", "tasks", "release-1"); !strings.Contains(out, "Tag 2.3 on beta") {
		t.Errorf("run tasks:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"workflow", "run", "release"}, 1, "inputs.version: required (the version to tag); give it with --input version=VALUE"},
		{[]string{"workflow", "run", "release", "--input", "version=1", "--input", "chanel=x"}, 1,
			"inputs.chanel: unknown input (inputs: version, channel)"},
		{[]string{"workflow", "run", "release", "--input", "version"}, 2, `"version" is not key=value`},
	} {
		r := runCtl(t, addr, nil, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("ctl %s: exit %d, stderr %q; want exit %d and %q", strings.Join(c.args, " "), r.code, r.stderr, c.code, c.msg)
		}
	}
}
