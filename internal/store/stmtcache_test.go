package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// lifecycle takes one new task through a trivial life as the daemon does,
// with the reads it makes around it: a scheduling round (its state, READY
// page, own rules and timers), the claim, the run's start (task, project,
// context, session), its end with the result and the verification's start,
// the landing (VERIFY_PASSED), and the hooks' event read.
func lifecycle(t *testing.T, s *store.Store, n int) {
	t.Helper()
	ctx := context.Background()
	id := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "x", Title: fmt.Sprintf("task %d", n)})["x"]
	now := time.Now()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err := s.SchedulingState(ctx, now, 24*time.Hour)
	must("scheduling state", err)
	_, err = s.ReadyTasks(ctx, models.ReadyQuery{ProjectID: "p", Now: now, Limit: 10 + n})
	must("ready tasks", err)
	_, err = s.ReadyRuleSets(ctx, "p", 10+n)
	must("ready rule sets", err)
	_, _, err = s.DuePaused(ctx, now, time.Time{}, "", 100+n)
	must("due paused", err)
	_, _, err = s.DueFailed(ctx, now, time.Second, time.Minute, time.Time{}, "", 100+n)
	must("due failed", err)
	_, err = s.GetAgent(ctx, "a1")
	must("get agent", err)
	run, _, err := s.ClaimTask(ctx, id, "a1")
	must("claim", err)
	_, err = s.GetTask(ctx, id)
	must("get task", err)
	_, err = s.GetProject(ctx, "p")
	must("get project", err)
	_, err = s.UpstreamResults(ctx, id)
	must("upstream results", err)
	_, err = s.RunErrors(ctx, id)
	must("run errors", err)
	_, err = s.TaskQuestions(ctx, id)
	must("questions", err)
	_, err = s.TaskFeedback(ctx, id)
	must("feedback", err)
	_, _, err = s.LastSession(ctx, id, "a1")
	must("last session", err)
	_, err = s.StartRun(ctx, run.ID, 1000+n, "/tmp")
	must("start run", err)
	// What a CLI agent's stream reports as it runs (claude, codex).
	must("run session", s.RecordRunSession(ctx, run.ID, fmt.Sprint("session-", n)))
	must("run CLI", s.RecordRunCLI(ctx, run.ID, models.RunCLI{CLI: "claude", Version: fmt.Sprint("2.1.", n),
		MCPNotReady: []string{"agentqueued"}}))
	_, err = s.RecordRunUsage(ctx, run.ID, models.TokenUsage{Input: int64(10 + n), Output: 5, CacheRead: 3})
	must("run usage", err)
	cost := 0.01 * float64(n+1)
	must("run result", s.RecordRunResult(ctx, run.ID, &cost, []string{"Write"}))
	_, err = s.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted, ExpectFrom: models.StatusInProgress,
		Outcome: "completed", Result: &models.Completion{Summary: fmt.Sprint("done ", n)},
		Verification: &models.Verification{TaskID: id, Attempt: run.Attempt, Phase: "deliver"}})
	must("finish run", err)
	_, _, err = s.LastWorkRun(ctx, id)
	must("last work run", err)
	_, _, err = s.PendingPlan(ctx, id)
	must("pending plan", err)
	storetest.Apply(t, s, id, models.EventVerifyPassed)
	_, _, err = s.TaskEventsAfter(ctx, int64(n), 200+n)
	must("task events", err)
}

// TestStatementsAreParsedOnce: the statements of a task's life are
// compiled by SQLite the first time only; the same work on other tasks,
// with other values bound, compiles nothing again (no statement prepared
// anew, none prepared again because its plan depends on a bound value).
func TestStatementsAreParsedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, compiled, err := store.OpenCountingCompilesForTest(ctx, filepath.Join(t.TempDir(), "aq.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.Project(t, s, "p")
	if _, err := s.RegisterAgent(ctx, models.Agent{ID: "a1", Name: "a1", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "true"}}); err != nil {
		t.Fatal(err)
	}
	lifecycle(t, s, 0)
	lifecycle(t, s, 1) // statements a first transaction missed are cached after it
	before := compiled()
	for i := 2; i < 6; i++ {
		lifecycle(t, s, i)
	}
	if got := compiled() - before; got != 0 {
		t.Fatalf("four more task lives compiled statements again (%d authorizer calls), want none", got)
	}
}

// TestCachedStatementsAreSafeAcrossConnections runs transitions on the
// writer and reads on the read pool at once, through the same cached
// statements, and checks every answer; then Close closes the statements.
func TestCachedStatementsAreSafeAcrossConnections(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	const workers, each = 6, 5
	ids := make([][]string, workers)
	for w := range ids {
		for i := range each {
			ids[w] = append(ids[w], storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "x", Title: fmt.Sprintf("w%d t%d", w, i)})["x"])
		}
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, id := range ids[w] {
				for _, ev := range storetest.ToCompleted {
					res, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: ev, Actor: "test", AgentID: "a1"})
					if err != nil {
						errs <- fmt.Errorf("apply %s to %s: %w", ev, id, err)
						return
					}
					got, err := s.GetTask(ctx, id)
					if err != nil {
						errs <- fmt.Errorf("get task %s: %w", id, err)
						return
					}
					if got.ID != id || got.Status != res.To {
						errs <- fmt.Errorf("task %s read as %s %s after %s, want %s", id, got.ID, got.Status, ev, res.To)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if store.StatementsCachedForTest(s) == 0 {
		t.Fatal("no statement is cached")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if n := store.StatementsCachedForTest(s); n != 0 {
		t.Fatalf("%d statements still prepared after Close", n)
	}
	if _, err := s.GetTask(ctx, ids[0][0]); err == nil {
		t.Fatal("a read after Close succeeded")
	}
}
