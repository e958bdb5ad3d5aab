package landing_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/landing"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// host is a Host without runs: nothing runs, nothing rests, and the
// reviews landing asks for are only recorded.
type host struct {
	mu      sync.Mutex
	wakes   int
	reviews []string
}

func (h *host) Wake() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wakes++
}

func (h *host) RunningFor(string) bool { return false }
func (h *host) Reviewing(string) bool  { return false }
func (h *host) Resting(string) bool    { return false }

func (h *host) StartReview(_ context.Context, ag models.Agent, _ models.Project, t models.Task, _ models.Verification) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reviews = append(h.reviews, t.ID+" by "+ag.ID)
}

// env is a Lander on a real store and real workspaces, for a project
// without a repository (nothing to merge).
type env struct {
	t    *testing.T
	st   *store.Store
	host *host
	l    *landing.Lander
	dir  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t)
}

// newEnvWith is newEnv with the store opened with opts.
func newEnvWith(t *testing.T, opts ...storetest.Option) *env {
	t.Helper()
	st := storetest.Open(t, opts...)
	ws, err := repo.New(repo.Config{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := st.CreateProject(ctx, models.Project{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"worker", "qa"} {
		if _, err := st.RegisterAgent(ctx, models.Agent{ID: id, AgentType: "command",
			AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
			t.Fatal(err)
		}
	}
	h := &host{}
	// A check never times out here: the clock follows the real time, and
	// its timers fire only when a test advances it.
	l := landing.New(landing.Config{RunDir: t.TempDir(), Environ: os.Environ(), QAAgent: "qa",
		Clock: clocktest.NewFollowing()}, st, ws, h)
	t.Cleanup(func() { l.Shutdown(); l.Wait() })
	return &env{t: t, st: st, host: h, l: l, dir: t.TempDir()}
}

// verifying creates a task and takes it through a run of worker to
// VERIFYING, as a completed run leaves it.
func (e *env) verifying(bt models.BatchTask) string {
	e.t.Helper()
	return e.verifyingWith(bt, nil)
}

// verifyingWith is verifying, with work done on the new task (its branch
// committed) before its run: work, when not nil, is called with it.
func (e *env) verifyingWith(bt models.BatchTask, work func(models.Task)) string {
	e.t.Helper()
	ctx := context.Background()
	bt.LocalID = "t"
	res, err := e.st.CreateTasks(ctx, models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{bt}})
	if err != nil {
		e.t.Fatal(err)
	}
	id := res[0].TaskID
	if work != nil {
		work(e.task(id))
	}
	run, _, err := e.st.ClaimTask(ctx, id, "worker")
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.st.StartRun(ctx, run.ID, os.Getpid(), e.dir); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted,
		ExpectFrom: models.StatusInProgress, Outcome: models.RunOutcomeCompleted,
		Verification: &models.Verification{TaskID: id, Attempt: run.Attempt, Phase: models.PhaseChecks, Source: e.dir}}); err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) task(id string) models.Task {
	e.t.Helper()
	tk, err := e.st.GetTask(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return tk
}

// TestVerifyRunsTheChecks: a Lander on its own verifies an AUTO_TEST
// task: its test commands run in its checkout, and it completes (the
// delivery notes there is no repository to merge into) or fails with the
// reason the orchestrator's verification always gave.
func TestVerifyRunsTheChecks(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		cmds   []string
		status models.TaskStatus
		reason string
	}{
		{"no commands", nil, models.StatusCompleted, "no test commands; no repository"},
		{"passing", []string{"test -d .", "exit 0"}, models.StatusCompleted, "2 test command(s) passed; no repository"},
		{"failing", []string{"exit 0", "echo broken; exit 3"}, models.StatusFailed,
			"checks: test command \"echo broken; exit 3\" failed (exit status 3); its output ends:\nbroken"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			id := e.verifying(models.BatchTask{Title: "T", TestCommands: c.cmds})
			e.l.Verify(id)
			if tk := e.task(id); tk.Status != c.status || tk.StatusReason != c.reason {
				t.Fatalf("after the verification: %s %q, want %s %q", tk.Status, tk.StatusReason, c.status, c.reason)
			}
		})
	}
}

// TestVerifyInheritsTheProjectsTestCommands: a task with no test
// commands of its own is verified by its project's (settings.
// test_commands), which pass or fail it like its own; a task's own
// commands replace the project's.
func TestVerifyInheritsTheProjectsTestCommands(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name            string
		project, ownCmd []string
		status          models.TaskStatus
		reason          string
	}{
		{"the project's pass", []string{"test -d .", "exit 0"}, nil, models.StatusCompleted,
			"2 test command(s) passed; no repository"},
		{"the project's fail", []string{"echo project check; exit 4"}, nil, models.StatusFailed,
			"checks: test command \"echo project check; exit 4\" failed (exit status 4); its output ends:\nproject check"},
		{"its own replace them", []string{"exit 1"}, []string{"exit 0"}, models.StatusCompleted,
			"1 test command(s) passed; no repository"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			settings := models.ProjectSettings{TestCommands: c.project}
			if _, err := e.st.UpdateProject(context.Background(), "p", models.ProjectPatch{Settings: &settings}); err != nil {
				t.Fatal(err)
			}
			id := e.verifying(models.BatchTask{Title: "T", TestCommands: c.ownCmd})
			e.l.Verify(id)
			if tk := e.task(id); tk.Status != c.status || tk.StatusReason != c.reason {
				t.Fatalf("after the verification: %s %q, want %s %q", tk.Status, tk.StatusReason, c.status, c.reason)
			}
		})
	}
}

// TestVerifyWaitsForAPersonThenApproves: a HUMAN task waits in the human
// phase; a person's approval lands it (HUMAN_APPROVED), and a second
// decision is refused.
func TestVerifyWaitsForAPersonThenApproves(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id := e.verifying(models.BatchTask{Title: "T", VerificationType: models.VerifyHuman})
	e.l.Verify(id)
	v, ok, err := e.st.GetVerification(ctx, id)
	if err != nil || !ok || v.Phase != models.PhaseHuman || e.task(id).Status != models.StatusVerifying {
		t.Fatalf("waiting for a person: %+v %v %v, task %s", v, ok, err, e.task(id).Status)
	}
	res, err := e.l.Approve(ctx, id, "ana", "fine")
	if err != nil || res.To != models.StatusCompleted || res.Task.StatusReason != "approved by ana: fine; no repository" {
		t.Fatalf("approve: %+v %v", res, err)
	}
	if _, err := e.l.Reject(ctx, id, "bo", "no"); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("a rejection after the approval: %v, want a conflict", err)
	}
}

// TestDispatchReviewsAsksTheHost: a QA_AGENT task waits in the review
// phase; a round asks the host to start the review by the configured
// reviewer, which is idle.
func TestDispatchReviewsAsksTheHost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id := e.verifying(models.BatchTask{Title: "T", VerificationType: models.VerifyQAAgent})
	e.l.Verify(id)
	if v, _, err := e.st.GetVerification(ctx, id); err != nil || v.Phase != models.PhaseReview {
		t.Fatalf("verification %+v %v, want the review phase", v, err)
	}
	if err := e.l.DispatchReviews(ctx); err != nil {
		t.Fatal(err)
	}
	e.host.mu.Lock()
	defer e.host.mu.Unlock()
	if want := id + " by qa"; strings.Join(e.host.reviews, ",") != want || e.host.wakes == 0 {
		t.Fatalf("reviews asked for %q (wakes %d), want %q", e.host.reviews, e.host.wakes, want)
	}
}
