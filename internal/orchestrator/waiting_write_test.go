package orchestrator

import (
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestARoundThatChangesNothingWritesNothing: the waiting reasons are
// written in a write transaction only when a round's reasons or the READY
// tasks they depend on changed; a round that finds everything as the last
// one wrote it commits nothing. A new READY task, and a task whose
// not_before passes, still get their reasons.
func TestARoundThatChangesNothingWritesNothing(t *testing.T) {
	t.Parallel()
	rule := models.Rule{ID: "one-capped", Type: models.RuleConcurrency, MaxConcurrency: 1,
		Matcher: models.RuleMatcher{Kind: "capped", Status: "Running"}}
	h := newHarness(t, func(c *Config) { c.Rules = []models.Rule{rule} })
	h.agent("a1", "command", "quiet", nil)
	h.agent("a2", "command", "quiet", nil)
	h.start()
	h.tasks(models.BatchTask{LocalID: "busy", Title: "busy", Kind: "capped"})
	h.waitStart()
	later := h.clock.Now().Add(time.Hour)
	ids := h.tasks(models.BatchTask{LocalID: "c1", Title: "c1", Kind: "capped"},
		models.BatchTask{LocalID: "f", Title: "f", Kind: "capped", NotBefore: &later})
	h.settle()
	h.settle()
	wantCode := func(id, code string) {
		t.Helper()
		if got := h.task(id); got.Status != models.StatusReady || got.WaitingCode != code {
			t.Fatalf("task %s: %s, waiting %q %q; want READY, %q", id, got.Status, got.WaitingCode, got.WaitingReason, code)
		}
	}
	wantCode(ids["c1"], models.WaitingRule)
	wantCode(ids["f"], models.WaitingNotBefore)

	before := h.st.Commits()
	for range 3 {
		h.settle()
	}
	if n := h.st.Commits() - before; n != 0 {
		t.Fatalf("three rounds that change nothing committed %d write transactions, want 0", n)
	}

	c2 := h.tasks(models.BatchTask{LocalID: "c2", Title: "c2", Kind: "capped"})["c2"]
	h.settle()
	wantCode(c2, models.WaitingRule)

	h.clock.Advance(time.Hour)
	h.settle()
	wantCode(ids["f"], models.WaitingRule)
}

// TestATrivialTaskCommitsFourTimes: a task whose agent completes at once,
// in a project without a repository, costs four durable commits from its
// creation to COMPLETED: the claim, the recorded start, the run's end (with
// the result and the verification's start) and the verification's event.
func TestATrivialTaskCommitsFourTimes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.agent("a1", "command", "exit0", nil)
	h.start()
	h.settle()
	before := h.st.Commits()
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	h.waitEnd()
	h.settleUntil("the task completes", func() bool { return h.task(id).Status == models.StatusCompleted })
	h.settle()
	if n := h.st.Commits() - before - 1; n != 4 { // less the creation's
		t.Fatalf("the task committed %d write transactions after its creation, want 4 (events: %v)", n, h.events(id))
	}
}
