package models_test

import (
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestHookRunStatusFinal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status models.HookRunStatus
		final  bool
	}{
		{models.HookRunRunning, false},
		{models.HookRunCompleted, true},
		{models.HookRunFailed, true},
		{models.HookRunSkipped, true},
		{"", false},
		{"finished", false},
	}
	for _, tt := range tests {
		if got := tt.status.Final(); got != tt.final {
			t.Errorf("%q.Final() = %v, want %v", tt.status, got, tt.final)
		}
	}
	if len(models.HookRunStatuses) != 4 {
		t.Errorf("HookRunStatuses = %v, want the four statuses", models.HookRunStatuses)
	}
}

func TestHookTriggerReason(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	tests := []struct {
		name   string
		reason models.HookTriggerReason
		want   string
		by     string
		manual bool
	}{
		{"schedule", models.ScheduleReason(at, 0), "schedule 2026-11-24T09:00:00Z", "", false},
		{"catch-up", models.ScheduleReason(at, 2),
			"schedule 2026-11-24T09:00:00Z (catch-up after downtime: 2 earlier scheduled times missed)", "", false},
		{"event", models.EventReason("task.completed", "brave-otter"), "event task.completed of task brave-otter", "", false},
		{"manual", models.FiredByReason("discord:1234"), "fired by discord:1234", "discord:1234", true},
		{"manual, nobody named", models.FiredByReason("someone"), "fired by someone", "someone", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if string(tt.reason) != tt.want {
				t.Errorf("reason %q, want %q", tt.reason, tt.want)
			}
			by, ok := tt.reason.FiredBy()
			if by != tt.by || ok != tt.manual {
				t.Errorf("FiredBy() = %q, %v; want %q, %v", by, ok, tt.by, tt.manual)
			}
		})
	}
}
