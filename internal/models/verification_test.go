package models_test

import (
	"encoding/json"
	"testing"
	"time"

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

// TestVerificationNoteDetail: the note shows as the one detail text it
// was stored as before it had fields, and JSON keeps that "detail".
func TestVerificationNoteDetail(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		phase  models.VerificationPhase
		note   models.VerificationNote
		detail string
	}{
		{"empty", models.PhaseChecks, models.VerificationNote{}, ""},
		{"waiting", models.PhaseReview, models.VerificationNote{Text: "waiting for the reviewer qa"}, "waiting for the reviewer qa"},
		{"deliver", models.PhaseDeliver, models.VerificationNote{Event: models.EventVerifyPassed, Text: "no test commands"},
			"VERIFY_PASSED\nno test commands"},
		{"approved", models.PhaseApproved, models.VerificationNote{Actor: "ana", Text: "ship it"}, "ana\nship it"},
		{"approved without a note", models.PhaseApproved, models.VerificationNote{Actor: "ana"}, "ana\n"},
		{"rejected", models.PhaseRejected, models.VerificationNote{Actor: "bo", Text: "no\nreally"}, "bo\nno\nreally"},
		{"landing verified", models.PhaseLanding, models.VerificationNote{Event: models.EventHumanApproved, Text: "approved by ana"},
			"HUMAN_APPROVED\napproved by ana"},
		{"landing approved", models.PhaseLanding, models.VerificationNote{Actor: "ana", Text: "ok"}, "ana\nok"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := c.note.Detail(); got != c.detail {
				t.Fatalf("Detail() = %q, want %q", got, c.detail)
			}
			if got := models.ParseVerificationNote(c.phase, c.detail); got != c.note {
				t.Fatalf("ParseVerificationNote(%s, %q) = %+v, want %+v", c.phase, c.detail, got, c.note)
			}
			v := models.Verification{TaskID: "t", Attempt: 2, Phase: c.phase, Source: "/w", VerificationNote: c.note,
				UpdatedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
			data, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			want := `{"task_id":"t","attempt":2,"phase":"` + string(c.phase) + `","source":"/w",`
			if c.detail != "" {
				d, _ := json.Marshal(c.detail)
				want += `"detail":` + string(d) + `,`
			}
			want += `"updated_at":"2026-03-01T12:00:00Z"}`
			if string(data) != want {
				t.Fatalf("JSON %s, want %s", data, want)
			}
			var back models.Verification
			if err := json.Unmarshal(data, &back); err != nil || back != v {
				t.Fatalf("JSON read back as %+v (%v), want %+v", back, err, v)
			}
		})
	}
}
