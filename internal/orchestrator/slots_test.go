package orchestrator

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// settleUntil runs rounds until cond holds: each round is progress, so
// the wait is bounded by the harness's stall limit, not a time budget.
func (h *harness) settleUntil(what string, cond func() bool) {
	h.t.Helper()
	for i := 0; !cond(); i++ {
		if i == 10_000 {
			h.t.Fatalf("%s: not after %d rounds", what, i)
		}
		h.settle()
	}
}

// seedDB opens the harness's database beside the store, for fixtures the
// state machine would take thousands of runs to build.
func (h *harness) seedDB() *sql.DB {
	h.t.Helper()
	db, err := sql.Open("sqlite3", "file:"+h.dbPath+"?_busy_timeout=10000")
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { db.Close() })
	return db
}

// TestTasksWaitingOnPeopleHoldNoSlot: with max_concurrent_agents 2, two
// tasks awaiting a person's approval or a pull request's review stopped
// the project while its agents sat idle. A task that waits for a person
// or a pull request holds no slot: a third task starts.
func TestTasksWaitingOnPeopleHoldNoSlot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// park moves a VERIFYING task (waiting for a person) on, if needed.
		park func(h *harness, id string)
		want models.TaskStatus
	}{
		{name: "awaiting a person's approval", want: models.StatusVerifying},
		{name: "awaiting a pull request review", want: models.StatusAwaitingApproval, park: func(h *harness, id string) {
			if _, err := h.st.ApplyEvent(context.Background(), models.TransitionRequest{TaskID: id, Event: models.EventPRCreated,
				ExpectFrom: models.StatusVerifying, Actor: "test", Reason: "pull request https://example.invalid/pr/1"}); err != nil {
				h.t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil)
			for _, a := range []string{"a1", "a2", "a3"} {
				h.agent(a, "command", "exit0", nil)
			}
			ids := h.tasks(models.BatchTask{LocalID: "h1", Title: "h1", VerificationType: models.VerifyHuman},
				models.BatchTask{LocalID: "h2", Title: "h2", VerificationType: models.VerifyHuman})
			h.start()
			h.waitEnd()
			h.waitEnd()
			human := func(id string) bool {
				v, ok, err := h.st.GetVerification(context.Background(), id)
				return err == nil && ok && v.Phase == models.PhaseHuman
			}
			h.settleUntil("both wait for a person", func() bool { return human(ids["h1"]) && human(ids["h2"]) })
			for _, id := range []string{ids["h1"], ids["h2"]} {
				if tc.park != nil {
					tc.park(h, id)
				}
				if got := h.task(id).Status; got != tc.want {
					t.Fatalf("task %s is %s, want %s", id, got, tc.want)
				}
			}
			third := h.tasks(models.BatchTask{LocalID: "t3", Title: "t3"})["t3"]
			h.settle()
			if got := h.task(third); got.Status == models.StatusReady {
				t.Fatalf("the third task waits READY (%s: %s) while two tasks wait for people", got.WaitingCode, got.WaitingReason)
			}
		})
	}
}

