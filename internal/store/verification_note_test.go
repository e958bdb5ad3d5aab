package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestMigrationSplitsVerificationDetail opens a database an older
// agentqueued left (schema 23), whose verifications packed their note in
// one detail ("EVENT\nreason" or "actor\ntext" by phase), and checks that
// each reads back with its event, actor and text apart, and the same
// detail as before.
func TestMigrationSplitsVerificationDetail(t *testing.T) {
	t.Parallel()
	cases := []struct {
		task   string
		status models.TaskStatus
		phase  models.VerificationPhase
		detail string
		want   models.VerificationNote
	}{
		{"checks", models.StatusVerifying, models.PhaseChecks, "", models.VerificationNote{}},
		{"review", models.StatusVerifying, models.PhaseReview, "waiting for the reviewer qa (BUSY)",
			models.VerificationNote{Text: "waiting for the reviewer qa (BUSY)"}},
		{"human", models.StatusVerifying, models.PhaseHuman, "waiting for a person to approve or reject",
			models.VerificationNote{Text: "waiting for a person to approve or reject"}},
		{"deliver", models.StatusVerifying, models.PhaseDeliver, "VERIFY_PASSED\n2 test command(s) passed",
			models.VerificationNote{Event: models.EventVerifyPassed, Text: "2 test command(s) passed"}},
		{"deliver-human", models.StatusVerifying, models.PhaseDeliver, "HUMAN_APPROVED\napproved by ana: fine\nreally",
			models.VerificationNote{Event: models.EventHumanApproved, Text: "approved by ana: fine\nreally"}},
		{"landing-verifying", models.StatusVerifying, models.PhaseLanding, "VERIFY_PASSED\nno test commands",
			models.VerificationNote{Event: models.EventVerifyPassed, Text: "no test commands"}},
		{"approval", models.StatusAwaitingApproval, models.PhaseApproval, "no test commands",
			models.VerificationNote{Text: "no test commands"}},
		{"approved", models.StatusAwaitingApproval, models.PhaseApproved, "ana\nship it",
			models.VerificationNote{Actor: "ana", Text: "ship it"}},
		{"approved-no-note", models.StatusAwaitingApproval, models.PhaseApproved, "ana\n",
			models.VerificationNote{Actor: "ana"}},
		{"rejected", models.StatusVerifying, models.PhaseRejected, "bo\nnot like this",
			models.VerificationNote{Actor: "bo", Text: "not like this"}},
		{"landing-approved", models.StatusAwaitingApproval, models.PhaseLanding, "ana\nship it",
			models.VerificationNote{Actor: "ana", Text: "ship it"}},
	}
	path := filepath.Join(t.TempDir(), "old.db")
	if err := store.MigrateForTest(path, 23); err != nil {
		t.Fatal(err)
	}
	var sql strings.Builder
	sql.WriteString(`INSERT INTO projects (id, name, credit_weight, max_concurrent_agents, status, created_at, updated_at)
		VALUES ('p', 'p', 1, 1, 'ACTIVE', 0, 0);`)
	for _, c := range cases {
		fmt.Fprintf(&sql, `INSERT INTO tasks (id, project_id, title, status, verification_type, created_at, updated_at)
			VALUES ('%s', 'p', 't', '%s', 'AUTO_TEST', 0, 0);
			INSERT INTO verifications (task_id, attempt, phase, source, detail, updated_at)
			VALUES ('%s', 1, '%s', '/w', '%s', 0);`, c.task, c.status, c.task, c.phase, c.detail)
	}
	if err := store.ExecAtForTest(path, sql.String()); err != nil {
		t.Fatal(err)
	}
	s := storetest.OpenAt(t, path)
	for _, c := range cases {
		t.Run(c.task, func(t *testing.T) {
			t.Parallel()
			v, ok, err := s.GetVerification(context.Background(), c.task)
			if err != nil || !ok {
				t.Fatalf("verification: %v %v", ok, err)
			}
			if v.Phase != c.phase || v.Source != "/w" || v.VerificationNote != c.want {
				t.Fatalf("after the migration: phase %s source %q note %+v, want %s /w %+v", v.Phase, v.Source,
					v.VerificationNote, c.phase, c.want)
			}
			if v.Detail() != c.detail {
				t.Fatalf("detail %q, want %q as before", v.Detail(), c.detail)
			}
		})
	}
}

// TestVerificationNoteRoundTrips: what SetVerification and the switches
// write reads back field for field.
func TestVerificationNoteRoundTrips(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	storetest.Project(t, s, "web")
	id := storetest.Tasks(t, s, "web", models.BatchTask{LocalID: "t", Title: "T"})["t"]
	storetest.Apply(t, s, id, storetest.ToCompleted[:3]...) // VERIFYING
	deliver := models.VerificationNote{Event: models.EventHumanApproved, Text: "approved by ana"}
	if err := s.SetVerification(ctx, models.Verification{TaskID: id, Attempt: 1, Phase: models.PhaseDeliver, Source: "/w",
		VerificationNote: deliver}); err != nil {
		t.Fatal(err)
	}
	if v, _, err := s.GetVerification(ctx, id); err != nil || v.VerificationNote != deliver {
		t.Fatalf("after SetVerification: %+v %v", v, err)
	}
	rejected := models.VerificationNote{Actor: "bo", Text: "no"}
	if ok, err := s.SwitchVerification(ctx, id, 1, models.PhaseDeliver, models.PhaseRejected, rejected); err != nil || !ok {
		t.Fatalf("switch: %v %v", ok, err)
	}
	vs, err := s.Verifications(ctx, models.PhaseRejected)
	if err != nil || len(vs) != 1 || vs[0].VerificationNote != rejected || vs[0].Source != "/w" {
		t.Fatalf("after SwitchVerification: %+v %v", vs, err)
	}
}
