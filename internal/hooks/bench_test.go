package hooks_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/hooks"
	"github.com/agentqueued/agentqueued/internal/models"
)

// BenchmarkPassWithNothingDue measures one pass of the engine over 300
// hooks (100 periodic, 100 cron, 100 on events) when nothing is due and
// no event is new: the cost the daemon pays at every wake-up.
func BenchmarkPassWithNothingDue(b *testing.B) {
	h := newHarness(b)
	h.project("web")
	for i := range 100 {
		for _, trig := range []string{`{"type":"periodic","interval_seconds":3600}`, `{"type":"cron","expr":"0 9 * * *"}`,
			`{"type":"event","event_type":"task.failed"}`} {
			h.hook(fmt.Sprintf(`{"project_id":"web","name":"h%d %s","trigger":%s,"context_steps":%s}`, i, trig[9:13], trig, countSteps))
		}
	}
	ctx := context.Background()
	if _, err := h.eng.Tick(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := h.eng.Tick(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEventFirings measures firing event hooks: each iteration writes
// one task event and makes the pass that records its run; the run itself
// (one db_query step, no LLM) goes on in the background.
func BenchmarkEventFirings(b *testing.B) {
	h := newHarness(b, func(c *hooks.Config) { c.MaxRunning = 100; c.OnRunEnd = nil })
	h.project("web")
	h.agent("a1")
	h.hook(`{"project_id":"web","name":"On fail","trigger":{"type":"event","event_type":"task.failed"},
		"cooldown_seconds":0,"context_steps":` + countSteps + `}`)
	ctx := context.Background()
	if _, err := h.eng.Tick(ctx); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = h.task("web", fmt.Sprintf("Task %d", i))
		h.drive(ids[i], models.EventAssigned, models.EventAgentStarted)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.drive(ids[i], models.EventAgentFailed)
		h.clock.Advance(time.Millisecond)
		if _, err := h.eng.Tick(ctx); err != nil {
			b.Fatal(err)
		}
	}
	h.eng.Wait()
	b.StopTimer()
	if last := h.runs("on-fail")[0]; last.ID != fmt.Sprintf("on-fail.%d", b.N) {
		b.Fatalf("last run %s after %d events", last.ID, b.N)
	}
}