// TestBacklogDoesNotHideRunnableWork: a round read the best 200 READY tasks
// per project, future-dated and rule-capped ones included, so a backlog
// of those kept a task that could start waiting forever. With 10,000 tasks
// dated tomorrow and 10,000 of a kind at its rule's limit ahead of it, the
// task that can start starts in the next round, and the others carry
// their waiting reasons.
func TestBacklogDoesNotHideRunnableWork(t *testing.T) {
	t.Parallel()
	const n = 10_000
	rule := models.Rule{ID: "one-capped", Type: models.RuleConcurrency, MaxConcurrency: 1,
		Matcher: models.RuleMatcher{Kind: "capped", Status: "AWAITING_APPROVAL|Running"}}
	h := newHarness(t, func(c *Config) { c.Rules = []models.Rule{rule} })
	ctx := context.Background()
	h.agent("a1", "command", "exit0", nil)

	// One capped task awaits approval: its kind is at the rule's limit.
	held := h.tasks(models.BatchTask{LocalID: "held", Title: "held", Kind: "capped"})["held"]
	run, _, err := h.st.ClaimTask(ctx, held, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.StartRun(ctx, run.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted, Outcome: "completed"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.ApplyEvent(ctx, models.TransitionRequest{TaskID: held, Event: models.EventPRCreated,
		ExpectFrom: models.StatusVerifying, Actor: "test", Reason: "pull request"}); err != nil {
		t.Fatal(err)
	}

	tomorrow := h.clock.Now().Add(24 * time.Hour)
	first := 1
	var future, capped []models.BatchTask
	for i := range n {
		future = append(future, models.BatchTask{Title: fmt.Sprintf("later %d", i), Priority: &first, NotBefore: &tomorrow})
		capped = append(capped, models.BatchTask{Title: fmt.Sprintf("capped %d", i), Priority: &first, Kind: "capped"})
	}
	h.tasks(future...)
	h.tasks(capped...)
	last := 500
	runnable := h.tasks(models.BatchTask{LocalID: "go", Title: "can start", Priority: &last})["go"]

	h.start()
	h.settle()
	if got := h.task(runnable); got.Status == models.StatusReady {
		t.Fatalf("the task that can start waits READY (%s: %s)", got.WaitingCode, got.WaitingReason)
	}
	h.waitEnd()
	h.settle()
	codes := map[string]int{}
	rows, err := h.seedDB().Query("SELECT waiting_code, count(*) FROM tasks WHERE status = 'READY' GROUP BY waiting_code")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var code string
		var c int
		if err := rows.Scan(&code, &c); err != nil {
			t.Fatal(err)
		}
		codes[code] = c
	}
	if len(codes) != 2 || codes[models.WaitingNotBefore] != n || codes[models.WaitingRule] != n {
		t.Fatalf("READY tasks by waiting reason: %v; want %d not_before and %d rule_limit", codes, n, n)
	}
}

// TestTimersAreReadByDueTime: the timer sweep read at most 10,000 PAUSED
// and 10,000 FAILED tasks, so one due after them was never resumed or
// retried. Timers are read by due time, with no cap.
func TestTimersAreReadByDueTime(t *testing.T) {
	t.Parallel()
	const n = 10_001
	for _, tc := range []struct {
		name string
		// seed moves every task of the project into the status, none due,
		// then makes the one given due.
		seed  func(h *harness, db *sql.DB, due string)
		event models.TaskEvent
	}{
		{name: "paused", event: models.EventResumeTimer, seed: func(h *harness, db *sql.DB, due string) {
			later := h.clock.Now().Add(24 * time.Hour).UnixNano()
			h.exec(db, "UPDATE tasks SET status = 'PAUSED', resume_after = ? WHERE project_id = 'p'", later)
			h.exec(db, "UPDATE tasks SET resume_after = ? WHERE id = ?", h.clock.Now().UnixNano(), due)
		}},
		{name: "failed", event: models.EventRetry, seed: func(h *harness, db *sql.DB, due string) {
			h.exec(db, "UPDATE tasks SET status = 'FAILED', updated_at = ? WHERE project_id = 'p'", h.clock.Now().UnixNano())
			h.exec(db, "UPDATE tasks SET updated_at = ? WHERE id = ?", h.clock.Now().Add(-time.Hour).UnixNano(), due)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil) // no agent: a resumed task stays READY
			var batch []models.BatchTask
			for i := range n {
				batch = append(batch, models.BatchTask{LocalID: fmt.Sprintf("t%05d", i), Title: "t"})
			}
			ids := h.tasks(batch...)
			due := ids[fmt.Sprintf("t%05d", n-1)]
			tc.seed(h, h.seedDB(), due)
			h.start()
			h.settle()
			events := h.events(due)
			if got := events[len(events)-1]; got != string(tc.event) {
				t.Fatalf("the due task's last event is %s, want %s", got, tc.event)
			}
			if got := h.task(ids["t00000"]).Status; got == models.StatusReady {
				t.Fatalf("a task not due was moved to %s", got)
			}
		})
	}
}

func (h *harness) exec(db *sql.DB, q string, args ...any) {
	h.t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		h.t.Fatal(err)
	}
}

