package store_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// edgeTo returns the edge from downstream to upstream as GetTaskDetail shows it.
func edgeTo(t *testing.T, s *store.Store, downstream, upstream string) models.Dependency {
	t.Helper()
	d, err := s.GetTaskDetail(context.Background(), downstream)
	if err != nil {
		t.Fatalf("detail of %s: %v", downstream, err)
	}
	for _, e := range d.Dependencies {
		if e.Upstream == upstream {
			return e
		}
	}
	t.Fatalf("task %s has no edge to %s: %+v", downstream, upstream, d.Dependencies)
	return models.Dependency{}
}

// wantEdge checks an edge's resolution, outcome and attempt (0: none).
func wantEdge(t *testing.T, e models.Dependency, res models.EdgeResolution, outcome models.EdgeOutcome, attempt int) {
	t.Helper()
	got := 0
	if e.UpstreamAttempt != nil {
		got = *e.UpstreamAttempt
	}
	if e.Resolution != res || e.UpstreamOutcome != outcome || got != attempt {
		t.Errorf("edge %s -> %s = %s/%q/attempt %d, want %s/%q/attempt %d", e.Downstream, e.Upstream,
			e.Resolution, e.UpstreamOutcome, got, res, outcome, attempt)
	}
}

// TestCancelFromEveryUnfinishedStatus cancels a task in each unfinished
// status: it ends BLOCKED with the reason naming who cancelled it and why,
// a dependent requiring success is blocked by the cascade naming the cancel
// as the root cause, a soft dependent proceeds, the edges record CANCELLED
// and the attempt, an open question is closed, and a second cancel answers
// the same result.
func TestCancelFromEveryUnfinishedStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type setup func(t *testing.T, s *store.Store, id, gate string) (runID int64)
	claim := func(t *testing.T, s *store.Store, id string) int64 {
		t.Helper()
		run, _, err := s.ClaimTask(ctx, id, "a1")
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		return run.ID
	}
	started := func(t *testing.T, s *store.Store, id string) int64 {
		t.Helper()
		runID := claim(t, s, id)
		if _, err := s.StartRun(ctx, runID, 4242, "/work/a1/p"); err != nil {
			t.Fatalf("start: %v", err)
		}
		return runID
	}
	for _, tc := range []struct {
		status  models.TaskStatus
		setup   setup
		attempt int
	}{
		{models.StatusDefined, func(t *testing.T, s *store.Store, id, gate string) int64 { return 0 }, 0},
		{models.StatusReady, func(t *testing.T, s *store.Store, id, gate string) int64 {
			storetest.Apply(t, s, id, models.EventAdminRestart)
			return 0
		}, 0},
		{models.StatusAssigned, func(t *testing.T, s *store.Store, id, gate string) int64 {
			storetest.Apply(t, s, id, models.EventAdminRestart)
			return claim(t, s, id)
		}, 1},
		{models.StatusInProgress, func(t *testing.T, s *store.Store, id, gate string) int64 {
			storetest.Apply(t, s, id, models.EventAdminRestart)
			return started(t, s, id)
		}, 1},
		{models.StatusWaitingInput, func(t *testing.T, s *store.Store, id, gate string) int64 {
			storetest.Apply(t, s, id, models.EventAdminRestart)
			runID := started(t, s, id)
			if _, err := s.AskQuestion(ctx, runID, "which branch?"); err != nil {
				t.Fatalf("ask: %v", err)
			}
			return runID
		}, 1},
		{models.StatusPaused, func(t *testing.T, s *store.Store, id, gate string) int64 {
			storetest.Apply(t, s, id, models.EventAdminRestart)
			started(t, s, id)
			storetest.Apply(t, s, id, models.EventTokensExhausted)
			return 0
		}, 1},
		{models.StatusVerifying, func(t *testing.T, s *store.Store, id, gate string) int64 {
			storetest.Apply(t, s, id, models.EventAdminRestart)
			started(t, s, id)
			storetest.Apply(t, s, id, models.EventAgentCompleted)
			return 0
		}, 1},
		{models.StatusAwaitingApproval, func(t *testing.T, s *store.Store, id, gate string) int64 {
			storetest.Apply(t, s, id, models.EventAdminRestart)
			started(t, s, id)
			storetest.Apply(t, s, id, models.EventAgentCompleted, models.EventPRCreated)
			return 0
		}, 1},
		{models.StatusFailed, func(t *testing.T, s *store.Store, id, gate string) int64 {
			storetest.Apply(t, s, id, models.EventAdminRestart)
			started(t, s, id)
			storetest.Apply(t, s, id, models.EventAgentFailed)
			return 0
		}, 1},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			t.Parallel()
			s := storetest.Open(t)
			storetest.Project(t, s, "p")
			storetest.Agent(t, s, "a1")
			ids := storetest.Tasks(t, s, "p",
				models.BatchTask{LocalID: "gate", Title: "gate"},
				models.BatchTask{LocalID: "task", Title: "task", Dependencies: storetest.Deps("gate")},
				models.BatchTask{LocalID: "hard", Title: "hard", Dependencies: storetest.Deps("task")},
				models.BatchTask{LocalID: "leaf", Title: "leaf", Dependencies: storetest.Deps("hard")},
				models.BatchTask{LocalID: "soft", Title: "soft", Dependencies: []models.BatchDependency{{ID: "task", RequiresSuccess: f()}}},
			)
			id := ids["task"]
			runID := tc.setup(t, s, id, ids["gate"])
			if got := storetest.Status(t, s, id); got != tc.status {
				t.Fatalf("set-up left the task %s, want %s", got, tc.status)
			}
			req := models.TransitionRequest{TaskID: id, Event: models.EventAdminCancel, Actor: "alice", Reason: "not needed"}
			res, err := s.ApplyEvent(ctx, req)
			if err != nil {
				t.Fatalf("cancel: %v", err)
			}
			if res.From != tc.status || res.To != models.StatusBlocked || res.Duplicate {
				t.Fatalf("cancel result %+v", res)
			}
			task, _ := s.GetTask(ctx, id)
			if task.StatusReason != "cancelled by alice: not needed" || task.CascadeRootID != "" {
				t.Errorf("cancelled task reason %q root %q", task.StatusReason, task.CascadeRootID)
			}
			storetest.WantStatuses(t, s, map[string]models.TaskStatus{ids["hard"]: models.StatusBlocked,
				ids["leaf"]: models.StatusBlocked, ids["soft"]: models.StatusReady, ids["gate"]: models.StatusReady})
			for _, dep := range []string{"hard", "leaf"} {
				d, _ := s.GetTask(ctx, ids[dep])
				if d.CascadeRootID != id || !strings.Contains(d.StatusReason, "cancelled by alice: not needed") {
					t.Errorf("dependent %s: root %q reason %q, want the cancel named", dep, d.CascadeRootID, d.StatusReason)
				}
			}
			wantEdge(t, edgeTo(t, s, ids["hard"], id), models.EdgeBroken, models.OutcomeCancelled, tc.attempt)
			wantEdge(t, edgeTo(t, s, ids["soft"], id), models.EdgeSatisfied, models.OutcomeCancelled, tc.attempt)
			wantEdge(t, edgeTo(t, s, ids["leaf"], ids["hard"]), models.EdgeBroken, models.OutcomeFailed, 0)

			if runID != 0 && tc.status == models.StatusWaitingInput {
				qs, err := s.TaskQuestions(ctx, id)
				if err != nil || len(qs) != 1 || qs[0].ClosedAt == nil || qs[0].Answer != nil {
					t.Fatalf("questions %+v %v, want one closed", qs, err)
				}
				open, _ := s.OpenQuestions(ctx)
				if len(open) != 0 {
					t.Errorf("open questions after the cancel: %+v", open)
				}
				if _, err := s.AnswerQuestion(ctx, qs[0].ID, "main", "bob"); models.ErrorCodeOf(err) != models.CodeConflict ||
					!strings.Contains(err.Error(), "was cancelled") {
					t.Errorf("answering a cancelled task's question: %v", err)
				}
			}

			again, err := s.ApplyEvent(ctx, req)
			if err != nil || !again.Duplicate || again.To != models.StatusBlocked || again.Task.StatusReason != task.StatusReason {
				t.Fatalf("second cancel: %+v %v", again, err)
			}
		})
	}
}

