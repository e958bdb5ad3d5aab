package orchestrator

import (
	"context"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// A task restarted by ADMIN_RESTART does its work again from the start:
// its progress counts are zeroed, so a Capacity rule counts its whole work.
// (Kept, success_count = expected_count counted 0 remaining work and any
// number of restarted tasks started at once under the rule.)
func TestARestartedTaskCountsItsWholeWorkAgain(t *testing.T) {
	rule := models.Rule{ID: "ingest-cap", Type: models.RuleCapacity, MaxCapacity: 100,
		Matcher: models.RuleMatcher{Kind: "ingest", Status: "Running"}}
	h := newHarness(t, func(c *Config) { c.Rules = []models.Rule{rule} })
	ctx := context.Background()
	h.agent("a1", "command", "quiet", nil)
	h.agent("a2", "command", "quiet", nil)
	hundred := 100
	ids := h.tasks(models.BatchTask{LocalID: "x", Title: "x", Kind: "ingest", ExpectedCount: hundred},
		models.BatchTask{LocalID: "y", Title: "y", Kind: "ingest", ExpectedCount: hundred})
	for _, id := range []string{ids["x"], ids["y"]} {
		run, _, err := h.st.ClaimTask(ctx, id, "a1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.st.StartRun(ctx, run.ID, 1, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := h.st.SetTaskProgress(ctx, run.ID, &hundred, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := h.st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted, Outcome: "completed"}); err != nil {
			t.Fatal(err)
		}
		for _, ev := range []models.TaskEvent{models.EventVerifyPassed, models.EventAdminRestart} {
			if _, err := h.st.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: ev, Actor: "test"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, id := range []string{ids["x"], ids["y"]} {
		if tk := h.task(id); tk.SuccessCount != 0 || tk.FailureCount != 0 {
			t.Fatalf("restarted %s keeps its counts: %d succeeded, %d failed", id, tk.SuccessCount, tk.FailureCount)
		}
	}
	h.start()
	h.settle()
	started := 0
	for _, id := range []string{ids["x"], ids["y"]} {
		if tk := h.task(id); tk.Status != models.StatusReady {
			started++
		} else {
			t.Logf("%s waits: %s", id, tk.WaitingReason)
		}
	}
	if started != 1 {
		t.Fatalf("%d tasks of 100 items each started under a capacity of 100, want 1", started)
	}
}
