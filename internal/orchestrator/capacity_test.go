package orchestrator

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// capacityRule is a Capacity rule of 100 items over running ingest tasks.
func capacityRule(t *testing.T) models.Rule {
	t.Helper()
	var r models.Rule
	if err := json.Unmarshal([]byte(`{"id": "ingest-cap", "type": "Capacity", "matcher": {"kind": "ingest", "status": "Running"}, "max_capacity": 100}`), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// withStoreRules makes the orchestrator read the rules in force from the
// harness's store each round, as the daemon does.
func withStoreRules(h **harness) func(*Config) {
	return func(c *Config) { c.CurrentRules = func() []models.Rule { return (*h).st.CurrentRules() } }
}

// TestCapacityRuleCountsTheReportedProgress: the store's counts reach the
// scheduler, whose Capacity rule admits a waiting task once a running one
// has reported enough of its items done.
func TestCapacityRuleCountsTheReportedProgress(t *testing.T) {
	t.Parallel()
	var h *harness
	h = newHarness(t, withStoreRules(&h))
	ctx := context.Background()
	if _, err := h.st.ReplaceRules(ctx, []models.Rule{capacityRule(t)}, "test"); err != nil {
		t.Fatal(err)
	}
	h.agent("a1", "command", "exit0", nil)
	h.agent("a2", "command", "exit0", nil)
	ids := h.tasks(models.BatchTask{LocalID: "big", Title: "big", Kind: "ingest", ExpectedCount: 80})
	run, _, err := h.st.ClaimTask(ctx, ids["big"], "a1")
	if err != nil {
		t.Fatal(err)
	}
	next := h.tasks(models.BatchTask{LocalID: "next", Title: "next", Kind: "ingest", ExpectedCount: 50})["next"]
	n := func(v int) *int { return &v }
	for _, tc := range []struct {
		name      string
		succeeded int
		failed    int
		wantStart bool
	}{
		{"nothing reported: 80 + 50 > 100", 0, 0, false},
		{"20 done: 60 + 50 > 100", 15, 5, false},
		{"30 done: 50 + 50 fits", 25, 5, true},
	} {
		if _, err := h.st.SetTaskProgress(ctx, run.ID, n(tc.succeeded), n(tc.failed)); err != nil {
			t.Fatal(err)
		}
		got := Schedule(h.roundSnapshot(ctx), SchedulerConfig{})
		started := len(got) == 1 && got[0].TaskID == next
		if started != tc.wantStart || len(got) > 1 {
			t.Fatalf("%s: assignments %+v, want %s started: %v", tc.name, got, next, tc.wantStart)
		}
	}
}

// TestCapacityRuleAdmitsMoreWorkAsProgressComesIn runs the loop: a task
// waits while the running one's remaining work fills the capacity and
// starts as soon as the agent's progress report frees enough of it.
func TestCapacityRuleAdmitsMoreWorkAsProgressComesIn(t *testing.T) {
	t.Parallel()
	var h *harness
	h = newHarness(t, withStoreRules(&h))
	ctx := context.Background()
	if _, err := h.st.ReplaceRules(ctx, []models.Rule{capacityRule(t)}, "test"); err != nil {
		t.Fatal(err)
	}
	fifo1 := h.heldAgent("a1")
	ids := h.tasks(models.BatchTask{LocalID: "big", Title: "big", Kind: "ingest", ExpectedCount: 80})
	run := h.running()
	if run.TaskID != ids["big"] {
		t.Fatalf("started %s", run.TaskID)
	}
	fifo2 := h.heldAgent("a2")
	next := h.tasks(models.BatchTask{LocalID: "next", Title: "next", Kind: "ingest", ExpectedCount: 50})["next"]
	h.noRunStarts()

	n := func(v int) *int { return &v }
	if err := h.o.Progress(ctx, run, models.TaskProgress{Message: "a fifth", Succeeded: n(16)}); err != nil {
		t.Fatal(err)
	}
	h.noRunStarts() // 64 + 50 > 100
	if err := h.o.Progress(ctx, run, models.TaskProgress{Succeeded: n(28), Failed: n(2)}); err != nil {
		t.Fatal(err)
	}
	second := h.waitStart() // 50 + 50 fits
	if second.TaskID != next {
		t.Fatalf("started %s, want %s", second.TaskID, next)
	}
	if tk := h.task(ids["big"]); tk.SuccessCount != 28 || tk.FailureCount != 2 {
		t.Fatalf("stored counts %d/%d", tk.SuccessCount, tk.FailureCount)
	}
	release(t, fifo1, "0")
	release(t, fifo2, "0")
	h.waitEnd()
	h.waitEnd()
}

// TestABatchsRulesReachTheScheduler: rules carried by batch entries are
// stored with their tasks and limit them from the store's snapshot on.
func TestABatchsRulesReachTheScheduler(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	h.agent("a1", "command", "exit0", nil)
	h.agent("a2", "command", "exit0", nil)
	var batch []models.BatchTask
	if err := json.Unmarshal([]byte(`[
		{"id": "one", "title": "cluster one", "kind": "clustering", "metadata": {"projectId": "7"},
		 "rules": [{"type": "Concurency", "max_concurency": 1, "matcher": {"status": "Running", "kind": "clustering", "fields": ["projectId"]}}]},
		{"id": "two", "title": "cluster two", "kind": "clustering", "metadata": {"projectId": "7"},
		 "rules": [{"type": "Concurency", "max_concurency": 1, "matcher": {"status": "Running", "kind": "clustering", "fields": ["projectId"]}}]}
	]`), &batch); err != nil {
		t.Fatal(err)
	}
	ids := h.tasks(batch...)
	got := Schedule(h.roundSnapshot(ctx), SchedulerConfig{})
	// Created together, they are as old as each other: either may go first.
	if len(got) != 1 || (got[0].TaskID != ids["one"] && got[0].TaskID != ids["two"]) {
		t.Fatalf("assignments %+v, want one of %s and %s", got, ids["one"], ids["two"])
	}
}

// roundSnapshot reads what a round reads — the scheduling state and each
// project's first page of READY tasks — as the scheduler's input.
func (h *harness) roundSnapshot(ctx context.Context) Snapshot {
	h.t.Helper()
	now := h.clock.Now()
	st, err := h.st.SchedulingState(ctx, now, h.o.cfg.Window)
	if err != nil {
		h.t.Fatal(err)
	}
	snap := h.o.snapshot(st)
	for _, p := range st.Projects {
		ts, err := h.st.ReadyTasks(ctx, models.ReadyQuery{ProjectID: p.Project.ID, Now: now, Limit: h.o.cfg.ReadyPerProject})
		if err != nil {
			h.t.Fatal(err)
		}
		for _, t := range ts {
			snap.Ready = append(snap.Ready, taskInfo(t))
		}
	}
	return snap
}
