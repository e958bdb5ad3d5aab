package main

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// sweepAgent does what its prompt asks: the discovery reports the packages
// as outputs, every other task completes with a summary naming its title.
const sweepAgent = `#!/bin/sh
set -eu
title=$(head -n 1 | sed 's/^# Task [a-z0-9-]*: //')
cat > /dev/null
case "$title" in
"List the packages")
  "$SWEEP_BIN" agent complete --summary "found 5 packages" --outputs '{"packages":["api","db","ui","web","cli"]}' ;;
*)
  echo "working on: $title"
  "$SWEEP_BIN" agent complete --summary "done: $title" ;;
esac
`

const sweepWorkflow = `
name: sweep
project: mono
steps:
  - name: discover
    title: List the packages
    description: 'Report the packages as outputs {"packages": [...]}.'
  - name: fix
    title: "Fix the package {{item}}"
    depends_on: [discover]
    foreach: discover.outputs.packages
    concurrency: 2
  - name: summary
    title: Summarise the sweep
    description: "Summarise what the {{discover.outputs.packages}} fixes did."
    depends_on: [fix]
`

// TestWorkflowRunOverTheAPI runs a workflow through the whole daemon with
// command agents: it discovers five packages, fans out over them with at
// most two at once though three agents are idle, and fans in to a summary;
// the run ends in success, and each task's log is served.
func TestWorkflowRunOverTheAPI(t *testing.T) {
	t.Parallel()
	bin := agentqueuedBinary(t)
	dir := t.TempDir()
	script := writeFile(t, dir, "agent.sh", sweepAgent)
	var agents strings.Builder
	for _, name := range []string{"w1", "w2", "w3"} {
		agents.WriteString(`
  - name: ` + name + `
    type: command
    command: /bin/sh
    args: ["` + script + `"]
    env: {SWEEP_BIN: "` + bin + `"}`)
	}
	cfg := writeFile(t, dir, "config.yaml", "agents:"+agents.String()+"\n")
	dataDir := filepath.Join(dir, "data")
	changed := make(chan struct{}, 1)
	d, err := startMainWith(t, func(m *Main) {
		m.OnChange = func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}, "run", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := d.watch.Context()
	c, err := api.NewClient("http://"+d.m.Addr(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateProject(ctx, models.ProjectSpec{ID: "mono", MaxConcurrentAgents: 3}.Project()); err != nil {
		t.Fatal(err)
	}
	w, created, err := c.SaveWorkflow(ctx, []byte(sweepWorkflow))
	if err != nil || !created || len(w.Steps) != 3 {
		t.Fatalf("save workflow: %+v %v %v", w, created, err)
	}
	run, err := c.StartRun(ctx, "sweep", "ann")
	if err != nil {
		t.Fatal(err)
	}
	// Each committed change is a chance to look.
	for run.Status != models.RunSuccess {
		if run.Status == models.RunFailed || run.Status == models.RunCancelled {
			t.Fatalf("run %+v\n%s", run, d.logs)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("the run did not finish: %+v\n%s", run, d.logs)
		}
		if run, err = c.GetWorkflowRun(ctx, run.ID); err != nil {
			t.Fatal(err)
		}
	}
	tasks, err := c.RunTasks(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rt := range tasks {
		names = append(names, rt.Name+"="+string(rt.Status))
	}
	if got := strings.Join(names, " "); run.Tasks[models.StatusCompleted] != 7 || len(tasks) != 7 ||
		!strings.Contains(got, "fix[4]=COMPLETED") || !strings.Contains(got, "summary=COMPLETED") {
		t.Fatalf("run %+v, tasks %s", run, got)
	}
	logs, err := c.RunTaskLogs(ctx, run.ID, "fix[3]", 0)
	if err != nil || len(logs.Attempts) != 1 || !strings.Contains(logs.Attempts[0].Log, "working on: Fix the package web") {
		b, _ := os.ReadFile(filepath.Join(dataDir, "runs", logs.TaskID, "1.log"))
		p, _ := os.ReadFile(filepath.Join(dataDir, "runs", logs.TaskID, "1.prompt"))
		t.Fatalf("logs of fix[3]: %+v, %v\nfile: %q\nprompt: %q", logs, err, b, p)
	}
	if err := d.m.Close(); err != nil {
		t.Fatal(err)
	}

	// The step's cap held: replay the fix tasks' status changes in order.
	st := storetest.OpenAt(t, filepath.Join(dataDir, "agentqueued.db"))
	fixes := map[string]bool{}
	var summaryPrompt string
	for _, rt := range tasks {
		if rt.StepName == "fix" {
			fixes[rt.ID] = true
		}
		if rt.StepName == "summary" {
			summaryPrompt = rt.Description
		}
	}
	if summaryPrompt != `Summarise what the ["api","db","ui","web","cli"] fixes did.` {
		t.Fatalf("summary description %q", summaryPrompt)
	}
	var events []models.EventRecord
	for id := range fixes {
		det, err := st.GetTaskDetail(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, det.Events...)
	}
	// Event ids grow in commit order.
	sort.Slice(events, func(i, j int) bool { return events[i].ID < events[j].ID })
	running, most := 0, 0
	for _, ev := range events {
		if ev.To.Running() && !ev.From.Running() {
			running++
		}
		if !ev.To.Running() && ev.From.Running() {
			running--
		}
		most = max(most, running)
	}
	if most != 2 {
		t.Fatalf("at most %d fix tasks ran at once, want 2 (the cap, with 3 agents idle)", most)
	}
}