// TestWaitingReasons: a READY task the round does not start says why it
// waits, and the reason is cleared when it starts.
func TestWaitingReasons(t *testing.T) {
	t.Parallel()
	patch := func(pp models.ProjectPatch) func(h *harness) {
		return func(h *harness) {
			h.agent("a1", "command", "exit0", nil)
			if _, err := h.st.UpdateProject(context.Background(), "p", pp); err != nil {
				h.t.Fatal(err)
			}
		}
	}
	paused, one, none := models.ProjectPaused, 1, int64(0)
	for _, tc := range []struct {
		name string
		// setup prepares the harness; busy tasks are created and started
		// before the task that waits.
		setup      func(h *harness)
		busy       int
		code, text string
	}{
		{name: "no agent for the project", setup: func(h *harness) {
			h.agent("elsewhere", "command", "exit0", func(a *models.Agent) { a.Projects = []string{"other"} })
		}, code: models.WaitingNoAgent, text: "no agent works on project p"},
		{name: "every agent paused", setup: func(h *harness) {
			h.agent("a1", "command", "exit0", nil)
			if _, err := h.st.SetAgentPaused(context.Background(), "a1", true); err != nil {
				h.t.Fatal(err)
			}
		}, code: models.WaitingNoAgent, text: "every agent of project p is paused or in error"},
		{name: "project paused", setup: patch(models.ProjectPatch{Status: &paused}),
			code: models.WaitingProjectPaused, text: "project p is paused"},
		{name: "budget exhausted", setup: patch(models.ProjectPatch{BudgetLimit: &none}),
			code: models.WaitingBudget, text: "project p has used its token budget (0 of 0 tokens) until its budget_limit is raised"},
		{name: "global budget exhausted", setup: func(h *harness) {
			h.agent("a1", "command", "exit0", nil)
			budget := int64(50)
			h.o.cfg.GlobalBudget = &budget
			// 40 tokens an hour ago and 30 now: the budget frees when the
			// older 40 leave the day's window.
			for _, u := range []models.TokenUsage{
				{ProjectID: "p", Input: 40, CreatedAt: h.clock.Now().Add(-time.Hour)},
				{ProjectID: "p", Input: 30, CreatedAt: h.clock.Now()},
			} {
				if err := h.st.RecordTokenUsage(context.Background(), u); err != nil {
					h.t.Fatal(err)
				}
			}
		}, code: models.WaitingBudget, text: "the global token budget is exhausted (70 of 50 tokens in the window) until 2026-03-02T11:00:00Z"},
		{name: "all slots busy", busy: 1, setup: func(h *harness) {
			h.agent("a1", "command", "quiet", nil)
			h.agent("a2", "command", "quiet", nil)
			if _, err := h.st.UpdateProject(context.Background(), "p", models.ProjectPatch{MaxConcurrentAgents: &one}); err != nil {
				h.t.Fatal(err)
			}
		}, code: models.WaitingSlots, text: "all 1 slots of project p are busy"},
		{name: "all agents busy", busy: 1, setup: func(h *harness) { h.agent("a1", "command", "quiet", nil) },
			code: models.WaitingAgentsBusy, text: "all 1 agents of project p are busy"},
		{name: "agent resting", busy: 1, setup: func(h *harness) { h.agent("a1", "claude", "ratelimit", nil) },
			code: models.WaitingAgentResting, text: "rests until 2026-03-01T13:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil)
			tc.setup(h)
			h.start()
			for i := range tc.busy {
				h.tasks(models.BatchTask{LocalID: "busy", Title: fmt.Sprintf("busy %d", i)})
				h.waitStart()
			}
			if tc.code == models.WaitingAgentResting {
				h.waitEnd()
			}
			id := h.tasks(models.BatchTask{LocalID: "w", Title: "waits"})["w"]
			h.settle()
			got := h.task(id)
			if got.Status != models.StatusReady || got.WaitingCode != tc.code || !strings.Contains(got.WaitingReason, tc.text) {
				t.Fatalf("%s, waiting %q %q; want READY, %q with %q", got.Status, got.WaitingCode, got.WaitingReason, tc.code, tc.text)
			}
			if tc.code != models.WaitingNoAgent {
				return
			}
			h.agent("late", "command", "exit0", nil)
			h.settle()
			if got := h.task(id); got.Status == models.StatusReady || got.WaitingCode != "" || got.WaitingReason != "" {
				t.Fatalf("after an agent came: %s, waiting %q %q; want started, no reason", got.Status, got.WaitingCode, got.WaitingReason)
			}
		})
	}
}
