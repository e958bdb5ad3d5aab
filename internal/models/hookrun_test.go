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
		run    models.HookRun
		reason models.HookTriggerReason
		detail string
		by     string
		manual bool
	}{
		{"periodic", models.HookRun{TriggerReason: models.ScheduleTrigger(models.TriggerPeriodic), TriggerDetail: models.ScheduleDetail(at, 0)},
			"periodic", "schedule 2026-11-24T09:00:00Z", "", false},
		{"cron catch-up", models.HookRun{TriggerReason: models.ScheduleTrigger(models.TriggerCron), TriggerDetail: models.ScheduleDetail(at, 2)},
			"cron", "schedule 2026-11-24T09:00:00Z (catch-up after downtime: 2 earlier scheduled times missed)", "", false},
		{"event", models.HookRun{TriggerReason: models.EventTrigger("task.completed"),
			TriggerDetail: models.EventDetail("task.completed", "brave-otter")},
			"event:task.completed", "event task.completed of task brave-otter", "", false},
		{"manual", models.HookRun{TriggerReason: models.TriggerReasonManual, TriggerDetail: models.FiredByDetail("discord:1234")},
			"manual", "fired by discord:1234", "discord:1234", true},
		{"manual, nobody named", models.HookRun{TriggerReason: models.TriggerReasonManual, TriggerDetail: models.FiredByDetail("someone")},
			"manual", "fired by someone", "someone", true},
		{"a detail that only reads like a manual one", models.HookRun{TriggerReason: models.TriggerReasonPeriodic, TriggerDetail: "fired by x"},
			"periodic", "fired by x", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.run.TriggerReason != tt.reason || tt.run.TriggerDetail != tt.detail {
				t.Errorf("reason %q, detail %q; want %q, %q", tt.run.TriggerReason, tt.run.TriggerDetail, tt.reason, tt.detail)
			}
			by, ok := tt.run.FiredBy()
			if by != tt.by || ok != tt.manual {
				t.Errorf("FiredBy() = %q, %v; want %q, %v", by, ok, tt.by, tt.manual)
			}
		})
	}
}
