package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestCtlTaskCancel cancels a queued task with dependents through the real
// daemon: the output names the dependents it blocked and promoted, task
// show gives the reason and how the upstream ended on each edge, a repeat
// says it was already applied and a completed task is refused.
func TestCtlTaskCancel(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir())
	addr := d.m.Addr()
	mustCtl(t, addr, "project", "create", "web")
	batch := filepath.Join(t.TempDir(), "batch.json")
	if err := os.WriteFile(batch, []byte(`{"project_id":"web","tasks":[{"id":"a","title":"A"},
		{"id":"hard","title":"Hard","dependencies":[{"id":"a"}]},
		{"id":"soft","title":"Soft","dependencies":[{"id":"a","requires_success":false}]},
		{"id":"done","title":"Done"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var res api.BatchResponse
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "task", "add", "--file", batch)), &res); err != nil || len(res.Results) != 4 {
		t.Fatalf("task add: %v %+v", err, res)
	}
	a, hard, soft, done := res.Results[0].TaskID, res.Results[1].TaskID, res.Results[2].TaskID, res.Results[3].TaskID

	out := mustCtl(t, addr, "task", "cancel", a, "--reason", "not needed", "--actor", "ann")
	want := a + ": READY -> BLOCKED\npromoted to READY: " + soft + "\nblocked: " + hard + "\n"
	if out != want {
		t.Errorf("task cancel output = %q, want %q", out, want)
	}
	if out := mustCtl(t, addr, "task", "cancel", a, "--actor", "ann"); out != a+": BLOCKED -> BLOCKED (already applied)\n" {
		t.Errorf("repeated task cancel output = %q", out)
	}
	show := mustCtl(t, addr, "task", "show", a)
	if !regexp.MustCompile(`ADMIN_CANCEL\s+READY\s+BLOCKED\s+ann\s+cancelled by ann: not needed`).MatchString(show) {
		t.Errorf("task show lacks the cancel:\n%s", show)
	}
	show = mustCtl(t, addr, "task", "show", soft)
	if !regexp.MustCompile(`(?m)^\s+` + a + `\s+false\s+SATISFIED\s+\S+\s+CANCELLED\s+-\s*$`).MatchString(show) {
		t.Errorf("task show of the soft dependent lacks the edge's outcome:\n%s", show)
	}
	var detail models.TaskDetail
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "task", "show", hard)), &detail); err != nil {
		t.Fatal(err)
	}
	if detail.Task.Status != models.StatusBlocked || detail.Task.CascadeRootID != a ||
		!strings.Contains(detail.Task.StatusReason, "cancelled by ann: not needed") {
		t.Errorf("hard dependent: %+v", detail.Task)
	}

	r := runCtl(t, addr, nil, "task", "cancel", hard)
	if r.code != 1 || !strings.HasPrefix(r.stderr, "error: task "+hard+" is already BLOCKED (upstream "+a) ||
		!strings.Contains(r.stderr, "there is nothing to cancel") {
		t.Errorf("cancelling a blocked task: %+v", r)
	}
	if st := mustCtl(t, addr, "task", "show", done); !regexp.MustCompile(`(?m)^Status:\s+READY`).MatchString(st) {
		t.Errorf("an unrelated task changed:\n%s", st)
	}
	if r := runCtl(t, addr, nil, "task", "cancel"); r.code != 2 {
		t.Errorf("task cancel without an id: %+v", r)
	}
}

// TestCtlCancelEndsTheRunningAgent cancels a running task through the real
// daemon's command layer: the agent process ends, the task stays BLOCKED
// naming who cancelled it, the dependent requiring its success is blocked
// and the soft dependent is not.
func TestCtlCancelEndsTheRunningAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := writeFile(t, dir, "agent.sh", `exec sleep 300`)
	cfg := writeFile(t, dir, "config.yaml", `
agents:
  - name: worker
    type: command
    command: /bin/sh
    args: ["`+script+`"]
`)
	changed := make(chan struct{}, 1)
	d, err := startMainWith(t, func(m *Main) {
		m.OnChange = func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}, "run", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := d.watch.Context()
	c, err := api.NewClient("http://"+d.m.Addr(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateProject(ctx, models.ProjectSpec{ID: "shop"}.Project()); err != nil {
		t.Fatal(err)
	}
	res, err := c.CreateTasks(ctx, models.TaskBatch{ProjectID: "shop", Tasks: []models.BatchTask{
		{LocalID: "t", Title: "Long job"},
		{LocalID: "hard", Title: "After it", Dependencies: []models.BatchDependency{{ID: "t"}}},
		{LocalID: "soft", Title: "Either way", Dependencies: []models.BatchDependency{{ID: "t", RequiresSuccess: new(bool)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	id, hard, soft := res[0].TaskID, res[1].TaskID, res[2].TaskID
	// waitUntil checks cond after every committed change, and on a short
	// interval for what commits none (a run starting, a process ending),
	// for as long as the daemon makes progress.
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-changed:
			case <-poll.C:
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v\n%s", what, d.watch.Err(), d.logs)
			}
		}
	}
	status := func(id string) models.Task {
		t.Helper()
		dt, err := c.GetTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return dt.Task
	}
	waitUntil("the agent to start", func() bool { return status(id).Status == models.StatusInProgress })
	as, err := c.ListAgents(ctx)
	if err != nil || len(as) != 1 || as[0].PID == nil {
		t.Fatalf("agents: %+v %v", as, err)
	}
	pid := *as[0].PID
	if !agent.Alive(pid) {
		t.Fatalf("the agent process %d is not running", pid)
	}

	out := mustCtl(t, d.m.Addr(), "task", "cancel", id, "--reason", "enough", "--actor", "ann")
	if !strings.HasPrefix(out, id+": IN_PROGRESS -> BLOCKED\n") {
		t.Fatalf("task cancel output %q", out)
	}
	waitUntil("the agent process to end", func() bool { return !agent.Alive(pid) })
	if tk := status(id); tk.Status != models.StatusBlocked || tk.StatusReason != "cancelled by ann: enough" {
		t.Fatalf("cancelled task: %s %q", tk.Status, tk.StatusReason)
	}
	if tk := status(hard); tk.Status != models.StatusBlocked || tk.CascadeRootID != id {
		t.Fatalf("hard dependent: %s root %q", tk.Status, tk.CascadeRootID)
	}
	if st := status(soft).Status; st == models.StatusBlocked || st == models.StatusDefined {
		t.Fatalf("soft dependent is %s, want it on its way", st)
	}
}
