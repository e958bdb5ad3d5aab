package hooks_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentqueued/agentqueued/internal/hooks"
	"github.com/agentqueued/agentqueued/internal/models"
)

const failedHookSpec = `{"project_id":"web","name":"Failed","trigger":{"type":"event","event_type":"task.failed"},
	"cooldown_seconds":0,"context_steps":` + countSteps + `%s}`

// TestAPassWithoutEventHooksWritesNothing: while no enabled hook fires on
// events, a pass after task events commits nothing (no cursor write).
func TestAPassWithoutEventHooksWritesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		hooks []string
	}{
		{"no hook", nil},
		{"a disabled event hook", []string{fmt.Sprintf(failedHookSpec, `,"enabled":false`)}},
		{"a manual hook", []string{`{"project_id":"web","name":"By hand","trigger":{"type":"manual"},"context_steps":` + countSteps + `}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.project("web")
			h.agent("a1")
			for _, spec := range tc.hooks {
				h.hook(spec)
			}
			h.tick()
			for i := range 3 {
				id := h.task("web", fmt.Sprintf("Task %d", i))
				h.drive(id, models.EventAssigned, models.EventAgentStarted, models.EventAgentFailed)
				before := h.st.Commits()
				h.tick()
				if n := h.st.Commits() - before; n != 0 {
					t.Fatalf("pass %d committed %d write transactions, want none", i, n)
				}
			}
			h.noRun()
		})
	}
}

// TestAnEventHookMadeLaterFiresOnceForNewEventsAcrossRestarts: an event
// hook reads the events (the cursor exists), then none fires on events for
// a while; the events of that while (across a restart too) never fire a
// hook made or enabled afterwards; each later event fires it once, and a
// restart fires nothing again.
func TestAnEventHookMadeLaterFiresOnceForNewEventsAcrossRestarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// stop ends the first hook's firing; start makes the later one.
		stop  func(h *harness, first models.Hook)
		start func(h *harness, first models.Hook) models.Hook
	}{
		{"deleted, then another created",
			func(h *harness, first models.Hook) {
				if err := h.st.DeleteHook(ctx, first.ID); err != nil {
					h.t.Fatal(err)
				}
			},
			func(h *harness, _ models.Hook) models.Hook { return h.hook(fmt.Sprintf(failedHookSpec, "")) }},
		{"disabled, then enabled",
			func(h *harness, first models.Hook) {
				off := false
				if _, err := h.st.UpdateHook(ctx, first.ID, models.HookPatch{Enabled: &off}); err != nil {
					h.t.Fatal(err)
				}
			},
			func(h *harness, first models.Hook) models.Hook {
				on := true
				hk, err := h.st.UpdateHook(ctx, first.ID, models.HookPatch{Enabled: &on})
				if err != nil {
					h.t.Fatal(err)
				}
				return hk
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *hooks.Config) { c.MaxRunning = 10 })
			h.project("web")
			h.agent("a1")
			fail := func(title string) string {
				t.Helper()
				id := h.task("web", title)
				h.drive(id, models.EventAssigned, models.EventAgentStarted, models.EventAgentFailed)
				return id
			}
			first := h.hook(fmt.Sprintf(failedHookSpec, ""))
			h.tick() // the cursor starts here
			tc.stop(h, first)
			h.tick()
			fail("While no hook fires on events")
			h.tick()
			h.restart()
			fail("While none fires, after a restart")
			h.tick()
			hk := tc.start(h, first)
			h.tick()
			h.noRun()

			after := fail("After the hook")
			h.tick()
			h.waitRun()
			h.restart()
			h.tick()
			h.noRun()
			again := fail("After a restart")
			h.tick()
			h.waitRun()
			h.tick()
			h.noRun()

			got := map[string]int{}
			for _, r := range h.runs(hk.ID) {
				var ev models.HookEvent
				mustJSON(t, deref(r.EventData), &ev)
				got[ev.TaskID]++
			}
			if len(got) != 2 || got[after] != 1 || got[again] != 1 {
				t.Fatalf("runs per task %v, want one each for %s and %s only", got, after, again)
			}
		})
	}
}
