package orchestrator

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// TestCancelEndsTheRunAndSettlesDependents cancels a running task: its
// agent process ends, the task stays BLOCKED with no retry, the dependent
// that requires its success is blocked naming the cancel, and the soft
// dependent runs to completion.
func TestCancelEndsTheRunAndSettlesDependents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, nil)
	fifo := h.heldAgent("a1")
	ids := h.tasks(models.BatchTask{LocalID: "t", Title: "t"},
		models.BatchTask{LocalID: "hard", Title: "hard", Dependencies: []models.BatchDependency{{ID: "t"}}},
		models.BatchTask{LocalID: "soft", Title: "soft", Dependencies: []models.BatchDependency{{ID: "t", RequiresSuccess: new(bool)}}})
	run := h.running()
	if run.TaskID != ids["t"] {
		t.Fatalf("first run is of %s", run.TaskID)
	}
	open, _ := h.st.OpenRuns(ctx)
	if len(open) != 1 || open[0].PID == nil {
		t.Fatalf("open runs %+v", open)
	}
	pid := *open[0].PID

	res, err := h.o.ApplyAdminEvent(ctx, models.TransitionRequest{TaskID: ids["t"], Event: models.EventAdminCancel,
		Actor: "alice", Reason: "wrong idea"})
	if err != nil || res.From != models.StatusInProgress || res.To != models.StatusBlocked {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	if !slices.Equal(res.Blocked, []string{ids["hard"]}) || !slices.Equal(res.Promoted, []string{ids["soft"]}) {
		t.Fatalf("cancel blocked %v and promoted %v", res.Blocked, res.Promoted)
	}
	if ended := h.waitEnd(); ended.ID != run.ID {
		t.Fatalf("run %d ended, want %d", ended.ID, run.ID)
	}
	if agent.Alive(pid) {
		t.Fatalf("process %d survived the cancel", pid)
	}
	// The agent is free again and takes the soft dependent.
	if next := h.waitStart(); next.TaskID != ids["soft"] {
		t.Fatalf("next run is of %s, want the soft dependent", next.TaskID)
	}
	release(t, fifo, "0")
	h.waitEnd()
	// Long past any retry backoff, nothing runs the cancelled task again.
	h.clock.Advance(time.Hour)
	h.noRunStarts()

	tk := h.task(ids["t"])
	if tk.Status != models.StatusBlocked || tk.StatusReason != "cancelled by alice: wrong idea" {
		t.Fatalf("cancelled task: %s %q", tk.Status, tk.StatusReason)
	}
	if ev := h.events(ids["t"]); ev[len(ev)-1] != string(models.EventAdminCancel) {
		t.Fatalf("events after the cancel: %v", ev)
	}
	hard := h.task(ids["hard"])
	if hard.Status != models.StatusBlocked || hard.CascadeRootID != ids["t"] || !strings.Contains(hard.StatusReason, "cancelled by alice") {
		t.Fatalf("hard dependent: %s root %q %q", hard.Status, hard.CascadeRootID, hard.StatusReason)
	}
	if got := h.task(ids["soft"]).Status; got != models.StatusCompleted {
		t.Fatalf("soft dependent is %s, want COMPLETED", got)
	}
	if a, _ := h.st.GetAgent(ctx, "a1"); a.State != models.AgentIdle {
		t.Fatalf("agent %s", a.State)
	}
}

// TestCancelWhileWaitingForAnAnswer cancels a task whose agent waits for a
// person: the waiting ask ends, the process ends and the question closes.
func TestCancelWhileWaitingForAnAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, func(c *Config) { c.InputTimeout = 10 * time.Hour })
	h.heldAgent("a1")
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	run := h.running()
	errc, q := h.askAsync(run, "which branch?")
	if st := h.task(id).Status; st != models.StatusWaitingInput {
		t.Fatalf("status %s", st)
	}
	res, err := h.o.ApplyAdminEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventAdminCancel, Actor: "bob"})
	if err != nil || res.From != models.StatusWaitingInput || res.To != models.StatusBlocked {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	h.waitEnd()
	if err := <-errc; models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("the waiting ask returned %v", err)
	}
	if open, _ := h.o.OpenQuestions(ctx); len(open) != 0 {
		t.Fatalf("open questions after the cancel: %+v", open)
	}
	if _, err := h.o.AnswerQuestion(ctx, q.ID, "main", "carol"); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("an answer after the cancel: %v", err)
	}
	h.clock.Advance(11 * time.Hour)
	h.noRunStarts()
	if tk := h.task(id); tk.Status != models.StatusBlocked || tk.StatusReason != "cancelled by bob" {
		t.Fatalf("cancelled task: %s %q", tk.Status, tk.StatusReason)
	}
}

// TestE2ECancelDuringChecksEndsThem cancels a task whose test commands are
// running: the checks end, nothing is merged and the task stays BLOCKED.
func TestE2ECancelDuringChecksEndsThem(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	origin := bareOrigin(t)
	e.project("web", cloneRepo(origin), models.ProjectSettings{})
	e.cli("claude-1", "claude", "web")
	fifo, slow := checkGate(t)
	pidFile := filepath.Join(t.TempDir(), "check.pid")
	id := e.add("web", models.BatchTask{LocalID: "t", Title: "Cancelled in checks",
		TestCommands: []string{"echo $$ > " + pidFile + "; " + slow},
		Description:  fmt.Sprintf(work, "a.txt", "a", "a", "a")})["t"]
	e.start()
	if _, err := os.ReadFile(fifo); err != nil { // the check is running
		t.Fatal(err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.o.ApplyAdminEvent(context.Background(), models.TransitionRequest{TaskID: id, Event: models.EventAdminCancel,
		Actor: "ana"})
	if err != nil || res.From != models.StatusVerifying || res.To != models.StatusBlocked {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	// Each round is a chance for the check to have ended; the bound (a
	// stall limit) only turns a broken test into a failure.
	for deadline := time.Now().Add(progresstest.Stall()); agent.Alive(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("the check (process %d) survived the cancel", pid)
		}
		e.settle()
	}
	e.stop()
	if tk := e.task(id); tk.Status != models.StatusBlocked || tk.StatusReason != "cancelled by ana" {
		t.Fatalf("after the cancel: %s %q", tk.Status, tk.StatusReason)
	}
	if ev := e.events(id); slices.Contains(ev, "VERIFY_FAILED") || slices.Contains(ev, "VERIFY_PASSED") {
		t.Fatalf("the cancelled checks decided the task: %v", ev)
	}
	if out, err := exec.Command("git", "--git-dir", origin, "cat-file", "-e", "main:a.txt").CombinedOutput(); err == nil {
		t.Fatalf("the cancelled task's work was merged: %s", out)
	}
}
