package hooks_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/hooks"
	"github.com/agentqueued/agentqueued/internal/llm/llmtest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// countSteps is a context step that needs nothing but the store.
const countSteps = `[{"type":"db_query","query":"task_counts"}]`

func TestPeriodicHookFiresOnceAtEachInterval(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	hk := h.hook(`{"project_id":"web","name":"Hourly","trigger":{"type":"periodic","interval_seconds":3600},
		"cooldown_seconds":0,"context_steps":` + countSteps + `}`)

	if next := h.tick(); !next.Equal(start.Add(time.Hour)) {
		t.Fatalf("next = %s, want %s", next, start.Add(time.Hour))
	}
	h.clock.Advance(59 * time.Minute)
	h.tick()
	h.noRun()

	for i := 1; i <= 3; i++ {
		h.clock.Set(start.Add(time.Duration(i) * time.Hour))
		h.tick()
		r := h.waitRun()
		want, wantReason := start.Add(time.Duration(i)*time.Hour), models.TriggerReasonPeriodic
		if r.Status != models.HookRunCompleted || r.ScheduledAt == nil || !r.ScheduledAt.Equal(want) {
			t.Fatalf("run %d: %s scheduled %v, want completed at %s (error %q)", i, r.Status, r.ScheduledAt, want, r.Error)
		}
		if r.TriggerDetail != "schedule "+want.Format(time.RFC3339) || r.TriggerReason != wantReason {
			t.Fatalf("trigger %q %q", r.TriggerReason, r.TriggerDetail)
		}
		// The same instant again fires nothing.
		h.tick()
		h.noRun()
	}
	if n := len(h.runs(hk.ID)); n != 3 {
		t.Fatalf("%d runs, want 3", n)
	}
}

func TestCronHookCatchesUpOnceAfterDowntimeAndNeverRepeatsAcrossRestarts(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	hk := h.hook(`{"project_id":"web","name":"Morning","trigger":{"type":"cron","expr":"0 9 * * *"},
		"cooldown_seconds":0,"context_steps":` + countSteps + `}`)

	h.clock.Set(utc("2026-03-02T09:00:00Z"))
	h.tick()
	if r := h.waitRun(); !r.ScheduledAt.Equal(utc("2026-03-02T09:00:00Z")) || r.TriggerReason != models.TriggerReasonCron {
		t.Fatalf("first run scheduled %v, trigger %q", r.ScheduledAt, r.TriggerReason)
	}
	// Down for three days; the restart makes one catch-up run.
	h.restart()
	h.clock.Set(utc("2026-03-05T10:30:00Z"))
	h.tick()
	r := h.waitRun()
	if !r.ScheduledAt.Equal(utc("2026-03-05T09:00:00Z")) ||
		!strings.Contains(r.TriggerDetail, "catch-up after downtime: 2 earlier scheduled times missed") {
		t.Fatalf("catch-up run scheduled %v, detail %q", r.ScheduledAt, r.TriggerDetail)
	}
	h.tick()
	h.noRun()
	h.restart()
	h.tick()
	h.noRun()
	if next := h.tick(); !next.Equal(utc("2026-03-06T09:00:00Z")) {
		t.Fatalf("next = %s", next)
	}
	if n := len(h.runs(hk.ID)); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
}

func TestCronHookFiresARepeatedHourOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	h.clock.Set(utc("2026-10-31T12:00:00Z"))
	fall := h.hook(`{"project_id":"web","name":"Fall","trigger":{"type":"cron","expr":"30 1 * * *",
		"timezone":"America/New_York"},"cooldown_seconds":0,"context_steps":` + countSteps + `}`)
	// The fall-back repeats 01:30: it fires in the first pass only.
	for _, at := range []string{"2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"} {
		h.clock.Set(utc(at))
		h.tick()
	}
	h.eng.Wait()
	var got []string
	for _, r := range h.runs(fall.ID) {
		got = append(got, r.ScheduledAt.Format(time.RFC3339))
	}
	if want := []string{"2026-11-02T06:30:00Z", "2026-11-01T05:30:00Z"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("fall-back firings %v, want %v", got, want)
	}
}

