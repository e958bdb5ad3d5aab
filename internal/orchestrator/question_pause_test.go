package orchestrator

import (
	"context"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestALateAnswerEndsOnlyThePauseItCaused: answering an old question set
// resume_after to now even when the task was PAUSED for a rate limit, so
// the agent was handed the task again at once. An expired question takes
// no answer at all: the rate limit's pause stands.
func TestALateAnswerEndsOnlyThePauseItCaused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.InputTimeout = time.Hour; c.IdleTimeout = 10 * time.Hour })
	h.agent("asker", "command", "quiet", nil)
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	run := h.running()
	errc, q := h.askAsync(run, "Which way?")
	ctx := context.Background()
	// The next run is the rate-limited agent's.
	if _, err := h.st.SetAgentPaused(ctx, "asker", true); err != nil {
		t.Fatal(err)
	}
	h.agent("limited", "claude", "ratelimit-late", nil)
	h.clock.Advance(time.Hour) // no answer in time: it expires, PAUSED for an hour
	h.settle()
	if tk := h.task(id); tk.Status != models.StatusPaused {
		t.Fatalf("after the input timeout: %s (%q)", tk.Status, tk.StatusReason)
	}
	<-errc
	h.waitEnd()
	h.clock.Advance(time.Hour) // the pause ends; the limited agent runs and is rate-limited
	h.settle()
	h.waitStart()
	h.waitEnd()
	h.settle()
	reset := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	tk := h.task(id)
	if tk.Status != models.StatusPaused || tk.ResumeAfter == nil || !tk.ResumeAfter.Equal(reset) {
		t.Fatalf("after the rate limit: %s until %v (%q)", tk.Status, tk.ResumeAfter, tk.StatusReason)
	}
	// The old question's answer arrives: refused, and the rate limit's
	// pause stands.
	if _, err := h.o.AnswerQuestion(ctx, q.ID, "left", "alice"); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("an answer to an expired question: %v", err)
	}
	h.settle()
	tk = h.task(id)
	if tk.Status != models.StatusPaused || tk.ResumeAfter == nil || !tk.ResumeAfter.Equal(reset) {
		t.Fatalf("a late answer ended the rate limit's pause: %s until %v (%q)", tk.Status, tk.ResumeAfter, tk.StatusReason)
	}
}
