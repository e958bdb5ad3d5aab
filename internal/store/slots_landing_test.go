package store_test

import (
	"context"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestALandingThatWaitsHoldsNoSlot: a VERIFYING task whose work waits to
// land (a linked repository's checkout with local changes) waits for a
// person, like one waiting for approval: it holds no slot, while checks
// running or a merge under way do.
func TestALandingThatWaitsHoldsNoSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		phase models.VerificationPhase
		held  int
	}{
		{models.PhaseChecks, 1},
		{models.PhaseDeliver, 1},
		{models.PhaseHuman, 0},
		{models.PhaseLanding, 0},
	} {
		t.Run(string(c.phase), func(t *testing.T) {
			t.Parallel()
			s := storetest.Open(t)
			storetest.Project(t, s, "web")
			id := storetest.Tasks(t, s, "web", models.BatchTask{LocalID: "t", Title: "T"})["t"]
			storetest.Apply(t, s, id, storetest.ToCompleted[:3]...) // VERIFYING
			if err := s.SetVerification(ctx, models.Verification{TaskID: id, Attempt: 1, Phase: c.phase}); err != nil {
				t.Fatal(err)
			}
			got, err := s.SlotsHeld(ctx, "web")
			if err != nil {
				t.Fatal(err)
			}
			if got != c.held {
				t.Fatalf("phase %s: %d slots held, want %d", c.phase, got, c.held)
			}
		})
	}
}
