package orchestrator

import (
	"context"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// A reviewer's run holds one of its project's slots, so a review waits for
// a free one: with max_concurrent_agents 1 and a task running, the review
// waits, saying so, and starts once the slot is free. (It used to start at
// once, the project then holding two slots of one.)
func TestAReviewWaitsForAFreeSlot(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	one := 1
	if _, err := h.st.UpdateProject(ctx, "p", models.ProjectPatch{MaxConcurrentAgents: &one, Settings: &models.ProjectSettings{QAAgent: "qa"}}); err != nil {
		t.Fatal(err)
	}
	h.agent("w1", "command", "quiet", nil)
	h.agent("qa", "command", "quiet", func(a *models.Agent) { a.Projects = []string{"other"} })
	if _, err := h.st.SetAgentPaused(ctx, "qa", true); err != nil {
		t.Fatal(err)
	}
	r := h.tasks(models.BatchTask{LocalID: "r", Title: "r", VerificationType: models.VerifyQAAgent})["r"]
	run, _, err := h.st.ClaimTask(ctx, r, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.StartRun(ctx, run.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted, Outcome: "completed"}); err != nil {
		t.Fatal(err)
	}
	if err := h.st.SetVerification(ctx, models.Verification{TaskID: r, Attempt: run.Attempt, Phase: models.PhaseReview}); err != nil {
		t.Fatal(err)
	}
	s := h.tasks(models.BatchTask{LocalID: "s", Title: "s"})["s"]
	h.start()
	h.waitStart() // s: the one slot
	if _, err := h.o.SetAgentPaused(ctx, "qa", false); err != nil {
		t.Fatal(err)
	}
	h.settle()
	if h.o.reviewRunning(r) {
		t.Fatal("the review started while the project's one slot was busy")
	}
	if v, _, err := h.st.GetVerification(ctx, r); err != nil || !strings.Contains(v.Detail(), "waiting for a free slot of project p (1 of 1 busy)") {
		t.Fatalf("the waiting review says %q (%v)", v.Detail(), err)
	}
	st, err := h.st.SchedulingState(ctx, h.clock.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Projects {
		if p.Project.ID == "p" && p.Running > one {
			t.Fatalf("project p holds %d slots of %d", p.Running, one)
		}
	}
	// The slot frees: the review takes it.
	if _, err := h.o.ApplyAdminEvent(ctx, models.TransitionRequest{TaskID: s, Event: models.EventAdminCancel, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	h.settleUntil("the review to start", func() bool { return h.o.reviewRunning(r) })
}