// TestCancelRefusesFinishedTasks checks the conflicts of a cancel of a
// COMPLETED or already BLOCKED task, and that nothing changes.
func TestCancelRefusesFinishedTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "done", Title: "done"}, models.BatchTask{LocalID: "stopped", Title: "stopped"})
	storetest.Apply(t, s, ids["done"], storetest.ToCompleted...)
	storetest.Apply(t, s, ids["stopped"], storetest.ToBlocked...)
	for _, tc := range []struct {
		id, want string
		status   models.TaskStatus
	}{
		{ids["done"], "is COMPLETED: a completed task cannot be cancelled", models.StatusCompleted},
		{ids["stopped"], "is already BLOCKED", models.StatusBlocked},
	} {
		_, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: tc.id, Event: models.EventAdminCancel, Actor: "alice"})
		if models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("cancel of %s: %v, want a conflict saying %q", tc.status, err, tc.want)
		}
		if got := storetest.Status(t, s, tc.id); got != tc.status {
			t.Errorf("refused cancel changed the task to %s", got)
		}
	}
}

// TestEdgeFactsRecordHowUpstreamEnded checks the outcome and attempt each
// way of finishing writes on an upstream's edges, on edges added to a
// finished upstream, and that a new run of the upstream withdraws them.
func TestEdgeFactsRecordHowUpstreamEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1")
	ids := storetest.Tasks(t, s, "p",
		models.BatchTask{LocalID: "ok", Title: "ok"},
		models.BatchTask{LocalID: "skipped", Title: "skipped"},
		models.BatchTask{LocalID: "failed", Title: "failed"},
		models.BatchTask{LocalID: "cancelled", Title: "cancelled"},
		models.BatchTask{LocalID: "d", Title: "d", Dependencies: []models.BatchDependency{
			{ID: "ok"}, {ID: "skipped"}, {ID: "failed", RequiresSuccess: f()}, {ID: "cancelled", RequiresSuccess: f()}}},
	)
	run := func(id string, ev models.TaskEvent) {
		t.Helper()
		r, _, err := s.ClaimTask(ctx, id, "a1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.StartRun(ctx, r.ID, 1, "/w"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.FinishRun(ctx, models.RunEnd{RunID: r.ID, Event: ev, ExpectFrom: models.StatusInProgress}); err != nil {
			t.Fatal(err)
		}
	}
	// ok: fails once, succeeds on its second attempt.
	run(ids["ok"], models.EventAgentFailed)
	storetest.Apply(t, s, ids["ok"], models.EventRetry)
	run(ids["ok"], models.EventAgentCompleted)
	storetest.Apply(t, s, ids["ok"], models.EventVerifyPassed)
	// skipped: never ran.
	storetest.Apply(t, s, ids["skipped"], models.EventAssigned, models.EventAgentStarted, models.EventAdminStop, models.EventAdminSkip)
	// failed: timed out on its first attempt.
	run(ids["failed"], models.EventTimeout)
	storetest.Apply(t, s, ids["cancelled"], models.EventAdminCancel)

	d := ids["d"]
	wantEdge(t, edgeTo(t, s, d, ids["ok"]), models.EdgeSatisfied, models.OutcomeSuccess, 2)
	wantEdge(t, edgeTo(t, s, d, ids["skipped"]), models.EdgeSatisfied, models.OutcomeSkipped, 0)
	wantEdge(t, edgeTo(t, s, d, ids["failed"]), models.EdgeSatisfied, models.OutcomeFailed, 1)
	wantEdge(t, edgeTo(t, s, d, ids["cancelled"]), models.EdgeSatisfied, models.OutcomeCancelled, 0)
	if got := storetest.Status(t, s, d); got != models.StatusReady {
		t.Fatalf("dependent is %s, want READY", got)
	}

	// Edges added to finished upstreams are decided at once, the same way.
	late := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "late", Title: "late", Dependencies: []models.BatchDependency{
		{ID: ids["ok"]}, {ID: ids["skipped"]}, {ID: ids["cancelled"], RequiresSuccess: f()}}})["late"]
	wantEdge(t, edgeTo(t, s, late, ids["ok"]), models.EdgeSatisfied, models.OutcomeSuccess, 2)
	wantEdge(t, edgeTo(t, s, late, ids["skipped"]), models.EdgeSatisfied, models.OutcomeSkipped, 0)
	wantEdge(t, edgeTo(t, s, late, ids["cancelled"]), models.EdgeSatisfied, models.OutcomeCancelled, 0)
	broken := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "b", Title: "b", Dependencies: storetest.Deps(ids["failed"])})["b"]
	wantEdge(t, edgeTo(t, s, broken, ids["failed"]), models.EdgeBroken, models.OutcomeFailed, 1)

	// Restarting the cancelled upstream withdraws its decision toward the
	// dependent that has not started: the new run decides it.
	storetest.Apply(t, s, late, models.EventAdminCancel)
	storetest.Apply(t, s, ids["cancelled"], models.EventAdminRestart)
	wantEdge(t, edgeTo(t, s, late, ids["cancelled"]), models.EdgePending, "", 0)
}

