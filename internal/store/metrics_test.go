package store_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// recorder is a store.Observer that keeps what it is told.
type recorder struct {
	mu          sync.Mutex
	transitions []store.ObservedTransition
	runs        []store.ObservedRun
}

func (r *recorder) Transitioned(t store.ObservedTransition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.transitions = append(r.transitions, t)
}

func (r *recorder) RunEnded(o store.ObservedRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, o)
}

// take returns what was observed since the last take.
func (r *recorder) take() ([]store.ObservedTransition, []store.ObservedRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, o := r.transitions, r.runs
	r.transitions, r.runs = nil, nil
	return t, o
}

// openObserved opens a store on a fake clock with a recording observer.
func openObserved(t *testing.T) (*store.Store, *clocktest.Fake, *recorder) {
	t.Helper()
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	rec := &recorder{}
	s := storetest.Open(t, storetest.WithClock(clock), storetest.WithObserver(rec))
	return s, clock, rec
}

func TestObserverSeesCommittedTransitionsWithTheirWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clock, rec := openObserved(t)
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1")
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "a"},
		models.BatchTask{LocalID: "b", Title: "b", Dependencies: storetest.Deps("a")})
	rec.take()

	type step struct {
		name string
		do   func() error
		want []store.ObservedTransition
		runs []store.ObservedRun
	}
	var runA, runB models.Run
	steps := []step{
		{name: "claim a after 5s READY since its creation", do: func() (err error) {
			clock.Advance(5 * time.Second)
			runA, _, err = s.ClaimTask(ctx, ids["a"], "a1")
			return err
		}, want: []store.ObservedTransition{{ProjectID: "p", From: models.StatusReady, To: models.StatusAssigned,
			Event: models.EventAssigned, QueueWait: 5 * time.Second}}},
		{name: "start a: no dependency", do: func() error {
			clock.Advance(time.Second)
			_, err := s.StartRun(ctx, runA.ID, 1, "")
			return err
		}, want: []store.ObservedTransition{{ProjectID: "p", From: models.StatusAssigned, To: models.StatusInProgress,
			Event: models.EventAgentStarted}}},
		{name: "a plan's dry run, rolled back, reports nothing", do: func() error {
			_, err := s.SavePlan(ctx, ids["a"], "a1", []models.BatchTask{{Title: "sub one"}, {Title: "sub two"}})
			return err
		}},
		{name: "a's claim again is refused and reports nothing", do: func() error {
			if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: ids["a"], Event: models.EventAssigned,
				ExpectFrom: models.StatusReady, Actor: "test", AgentID: "a1"}); models.ErrorCodeOf(err) != models.CodeConflict {
				t.Errorf("claim of a running task: %v, want a conflict", err)
			}
			return nil
		}},
		{name: "a completes: b is promoted and the plan's first subtask created READY in the same commit", do: func() error {
			if _, err := s.FinishRun(ctx, models.RunEnd{RunID: runA.ID, Event: models.EventAgentCompleted,
				ExpectFrom: models.StatusInProgress, Outcome: "completed"}); err != nil {
				return err
			}
			_, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: ids["a"], Event: models.EventVerifyPassed, Actor: "test"})
			return err
		}, want: []store.ObservedTransition{
			{ProjectID: "p", From: models.StatusInProgress, To: models.StatusVerifying, Event: models.EventAgentCompleted},
			{ProjectID: "p", From: models.StatusVerifying, To: models.StatusCompleted, Event: models.EventVerifyPassed},
			{ProjectID: "p", From: models.StatusDefined, To: models.StatusReady, Event: models.EventDepsMet},
			{ProjectID: "p", From: models.StatusDefined, To: models.StatusReady, Event: models.EventDepsMet},
		}, runs: []store.ObservedRun{{ProjectID: "p", AgentID: "a1", Kind: models.RunWork, Outcome: "completed"}}},
		{name: "claim b 3s after, start it 2s later", do: func() (err error) {
			clock.Advance(3 * time.Second)
			if runB, _, err = s.ClaimTask(ctx, ids["b"], "a1"); err != nil {
				return err
			}
			clock.Advance(2 * time.Second)
			_, err = s.StartRun(ctx, runB.ID, 2, "")
			return err
		}, want: []store.ObservedTransition{
			{ProjectID: "p", From: models.StatusReady, To: models.StatusAssigned, Event: models.EventAssigned, QueueWait: 3 * time.Second},
			{ProjectID: "p", From: models.StatusAssigned, To: models.StatusInProgress, Event: models.EventAgentStarted,
				DependencyStart: 5 * time.Second},
		}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got, runs := rec.take()
		if len(got) != len(st.want) {
			t.Fatalf("%s: observed %+v, want %+v", st.name, got, st.want)
		}
		for i := range got {
			got[i].At = time.Time{}
			if got[i] != st.want[i] {
				t.Errorf("%s: transition %d is %+v, want %+v", st.name, i, got[i], st.want[i])
			}
		}
		if len(runs) != len(st.runs) || (len(runs) > 0 && runs[0] != st.runs[0]) {
			t.Errorf("%s: runs %+v, want %+v", st.name, runs, st.runs)
		}
	}
}

func TestMetricsReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clock := openClocked(t)
	storetest.Project(t, s, "p")
	limit := int64(1000)
	if _, err := s.CreateProject(ctx, models.Project{ID: "q", BudgetLimit: &limit}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RegisterAgent(ctx, models.Agent{ID: "a1", AgentType: "command", AgentSettings: models.AgentSettings{
		Command: "/bin/true", Profile: models.Profile{Model: "m1"}}}); err != nil {
		t.Fatal(err)
	}
	storetest.Agent(t, s, "a2")
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "x", Title: "x"}, models.BatchTask{LocalID: "y", Title: "y"})
	start := clock.Now()

	// x ran 10 s and ended; y runs since 4 s.
	run, _, err := s.ClaimTask(ctx, ids["x"], "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartRun(ctx, run.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordRunUsage(ctx, run.ID, models.TokenUsage{Input: 100, Output: 20, CacheRead: 3, CacheWrite: 4}); err != nil {
		t.Fatal(err)
	}
	cost := 0.5
	if err := s.RecordRunResult(ctx, run.ID, &cost, nil); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentFailed,
		ExpectFrom: models.StatusInProgress, Outcome: "failed"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ClaimTask(ctx, ids["y"], "a2"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(4 * time.Second)

	counts, err := s.TaskStatusCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// x FAILED at +10 s, y ASSIGNED at +10 s.
	wantCounts := []store.StatusCount{
		{ProjectID: "p", Status: models.StatusAssigned, Count: 1, Oldest: start.Add(10 * time.Second)},
		{ProjectID: "p", Status: models.StatusFailed, Count: 1, Oldest: start.Add(10 * time.Second)},
	}
	if len(counts) != len(wantCounts) {
		t.Fatalf("task status counts %+v, want %+v", counts, wantCounts)
	}
	for i := range counts {
		if counts[i] != wantCounts[i] {
			t.Errorf("task status count %d: %+v, want %+v", i, counts[i], wantCounts[i])
		}
	}

	states, err := s.AgentStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantStates := map[string]models.AgentState{"a1": models.AgentIdle, "a2": models.AgentStarting}
	if len(states) != len(wantStates) {
		t.Errorf("agent states %+v, want %v", states, wantStates)
	}
	for _, a := range states {
		if wantStates[a.ID] != a.State || a.Paused {
			t.Errorf("agent %s: %s (paused %v), want %s", a.ID, a.State, a.Paused, wantStates[a.ID])
		}
	}

	usage, err := s.RunUsageSince(ctx, start.Add(2*time.Second), clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := []store.RunUsage{
		{ProjectID: "p", AgentID: "a1", Model: "m1", Runs: 1, Tokens: models.RunTokens{Input: 100, Output: 20, CacheRead: 3, CacheWrite: 4},
			CostUSD: 0.5, Busy: 8 * time.Second},
		{ProjectID: "p", AgentID: "a2", Runs: 1, Busy: 4 * time.Second},
	}
	if len(usage) != len(want) {
		t.Fatalf("run usage %+v, want %+v", usage, want)
	}
	for i := range want {
		if usage[i] != want[i] {
			t.Errorf("run usage %d: %+v, want %+v", i, usage[i], want[i])
		}
	}
	if later, err := s.RunUsageSince(ctx, clock.Now(), clock.Now()); err != nil || len(later) != 1 || later[0].AgentID != "a2" {
		t.Errorf("usage of a window after x ended: %+v, %v; want only the open run of a2", later, err)
	}

	tokens, err := s.ProjectTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 2 || tokens[0].ProjectID != "p" || tokens[0].Total != 127 || tokens[0].Limit != nil ||
		tokens[1].ProjectID != "q" || tokens[1].Limit == nil || *tokens[1].Limit != limit {
		t.Errorf("project tokens %+v, want p 127 unlimited and q 0 of %d", tokens, limit)
	}

	if err := s.Notify(ctx, "k1", models.Notice{Kind: "test", ProjectID: "p", Payload: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	backlog, err := s.OutboxBacklog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if backlog.Count == 0 || backlog.Oldest.IsZero() || backlog.Oldest.After(clock.Now()) {
		t.Errorf("outbox backlog %+v, want the notices written", backlog)
	}

	db, wal, err := s.FileSizes()
	if err != nil {
		t.Fatal(err)
	}
	if db <= 0 || wal < 0 {
		t.Errorf("file sizes db %d wal %d", db, wal)
	}
}

// TestMetricsReadsUseIndexes: each read of a scrape goes through its index
// (or reads a small table), so that a scrape does not grow with history.
func TestMetricsReadsUseIndexes(t *testing.T) {
	t.Parallel()
	s, _ := openClocked(t)
	qs := store.MetricsQueriesForTest()
	tests := []struct {
		name string
		args []any
		want []string
	}{
		{"taskStatusCounts", nil, []string{"COVERING INDEX tasks_project_status", "INDEX tasks_status (status=?)"}},
		{"outboxBacklog", nil, []string{"INDEX outbox_undelivered"}},
		{"runUsage", []any{int64(1), int64(2)}, []string{"INDEX task_runs_ended (ended_at>?)", "INDEX task_runs_open"}},
		{"agentStates", nil, nil},
		{"projectTokens", nil, nil},
		{"runnerActivity", nil, []string{"INDEX task_runs_open"}},
	}
	for _, tt := range tests {
		plan, err := store.QueryPlanForTest(s, qs[tt.name], tt.args...)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		for _, w := range tt.want {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: plan lacks %q:\n%s", tt.name, w, plan)
			}
		}
		if strings.Contains(plan, "SCAN tasks\n") || strings.Contains(plan, "SCAN task_runs\n") || strings.Contains(plan, "SCAN outbox\n") {
			t.Errorf("%s reads a whole table:\n%s", tt.name, plan)
		}
	}
}
