package store_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestOpenRunsByRunner: the runs in progress of each runner's agents are
// counted by runner (a run that ended, a daemon agent's run and a runner
// without one are not), and RunnerActivity reads them with each runner's
// state and last sighting.
func TestOpenRunsByRunner(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := storetest.Open(t, storetest.WithClock(clocktest.New(at)))
	ctx := context.Background()
	for _, name := range []string{"r1", "r2", "r3"} {
		createRunner(t, s, models.Runner{Name: name}, "aqr_"+name)
	}
	storetest.Project(t, s, "web")
	storetest.Agent(t, s, "local")
	claim := func(agent string) models.Run {
		t.Helper()
		run, _, err := s.ClaimTask(ctx, storetest.Task(t, s, "web", "work of "+agent), agent)
		if err != nil {
			t.Fatalf("claim for %s: %v", agent, err)
		}
		return run
	}

	if got, err := s.OpenRunsByRunner(ctx); err != nil || len(got) != 0 {
		t.Fatalf("open runs before any: %v %v", got, err)
	}
	claim(runnerAgent(t, s, "r1", "a"))
	claim(runnerAgent(t, s, "r1", "b"))
	ended := claim(runnerAgent(t, s, "r2", "a"))
	claim("local")
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: ended.ID, Event: models.EventRecovery,
		Outcome: models.RunOutcomeRecovered}); err != nil {
		t.Fatal(err)
	}
	got, err := s.OpenRunsByRunner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"r1": 2}; !maps.Equal(got, want) {
		t.Errorf("open runs by runner %v, want %v", got, want)
	}

	seen := at.Add(-time.Minute)
	if err := s.TouchRunner(ctx, "r2", seen, "1.0", "127.0.0.2:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetRunnerState(ctx, "r2", models.RunnerDraining); err != nil {
		t.Fatal(err)
	}
	acts, err := s.RunnerActivity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.RunnerActivity{{Name: "r1", State: models.RunnerActive, Runs: 2},
		{Name: "r2", State: models.RunnerDraining, LastSeen: seen}, {Name: "r3", State: models.RunnerActive}}
	if len(acts) != len(want) {
		t.Fatalf("runner activity %+v, want %+v", acts, want)
	}
	for i, w := range want {
		if a := acts[i]; a.Name != w.Name || a.State != w.State || a.Runs != w.Runs || !a.LastSeen.Equal(w.LastSeen) {
			t.Errorf("runner activity [%d] %+v, want %+v", i, a, w)
		}
	}
}
