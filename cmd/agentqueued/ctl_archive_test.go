package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// TestCtlShowsArchivedTask: the daemon's pruner archives a finished task
// once its window has passed; `ctl task show` still shows it and says it
// is archived, `ctl task list --archived` lists it and the plain list
// does not.
func TestCtlShowsArchivedTask(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.yaml", "retention:\n  archive_tasks: 1d\n  interval: 1h\n")
	fake := clocktest.New(time.Now())
	d, err := startMainWith(t, func(m *Main) { m.retentionClock = fake },
		"run", "--data-dir", dir+"/data", "--listen", "127.0.0.1:0", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := d.m.Addr()
	mustCtl(t, addr, "project", "create", "web")
	var res api.BatchResponse
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "task", "add", "--project", "web", "--title", "Old news")), &res); err != nil ||
		len(res.Results) != 1 {
		t.Fatalf("task add: %v %+v", err, res)
	}
	id := res.Results[0].TaskID
	mustCtl(t, addr, "task", "cancel", id, "--reason", "stale")
	ctx := progresstest.Context(t)
	if err := fake.WaitTimer(ctx, time.Hour); err != nil { // the first pass, at start, is over
		t.Fatal(err)
	}
	fake.Advance(49 * time.Hour)
	if err := fake.WaitTimer(ctx, time.Hour); err != nil { // the pass the advance started is over
		t.Fatal(err)
	}

	show := mustCtl(t, addr, "task", "show", id)
	if !regexp.MustCompile(`(?m)^Archived:\s+\S+.*read-only`).MatchString(show) ||
		!regexp.MustCompile(`(?m)^Status:\s+BLOCKED`).MatchString(show) || !strings.Contains(show, "cancelled by") {
		t.Errorf("task show of an archived task:\n%s", show)
	}
	var detail models.TaskDetail
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "task", "show", id)), &detail); err != nil || detail.ArchivedAt == nil {
		t.Errorf("task show --json: archived_at %v (%v)", detail.ArchivedAt, err)
	}
	if list := mustCtl(t, addr, "task", "list", "--archived"); !strings.Contains(list, id) {
		t.Errorf("task list --archived lacks %s:\n%s", id, list)
	}
	if list := mustCtl(t, addr, "task", "list", "--project", "web"); strings.Contains(list, id) {
		t.Errorf("task list still shows archived %s:\n%s", id, list)
	}
	// A person's event on it says it is archived (it said "not found"
	// while show shows it).
	for _, verb := range []string{"restart", "cancel"} {
		r := runCtl(t, addr, nil, "task", verb, id)
		if r.code == 0 || !strings.Contains(r.stderr, "task "+id+" is archived") {
			t.Errorf("task %s of an archived task: exit %d, %s", verb, r.code, r.stderr)
		}
	}
}

// TestCtlStats: `ctl stats` prints a row per project with its tasks by
// status, `--json` the figures, `--project` one project, and an unknown
// project is named in the error.
func TestCtlStats(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir())
	addr := d.m.Addr()
	mustCtl(t, addr, "project", "create", "web")
	mustCtl(t, addr, "project", "create", "api")
	mustCtl(t, addr, "task", "add", "--project", "web", "--title", "One")
	mustCtl(t, addr, "task", "add", "--project", "web", "--title", "Two")

	out := mustCtl(t, addr, "stats")
	if !regexp.MustCompile(`(?m)^PROJECT\s+TASKS\s+BY STATUS\s+ARCHIVED\s+DONE 24H\s+LAST HOUR\s+MEAN WAIT\s+MEAN RUN`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^web\s+2\s+READY 2\s+0\s+0\s+0\s+-\s+-\s*$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^api\s+0\s+-\s+0`).MatchString(out) || !strings.Contains(out, "Completions per hour") {
		t.Errorf("ctl stats:\n%s", out)
	}
	var st models.Stats
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "stats", "--project", "web")), &st); err != nil ||
		len(st.Projects) != 1 || st.Projects[0].ByStatus[models.StatusReady] != 2 {
		t.Errorf("ctl --json stats --project web: %+v (%v)", st, err)
	}
	if r := runCtl(t, addr, nil, "stats", "--project", "nope"); r.code != 1 || !strings.Contains(r.stderr, `"nope"`) {
		t.Errorf("stats of an unknown project: %+v", r)
	}
}

// TestCtlShowsArchivedRunTasks: once the pruner has archived the tasks of
// a cancelled run, `ctl run show` and `ctl run tasks` still show them,
// marked archived; `ctl run logs` says the task's logs went with it, and
// `ctl run retry` is refused naming the archived task and how to run the
// workflow again.
func TestCtlShowsArchivedRunTasks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.yaml", "retention:\n  archive_tasks: 1d\n  interval: 1h\n")
	fake := clocktest.New(time.Now())
	d, err := startMainWith(t, func(m *Main) { m.retentionClock = fake },
		"run", "--data-dir", dir+"/data", "--listen", "127.0.0.1:0", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := d.m.Addr()
	mustCtl(t, addr, "project", "create", "web")
	mustCtl(t, addr, "workflow", "add", "--file", writeFile(t, dir, "review.yaml",
		"name: review\nproject: web\nsteps:\n  - name: read\n    title: Read the diff\n"))
	mustCtl(t, addr, "workflow", "run", "review")
	mustCtl(t, addr, "run", "cancel", "review-1")
	ctx := progresstest.Context(t)
	if err := fake.WaitTimer(ctx, time.Hour); err != nil { // the first pass, at start, is over
		t.Fatal(err)
	}
	fake.Advance(49 * time.Hour)
	if err := fake.WaitTimer(ctx, time.Hour); err != nil { // the pass the advance started is over
		t.Fatal(err)
	}

	show := mustCtl(t, addr, "run", "show", "review-1")
	if !regexp.MustCompile(`(?m)^Tasks:\s+BLOCKED=1$`).MatchString(show) || !regexp.MustCompile(`(?m)^Archived:\s+1 of its tasks`).MatchString(show) {
		t.Errorf("run show of a run whose task is archived:\n%s", show)
	}
	tasks := mustCtl(t, addr, "run", "tasks", "review-1")
	if !regexp.MustCompile(`(?m)^read\s+\S+\s+BLOCKED \(archived\)\s+Read the diff`).MatchString(tasks) {
		t.Errorf("run tasks of a run whose task is archived:\n%s", tasks)
	}
	if r := runCtl(t, addr, nil, "run", "logs", "review-1", "read"); r.code != 1 || !strings.Contains(r.stderr, "(read of run review-1) was archived") {
		t.Errorf("run logs of an archived task: exit %d, %s", r.code, r.stderr)
	}
	if r := runCtl(t, addr, nil, "run", "retry", "review-1"); r.code != 1 || !strings.Contains(r.stderr, "were archived BLOCKED") ||
		!strings.Contains(r.stderr, "ctl workflow run review") {
		t.Errorf("run retry of a run whose task is archived: exit %d, %s", r.code, r.stderr)
	}
}