func TestCronHookInASpringForwardGapFiresWhenTheGapEnds(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	h.clock.Set(utc("2026-03-07T12:00:00Z"))
	hk := h.hook(`{"project_id":"web","name":"Spring","trigger":{"type":"cron","expr":"30 2 * * *",
		"timezone":"America/New_York"},"cooldown_seconds":0,"context_steps":` + countSteps + `}`)
	// 02:30 does not exist on 8 March in New York: 03:00 EDT is 07:00 UTC.
	h.clock.Set(utc("2026-03-08T06:59:00Z"))
	h.tick()
	h.noRun()
	h.clock.Set(utc("2026-03-08T07:00:00Z"))
	h.tick()
	if r := h.waitRun(); !r.ScheduledAt.Equal(utc("2026-03-08T07:00:00Z")) {
		t.Fatalf("scheduled %v", r.ScheduledAt)
	}
	h.clock.Set(utc("2026-03-09T06:30:00Z"))
	h.tick()
	if r := h.waitRun(); !r.ScheduledAt.Equal(utc("2026-03-09T06:30:00Z")) || r.HookID != hk.ID {
		t.Fatalf("scheduled %v", r.ScheduledAt)
	}
}

// TestTwoConcurrentPassesFireEachTimeAndEventOnce: two engines on one
// database (two daemons, or overlapping passes) make their passes at the
// same instants; every scheduled time and every event fires once. The runs
// are held running until the last round (their LLM call waits), as on a
// machine too slow to finish any of them meanwhile, and the cap on runs
// running at once leaves room for all of them: how fast runs end must not
// change what fires.
func TestTwoConcurrentPassesFireEachTimeAndEventOnce(t *testing.T) {
	t.Parallel()
	const rounds = 15
	h := newHarness(t, func(c *hooks.Config) { c.MaxRunning = 2 * rounds })
	h.project("web")
	periodic := h.hook(`{"project_id":"web","name":"Often","trigger":{"type":"periodic","interval_seconds":60},
		"cooldown_seconds":0,"context_steps":` + countSteps + `,"prompt_template":"say done"}`)
	onEvent := h.hook(`{"project_id":"web","name":"On fail","trigger":{"type":"event","event_type":"task.failed"},
		"cooldown_seconds":0,"context_steps":` + countSteps + `,"prompt_template":"say done"}`)
	h.agent("a1")
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	h.llm.SetResponder(func(llmtest.Request) llmtest.Reply {
		<-gate
		return llmtest.Reply{Content: "done"}
	})
	// Two engines, each with its own connections to the same database, as
	// two daemons have.
	other := storetest.OpenAt(t, h.path, storetest.WithClock(h.clock))
	var engines []*hooks.Engine
	for _, st := range []*store.Store{h.st, other} {
		e, err := hooks.New(h.cfg, st, st, h.ws)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Wait)
		engines = append(engines, e)
	}
	t.Cleanup(release) // before the waits above, on any way out
	tickAll := func() {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, len(engines))
		for _, e := range engines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := e.Tick(context.Background())
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// Both cursors start before the events.
	tickAll()
	for i := 1; i <= rounds; i++ {
		id := h.task("web", fmt.Sprintf("Task %d", i))
		h.drive(id, models.EventAssigned, models.EventAgentStarted, models.EventAgentFailed)
		h.clock.Set(start.Add(time.Duration(i) * time.Minute))
		tickAll()
		// A firing is recorded by the pass that claims it.
		if n := len(h.runs(periodic.ID)); n != i {
			t.Fatalf("round %d: periodic hook ran %d times, want %d", i, n, i)
		}
		if n := len(h.runs(onEvent.ID)); n != i {
			t.Fatalf("round %d: event hook ran %d times, want %d", i, n, i)
		}
	}
	for _, hk := range []models.Hook{periodic, onEvent} {
		for _, r := range h.runs(hk.ID) {
			if r.Status != models.HookRunRunning {
				t.Fatalf("run %s is %s before the runs were let go", r.ID, r.Status)
			}
		}
	}
	release()
	for _, e := range engines {
		e.Wait()
	}
	times := map[time.Time]bool{}
	for _, r := range h.runs(periodic.ID) {
		if r.Status != models.HookRunCompleted || r.ScheduledAt == nil || strings.Contains(r.TriggerDetail, "catch-up") ||
			r.TriggerReason != models.TriggerReasonPeriodic {
			t.Fatalf("periodic run %s: %s, scheduled %v, trigger %q %q (error %q)", r.ID, r.Status, r.ScheduledAt, r.TriggerReason,
				r.TriggerDetail, r.Error)
		}
		times[r.ScheduledAt.UTC()] = true
	}
	for i := 1; i <= rounds; i++ {
		if at := start.Add(time.Duration(i) * time.Minute); !times[at] {
			t.Fatalf("the scheduled time %s did not fire", at.Format(time.RFC3339))
		}
	}
	seen := map[string]bool{}
	for _, r := range h.runs(onEvent.ID) {
		if r.Status != models.HookRunCompleted {
			t.Fatalf("event run %s: %s (error %q)", r.ID, r.Status, r.Error)
		}
		var ev models.HookEvent
		mustJSON(t, deref(r.EventData), &ev)
		if seen[ev.TaskID] {
			t.Fatalf("the failure of %s fired twice", ev.TaskID)
		}
		seen[ev.TaskID] = true
	}
	if len(seen) != rounds {
		t.Fatalf("event hook ran for %d tasks, want %d", len(seen), rounds)
	}
}

