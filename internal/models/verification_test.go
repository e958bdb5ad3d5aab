package models_test

import (
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestVerificationPhaseValid: the phases a verification row may hold are
// exactly the named ones.
func TestVerificationPhaseValid(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		phase models.VerificationPhase
		want  bool
	}{
		{models.PhaseChecks, true},
		{models.PhaseReview, true},
		{models.PhaseHuman, true},
		{models.PhaseDeliver, true},
		{models.PhaseApproval, true},
		{models.PhaseApproved, true},
		{models.PhaseRejected, true},
		{models.PhaseLanding, true},
		{"", false},
		{"CHECKS", false},
		{"merged", false},
	} {
		if got := c.phase.Valid(); got != c.want {
			t.Errorf("VerificationPhase(%q).Valid() = %v, want %v", c.phase, got, c.want)
		}
	}
}

// TestRunOutcomeValid: a run row's outcome is one of the named ones; an
// open run's empty outcome is none of them.
func TestRunOutcomeValid(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		outcome models.RunOutcome
		want    bool
	}{
		{models.RunOutcomeCompleted, true},
		{models.RunOutcomeFailed, true},
		{models.RunOutcomeStopped, true},
		{models.RunOutcomeTimeout, true},
		{models.RunOutcomeExecutionError, true},
		{models.RunOutcomePaused, true},
		{models.RunOutcomeRecovered, true},
		{models.RunOutcomeStageFailed, true},
		{models.RunOutcomeApproved, true},
		{models.RunOutcomeRejected, true},
		{models.RunOutcomeVerifyFailed, true},
		{models.RunOutcomeDeliverFailed, true},
		{"", false},
		{"running", false},
		{"succeeded", false},
	} {
		if got := c.outcome.Valid(); got != c.want {
			t.Errorf("RunOutcome(%q).Valid() = %v, want %v", c.outcome, got, c.want)
		}
	}
}
