package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestOverviewCountsOnlyWorkAsWorking: the overview counts as "agents
// working" the tasks an agent or a process of the daemon works on (the
// tasks holding a slot) and as "waiting to land" the VERIFYING and
// AWAITING_APPROVAL tasks nobody works on, so that idle agents are never
// shown running work that waits for a person; a question whose run ended
// is neither. Its desk is Desk's.
func TestOverviewCountsOnlyWorkAsWorking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := storetest.Open(t, storetest.WithClock(clock))
	for _, p := range []string{"web", "docs"} {
		if _, err := s.CreateProject(ctx, models.Project{ID: p}); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []string{"a", "b", "c"} {
		storetest.Agent(t, s, a)
	}
	ids := storetest.Tasks(t, s, "web",
		models.BatchTask{LocalID: "work", Title: "Works"},
		models.BatchTask{LocalID: "asks", Title: "Asks and waits"},
		models.BatchTask{LocalID: "asked", Title: "Asked before a restart"},
		models.BatchTask{LocalID: "checks", Title: "Checks run"},
		models.BatchTask{LocalID: "human", Title: "A person verifies"},
		models.BatchTask{LocalID: "review", Title: "Waits for its reviewer"})
	docs := storetest.Tasks(t, s, "docs", models.BatchTask{LocalID: "land", Title: "Lands"})
	run := func(id, agent string) models.Run {
		t.Helper()
		r, _, err := s.ClaimTask(ctx, id, agent)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.StartRun(ctx, r.ID, 1, ""); err != nil {
			t.Fatal(err)
		}
		return r
	}
	verify := func(id string, phase models.VerificationPhase) {
		t.Helper()
		r := run(id, "a")
		if _, err := s.FinishRun(ctx, models.RunEnd{RunID: r.ID, Event: models.EventAgentCompleted, ExpectFrom: models.StatusInProgress,
			Outcome: models.RunOutcomeCompleted, Verification: &models.Verification{TaskID: id, Attempt: 1, Phase: phase}}); err != nil {
			t.Fatal(err)
		}
	}
	verify(ids["checks"], models.PhaseChecks)
	verify(ids["human"], models.PhaseHuman)
	verify(ids["review"], models.PhaseReview)
	verify(docs["land"], models.PhaseLanding)
	asked := run(ids["asked"], "a")
	if _, err := s.AskQuestionWith(ctx, asked.ID, models.Ask{Question: "Which database?"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: asked.ID, Event: models.EventRecovery, Outcome: models.RunOutcomeRecovered}); err != nil {
		t.Fatal(err)
	}
	asks := run(ids["asks"], "b")
	if _, err := s.AskQuestionWith(ctx, asks.ID, models.Ask{Question: "Which port?"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	run(ids["work"], "c")

	o, err := s.Overview(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  models.Activity
		want models.Activity
	}{
		// work, asks (its run waits for the answer), checks; human and review.
		{"web", o.ProjectActivity["web"], models.Activity{AgentsWorking: 3, WaitingToLand: 2}},
		{"docs", o.ProjectActivity["docs"], models.Activity{WaitingToLand: 1}},
		{"all", o.Activity, models.Activity{AgentsWorking: 3, WaitingToLand: 3}},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: activity %+v, want %+v", tt.name, tt.got, tt.want)
		}
	}
	d, err := s.Desk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Desk) != len(d.Items) || len(o.Desk) == 0 {
		t.Fatalf("overview desk %+v, want Desk's %+v", o.Desk, d.Items)
	}
	for i := range d.Items {
		if o.Desk[i].Key != d.Items[i].Key {
			t.Errorf("overview desk item %d is %s, Desk's %s", i, o.Desk[i].Key, d.Items[i].Key)
		}
	}
}