// TestMigrationRecordsOutcomesOfDecidedEdges opens a database an older
// agentqueued left and checks that its decided edges got the outcome and
// attempt of their upstream, and its pending edges none.
func TestMigrationRecordsOutcomesOfDecidedEdges(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "old.db")
	if err := store.MigrateForTest(path, 15); err != nil {
		t.Fatal(err)
	}
	err := store.ExecAtForTest(path, `
		INSERT INTO projects (id, name, credit_weight, max_concurrent_agents, status, created_at, updated_at)
			VALUES ('p', 'p', 1, 1, 'ACTIVE', 0, 0);
		INSERT INTO agents (id, name, agent_type, state, created_at) VALUES ('a', 'a', 'command', 'IDLE', 0);
		INSERT INTO tasks (id, project_id, title, status, verification_type, created_at, updated_at) VALUES
			('u-ok', 'p', 'ok', 'COMPLETED', 'AUTO_TEST', 0, 0),
			('u-skip', 'p', 'skip', 'COMPLETED', 'AUTO_TEST', 0, 0),
			('u-fail', 'p', 'fail', 'BLOCKED', 'AUTO_TEST', 0, 0),
			('u-run', 'p', 'run', 'BLOCKED', 'AUTO_TEST', 0, 0),
			('u-late', 'p', 'late', 'COMPLETED', 'AUTO_TEST', 0, 0),
			('u-ready', 'p', 'ready', 'READY', 'AUTO_TEST', 0, 0),
			('d', 'p', 'd', 'DEFINED', 'AUTO_TEST', 0, 0);
		INSERT INTO task_runs (task_id, agent_id, project_id, attempt, token_hash, started_at, last_activity_at, ended_at) VALUES
			('u-ok', 'a', 'p', 1, 'h1', 10, 10, 20),
			('u-fail', 'a', 'p', 1, 'h2', 10, 10, 20),
			('u-fail', 'a', 'p', 2, 'h3', 30, 30, 40),
			('u-fail', 'a', 'p', 3, 'h4', 90, 90, 95);
		INSERT INTO task_events (id, task_id, from_status, to_status, event, created_at) VALUES
			(1, 'u-ok', 'VERIFYING', 'COMPLETED', 'VERIFY_PASSED', 25),
			(2, 'u-skip', 'BLOCKED', 'COMPLETED', 'ADMIN_SKIP', 25),
			(3, 'u-fail', 'FAILED', 'BLOCKED', 'MAX_RETRIES', 50),
			(4, 'u-run', 'READY', 'BLOCKED', 'RUN_STOPPED', 50),
			(5, 'u-late', 'VERIFYING', 'COMPLETED', 'VERIFY_PASSED', 50);
		INSERT INTO task_dependencies (downstream, upstream, requires_success, resolution, resolved_at, resolving_event_id) VALUES
			('d', 'u-ok', 1, 'SATISFIED', 25, 1),
			('d', 'u-skip', 1, 'SATISFIED', 25, 2),
			('d', 'u-fail', 1, 'BROKEN', 50, 3),
			('d', 'u-run', 0, 'SATISFIED', 50, 4),
			('d', 'u-late', 1, 'SATISFIED', 60, NULL),
			('d', 'u-ready', 1, 'PENDING', NULL, NULL);`)
	if err != nil {
		t.Fatal(err)
	}
	s := storetest.OpenAt(t, path)
	for _, tc := range []struct {
		up      string
		res     models.EdgeResolution
		outcome models.EdgeOutcome
		attempt int
	}{
		{"u-ok", models.EdgeSatisfied, models.OutcomeSuccess, 1},
		{"u-skip", models.EdgeSatisfied, models.OutcomeSkipped, 0},
		{"u-fail", models.EdgeBroken, models.OutcomeFailed, 2},
		{"u-run", models.EdgeSatisfied, models.OutcomeCancelled, 0},
		{"u-late", models.EdgeSatisfied, models.OutcomeSuccess, 0},
		{"u-ready", models.EdgePending, "", 0},
	} {
		wantEdge(t, edgeTo(t, s, "d", tc.up), tc.res, tc.outcome, tc.attempt)
	}
}

// TestRestartUndoesACancel restarts a cancelled task: it is READY again
// and the dependents its cancel blocked are reopened and wait for it.
func TestRestartUndoesACancel(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	ids := storetest.Tasks(t, s, "p",
		models.BatchTask{LocalID: "a", Title: "a"},
		models.BatchTask{LocalID: "b", Title: "b", Dependencies: storetest.Deps("a")},
		models.BatchTask{LocalID: "c", Title: "c", Dependencies: storetest.Deps("b")})
	storetest.Apply(t, s, ids["a"], models.EventAdminCancel)
	storetest.WantStatuses(t, s, map[string]models.TaskStatus{ids["b"]: models.StatusBlocked, ids["c"]: models.StatusBlocked})
	res := storetest.Apply(t, s, ids["a"], models.EventAdminRestart)
	if res.To != models.StatusReady || len(res.Reopened) != 2 {
		t.Fatalf("restart of a cancelled task: %+v", res)
	}
	storetest.WantStatuses(t, s, map[string]models.TaskStatus{ids["b"]: models.StatusDefined, ids["c"]: models.StatusDefined})
	wantEdge(t, edgeTo(t, s, ids["b"], ids["a"]), models.EdgePending, "", 0)
}