func TestEventHooksFireForTheirProjectAndFilters(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *hooks.Config) { c.MaxRunning = 10 })
	h.project("web")
	h.project("api")
	h.agent("a1")
	failed := h.hook(`{"project_id":"web","name":"Failed bugs","trigger":{"type":"event","event_type":"task.failed",
		"filters":{"kind":"bug"}},"cooldown_seconds":0,"context_steps":` + countSteps + `,
		"prompt_template":""}`)
	merged := h.hook(`{"project_id":"web","name":"Merged","trigger":{"type":"event","event_type":"pr.merged"},
		"cooldown_seconds":0,"context_steps":` + countSteps + `}`)
	broken := h.hook(`{"project_id":"web","name":"Broken","trigger":{"type":"event","event_type":"chain.broken"},
		"cooldown_seconds":0,"context_steps":` + countSteps + `}`)
	h.tick() // the cursor starts here

	bug := h.taskOf("web", models.BatchTask{Title: "A bug", Kind: "bug"})
	feature := h.taskOf("web", models.BatchTask{Title: "A feature", Kind: "feature"})
	otherBug := h.taskOf("api", models.BatchTask{Title: "Their bug", Kind: "bug"})
	for _, id := range []string{bug, feature, otherBug} {
		h.drive(id, models.EventAssigned, models.EventAgentStarted, models.EventAgentFailed)
	}
	pr := h.task("web", "Lands by PR")
	h.drive(pr, models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted, models.EventPRCreated, models.EventPRMerged)
	res, err := h.st.CreateTasks(context.Background(), models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{
		{LocalID: "up", Title: "Upstream"}, {LocalID: "down", Title: "Downstream", Dependencies: []models.BatchDependency{{ID: "up"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	h.drive(res[0].TaskID, models.EventAssigned, models.EventAgentStarted, models.EventMaxRetries)
	h.tick()
	h.eng.Wait()

	check := func(hk models.Hook, wantTask string) models.HookRun {
		t.Helper()
		rs := h.runs(hk.ID)
		if len(rs) != 1 {
			t.Fatalf("hook %s ran %d times, want once", hk.ID, len(rs))
		}
		var ev models.HookEvent
		mustJSON(t, deref(rs[0].EventData), &ev)
		if ev.TaskID != wantTask || ev.ProjectID != "web" {
			t.Fatalf("hook %s ran for %+v, want task %s", hk.ID, ev, wantTask)
		}
		return rs[0]
	}
	r := check(failed, bug)
	var ev models.HookEvent
	mustJSON(t, deref(r.EventData), &ev)
	if ev.Type != "task.failed" || ev.Kind != "bug" || ev.Title != "A bug" || ev.To != "FAILED" || ev.Event != "AGENT_FAILED" {
		t.Fatalf("event data %+v", ev)
	}
	check(merged, pr)
	b := check(broken, res[0].TaskID)
	mustJSON(t, deref(b.EventData), &ev)
	if len(ev.Blocked) != 1 || ev.Blocked[0] != res[1].TaskID {
		t.Fatalf("chain.broken event %+v, want %s blocked", ev, res[1].TaskID)
	}
	// Nothing is read twice.
	h.drain()
	h.tick()
	h.noRun()
}

func TestCooldownSurvivesARestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	hk := h.hook(`{"project_id":"web","name":"Minutely","trigger":{"type":"periodic","interval_seconds":60},
		"cooldown_seconds":3600,"context_steps":` + countSteps + `}`)
	h.clock.Advance(time.Minute)
	h.tick()
	if r := h.waitRun(); r.Status != models.HookRunCompleted {
		t.Fatalf("first run %s", r.Status)
	}
	h.restart()
	h.clock.Advance(time.Minute)
	h.tick()
	r := h.waitRun()
	if r.Status != models.HookRunSkipped || !strings.Contains(deref(r.SkippedReason),
		"cooldown: the last run started at 2026-03-02T08:01:00Z; the next may start at 2026-03-02T09:01:00Z") {
		t.Fatalf("run in the cooldown: %s %q", r.Status, deref(r.SkippedReason))
	}
	h.clock.Set(start.Add(61 * time.Minute))
	h.tick()
	if r := h.waitRun(); r.Status != models.HookRunCompleted || !r.ScheduledAt.Equal(start.Add(61*time.Minute)) {
		t.Fatalf("run after the cooldown: %s at %v", r.Status, r.ScheduledAt)
	}
	// A person's fire ignores the cooldown.
	if r := h.fire(hk.ID, models.HookFire{}); r.Status != models.HookRunCompleted ||
		r.TriggerReason != models.TriggerReasonManual || r.TriggerDetail != "fired by tester" {
		t.Fatalf("manual fire: %s %q %q", r.Status, r.TriggerReason, r.TriggerDetail)
	}
}

func TestACooldownAsLongAsTheIntervalSkipsNoFiring(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	hk := h.hook(`{"project_id":"web","name":"Hourly","trigger":{"type":"periodic","interval_seconds":3600},
		"context_steps":` + countSteps + `}`)
	// Each firing is noticed a little after its time, the first later than
	// the second.
	for i, late := range []time.Duration{50 * time.Millisecond, 10 * time.Millisecond, 0, 900 * time.Millisecond} {
		h.clock.Set(start.Add(time.Duration(i+1)*time.Hour + late))
		h.tick()
		if r := h.waitRun(); r.Status != models.HookRunCompleted {
			t.Fatalf("firing %d: %s %q", i+1, r.Status, deref(r.SkippedReason))
		}
	}
	if n := len(h.runs(hk.ID)); n != 4 {
		t.Fatalf("%d runs", n)
	}
}

func TestTheGlobalBudgetSkipsHooks(t *testing.T) {
	t.Parallel()
	budget := int64(500)
	h := newHarness(t, func(c *hooks.Config) { c.GlobalBudget = &budget })
	h.project("web")
	h.project("api")
	hk := h.hook(`{"project_id":"web","name":"Ask","trigger":{"type":"manual"},"prompt_template":"hello"}`)
	if err := h.st.RecordTokenUsage(context.Background(), models.TokenUsage{ProjectID: "api", Input: 500,
		CreatedAt: start.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	r := h.fire(hk.ID, models.HookFire{})
	if r.Status != models.HookRunSkipped ||
		deref(r.SkippedReason) != "the global token budget is spent (500 of 500 tokens since 2026-03-01T08:00:00Z)" {
		t.Fatalf("%s %q", r.Status, deref(r.SkippedReason))
	}
	// The window moves on.
	h.clock.Advance(24 * time.Hour)
	h.llm.Enqueue(llmtest.Reply{Content: "hi", Usage: llmtest.Usage{PromptTokens: 1, CompletionTokens: 1}})
	if r := h.fire(hk.ID, models.HookFire{}); r.Status != models.HookRunCompleted {
		t.Fatalf("after the window: %s %q", r.Status, deref(r.SkippedReason))
	}
}

func TestRunsBeyondTheCapWaitForAFreePlace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *hooks.Config) { c.MaxRunning = 1 })
	h.project("web")
	release := make(chan struct{})
	asked := make(chan struct{}, 10)
	h.llm.SetResponder(func(llmtest.Request) llmtest.Reply {
		asked <- struct{}{}
		<-release
		return llmtest.Reply{Content: "done", Usage: llmtest.Usage{PromptTokens: 10, CompletionTokens: 2}}
	})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	spec := `{"project_id":"web","name":"%s","trigger":{"type":"periodic","interval_seconds":60},
		"cooldown_seconds":0,"prompt_template":"say done"}`
	a := h.hook(fmt.Sprintf(spec, "First"))
	b := h.hook(fmt.Sprintf(spec, "Second"))
	h.clock.Advance(time.Minute)
	h.tick()
	<-asked
	running, err := h.st.ListHookRuns(context.Background(), models.HookRunFilter{Status: models.HookRunRunning})
	if err != nil {
		t.Fatal(err)
	}
	if len(running) != 1 {
		t.Fatalf("%d runs running, want 1", len(running))
	}
	first := running[0].HookID
	waiting := a.ID
	if first == a.ID {
		waiting = b.ID
	}
	// Another pass while the place is taken: the other hook stays due.
	h.tick()
	if n := len(h.runs(waiting)); n != 0 {
		t.Fatalf("the waiting hook has %d runs", n)
	}
	if _, err := h.eng.Fire(context.Background(), waiting, "tester", models.HookFire{}); models.ErrorCodeOf(err) != models.CodeConflict ||
		!strings.Contains(err.Error(), "1 hook runs are running already") {
		t.Fatalf("fire at the cap: %v", err)
	}
	free()
	if r := h.waitRun(); r.HookID != first || r.Status != models.HookRunCompleted {
		t.Fatalf("first run %s %s", r.HookID, r.Status)
	}
	h.tick()
	if r := h.waitRun(); r.HookID != waiting || !r.ScheduledAt.Equal(start.Add(time.Minute)) {
		t.Fatalf("the waiting hook's run: %s scheduled %v", r.HookID, r.ScheduledAt)
	}
}

// TestAScheduleHeldAtTheCapPastItsNextTimeFiresOnceForTheLatest: a
// scheduled firing that waits for a free place past its next scheduled time
// fires once, for the latest time, counting the one it missed; the cap
// builds no backlog.
func TestAScheduleHeldAtTheCapPastItsNextTimeFiresOnceForTheLatest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *hooks.Config) { c.MaxRunning = 1 })
	h.project("web")
	release := make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	t.Cleanup(free)
	h.llm.SetResponder(func(llmtest.Request) llmtest.Reply {
		<-release
		return llmtest.Reply{Content: "done"}
	})
	holder := h.hook(`{"project_id":"web","name":"Holder","trigger":{"type":"event","event_type":"task.failed"},
		"cooldown_seconds":0,"prompt_template":"say done"}`)
	often := h.hook(`{"project_id":"web","name":"Often","trigger":{"type":"periodic","interval_seconds":60},
		"cooldown_seconds":0,"context_steps":` + countSteps + `}`)
	if r, err := h.eng.Fire(context.Background(), holder.ID, "tester", models.HookFire{}); err != nil || r.Status != models.HookRunRunning {
		t.Fatalf("fire the holder: %v (%s)", err, r.Status)
	}
	// Due at 08:01 and at 08:02, both while the only place is taken.
	for _, d := range []time.Duration{time.Minute, 2 * time.Minute} {
		h.clock.Set(start.Add(d))
		if next := h.tick(); !next.Equal(start.Add(d).Add(h.cfg.PollInterval)) {
			t.Fatalf("at +%s: next = %s, want a poll interval away", d, next)
		}
		if n := len(h.runs(often.ID)); n != 0 {
			t.Fatalf("at +%s: the held schedule has %d runs", d, n)
		}
	}
	free()
	if r := h.waitRun(); r.HookID != holder.ID {
		t.Fatalf("ended %s, want the holder's run", r.HookID)
	}
	h.tick()
	r := h.waitRun()
	want := start.Add(2 * time.Minute)
	if r.HookID != often.ID || r.ScheduledAt == nil || !r.ScheduledAt.Equal(want) ||
		!strings.Contains(r.TriggerDetail, "1 earlier scheduled times missed") {
		t.Fatalf("run of %s scheduled %v, detail %q; want %s scheduled %s counting 1 missed", r.HookID, r.ScheduledAt,
			r.TriggerDetail, often.ID, want.Format(time.RFC3339))
	}
	h.tick()
	h.noRun()
	if n := len(h.runs(often.ID)); n != 1 {
		t.Fatalf("the held schedule ran %d times, want 1", n)
	}
}

