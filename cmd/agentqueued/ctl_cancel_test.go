package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

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
