package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// contextAgent prints its run context (the AQ_ variables of a workflow
// run) to its log, reports three packages from the discovery and
// completes every other task.
const contextAgent = `#!/bin/sh
set -eu
title=$(head -n 1 | sed 's/^# Task [a-z0-9-]*: //')
cat > /dev/null
env | grep -E '^AQ_(RUN_ID|WORKFLOW|STEP|PARALLEL_INDEX|PARALLEL_COUNT|ITEM)=' | sort
case "$title" in
"List the packages")
  "$SWEEP_BIN" agent complete --summary "found 3" --outputs '{"packages":["api","db","web"]}' ;;
*)
  "$SWEEP_BIN" agent complete --summary "done: $title" ;;
esac
`

// contextWorkflow is written in the tasks shape.
const contextWorkflow = `
name: sweep
project: mono
tasks:
  discover:
    title: List the packages
  fix:
    title: "Fix the package {{item}}"
    depends_on: [discover]
    foreach: discover.packages
    timeout: 30m
`

// TestWorkflowRunContext runs a workflow of the tasks shape through the
// daemon: each fan-out task's agent has its run, workflow, step, index,
// count and item in its environment and in its prompt's "Run context"; the
// discovery, which does not fan out, has no index, count or item.
func TestWorkflowRunContext(t *testing.T) {
	t.Parallel()
	bin := agentqueuedBinary(t)
	dir := t.TempDir()
	script := writeFile(t, dir, "agent.sh", contextAgent)
	cfg := writeFile(t, dir, "config.yaml", `agents:
  - name: w1
    type: command
    command: /bin/sh
    args: ["`+script+`"]
    env: {SWEEP_BIN: "`+bin+`"}
`)
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
	if _, err := c.CreateProject(ctx, models.ProjectSpec{ID: "mono"}.Project()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.SaveWorkflow(ctx, []byte(contextWorkflow)); err != nil {
		t.Fatal(err)
	}
	run, err := c.StartRun(ctx, "sweep", "ann")
	if err != nil {
		t.Fatal(err)
	}
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
	common := []string{"AQ_RUN_ID=" + run.ID, "AQ_WORKFLOW=sweep"}
	tests := []struct {
		task        string
		env         []string
		notEnv      []string
		prompt      []string
		notPrompt   []string
		wantTimeout string
	}{
		{task: "discover", env: []string{"AQ_STEP=discover"}, notEnv: []string{"AQ_PARALLEL_INDEX", "AQ_PARALLEL_COUNT", "AQ_ITEM"},
			prompt:    []string{"## Run context", "This task is the step discover of the run " + run.ID + " of the workflow sweep.\n"},
			notPrompt: []string{"index", "Its item"}},
		{task: "fix[2]", env: []string{"AQ_STEP=fix", "AQ_PARALLEL_INDEX=2", "AQ_PARALLEL_COUNT=3", "AQ_ITEM=web"},
			prompt: []string{"## Run context", "This task is the step fix of the run " + run.ID +
				" of the workflow sweep, index 2 (from 0) of the step's 3 tasks.\nIts item: web\n",
				"AQ_PARALLEL_INDEX, AQ_PARALLEL_COUNT, AQ_ITEM"},
			wantTimeout: "30m0s"},
	}
	for _, tt := range tests {
		logs, err := c.RunTaskLogs(ctx, run.ID, tt.task, 0)
		if err != nil || len(logs.Attempts) != 1 {
			t.Fatalf("logs of %s: %+v %v", tt.task, logs, err)
		}
		log := logs.Attempts[0].Log
		for _, v := range append(common, tt.env...) {
			if !strings.Contains(log, v+"\n") {
				t.Errorf("%s: the agent's environment lacks %s:\n%s", tt.task, v, log)
			}
		}
		for _, v := range tt.notEnv {
			if strings.Contains(log, v+"=") {
				t.Errorf("%s: the agent's environment has %s:\n%s", tt.task, v, log)
			}
		}
		b, err := os.ReadFile(filepath.Join(dataDir, "runs", logs.TaskID, "1.prompt"))
		if err != nil {
			t.Fatal(err)
		}
		prompt := string(b)
		for _, s := range tt.prompt {
			if !strings.Contains(prompt, s) {
				t.Errorf("%s: the prompt lacks %q:\n%s", tt.task, s, prompt)
			}
		}
		for _, s := range tt.notPrompt {
			if strings.Contains(prompt, s) {
				t.Errorf("%s: the prompt has %q:\n%s", tt.task, s, prompt)
			}
		}
		det, err := c.GetTask(ctx, logs.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if got := det.Task.Timeout; (got == 0 && tt.wantTimeout != "") || (got != 0 && got.String() != tt.wantTimeout) {
			t.Errorf("%s: timeout %s, want %q (the step's)", tt.task, got, tt.wantTimeout)
		}
	}
}