func TestDisabledHooksDoNotFireAndEnablingRestartsTheSchedule(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	hk := h.hook(`{"project_id":"web","name":"Hourly","enabled":false,"trigger":{"type":"periodic","interval_seconds":3600},
		"cooldown_seconds":0,"context_steps":` + countSteps + `}`)
	h.clock.Advance(5 * time.Hour)
	h.tick()
	h.noRun()
	on := true
	if _, err := h.st.UpdateHook(context.Background(), hk.ID, models.HookPatch{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	// No burst for the hours it was off: the schedule counts from now.
	h.tick()
	h.noRun()
	h.clock.Advance(time.Hour)
	h.tick()
	if r := h.waitRun(); !r.ScheduledAt.Equal(start.Add(6 * time.Hour)) {
		t.Fatalf("scheduled %v", r.ScheduledAt)
	}
}

func TestAProjectOverItsBudgetSkipsItsHooks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	limit := int64(1000)
	h.project("web", func(p *models.Project) { p.BudgetLimit = &limit })
	hk := h.hook(`{"project_id":"web","name":"Ask","trigger":{"type":"manual"},"prompt_template":"hello"}`)
	if err := h.st.RecordTokenUsage(context.Background(), models.TokenUsage{ProjectID: "web", Input: 1000}); err != nil {
		t.Fatal(err)
	}
	r := h.fire(hk.ID, models.HookFire{})
	if r.Status != models.HookRunSkipped || deref(r.SkippedReason) != "project web is over its token budget (1000 of 1000 tokens used)" {
		t.Fatalf("%s %q", r.Status, deref(r.SkippedReason))
	}
	if n := len(h.llm.Requests()); n != 0 {
		t.Fatalf("%d LLM requests", n)
	}
}

func TestRunsLeftRunningAreClosedAtStart(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	hk := h.hook(`{"project_id":"web","name":"Ask","trigger":{"type":"manual"},"prompt_template":"hello"}`)
	release := make(chan struct{})
	asked := make(chan struct{}, 1)
	h.llm.SetResponder(func(llmtest.Request) llmtest.Reply {
		asked <- struct{}{}
		<-release
		return llmtest.Reply{Content: "late answer", Usage: llmtest.Usage{PromptTokens: 5, CompletionTokens: 5}}
	})
	run, err := h.eng.Fire(context.Background(), hk.ID, "tester", models.HookFire{})
	if err != nil {
		t.Fatal(err)
	}
	<-asked
	// The daemon dies here; a new one starts on the same database.
	old := h.eng
	h.eng, err = hooks.New(h.cfg, h.st, h.st, h.ws)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.Fire(context.Background(), hk.ID, "tester", models.HookFire{}); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("a fire before the engine started: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.eng.Run(ctx) }()
	<-h.clock.Armed() // the first pass is over
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.Fire(context.Background(), hk.ID, "tester", models.HookFire{}); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("a fire after the engine stopped: %v", err)
	}
	closed := h.stored(run.ID)
	if closed.Status != models.HookRunFailed || closed.Error != "the daemon stopped during the run" || closed.CompletedAt == nil {
		t.Fatalf("closed run: %+v", closed)
	}
	// The old life's run ending later changes nothing.
	close(release)
	old.Wait()
	if r := h.waitRun(); r.ID != run.ID {
		t.Fatalf("ended %s", r.ID)
	}
	if again := h.stored(run.ID); again.Status != models.HookRunFailed || again.LLMResponse != nil {
		t.Fatalf("the closed run was rewritten: %+v", again)
	}
}

// agent registers an agent that driven tasks are assigned to.
func (h *harness) agent(id string) {
	h.t.Helper()
	if _, err := h.st.RegisterAgent(context.Background(), models.Agent{ID: id, Name: id, AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "true"}}); err != nil {
		h.t.Fatal(err)
	}
}

// task creates a READY task and returns its id.
func (h *harness) task(project, title string) string {
	h.t.Helper()
	return h.taskOf(project, models.BatchTask{Title: title})
}

func (h *harness) taskOf(project string, bt models.BatchTask) string {
	h.t.Helper()
	res, err := h.st.CreateTasks(context.Background(), models.TaskBatch{ProjectID: project, Tasks: []models.BatchTask{bt}})
	if err != nil {
		h.t.Fatal(err)
	}
	return res[0].TaskID
}

// drive applies events to a task, as the orchestrator would.
func (h *harness) drive(id string, events ...models.TaskEvent) {
	h.t.Helper()
	for _, ev := range events {
		req := models.TransitionRequest{TaskID: id, Event: ev, Actor: "test"}
		if ev == models.EventAssigned {
			req.AgentID = "a1"
		}
		if _, err := h.st.ApplyEvent(context.Background(), req); err != nil {
			h.t.Fatalf("%s on %s: %v", ev, id, err)
		}
	}
}
