package models_test

import (
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestWorkflowRunStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status       models.WorkflowRunStatus
		valid, ended bool
	}{
		{models.RunPending, true, false},
		{models.RunRunning, true, false},
		{models.RunSuccess, true, true},
		{models.RunFailed, true, true},
		{models.RunCancelled, true, true},
		{"", false, false},
		{"PENDING", false, false},
		{"done", false, false},
	}
	for _, tt := range tests {
		if got := tt.status.Valid(); got != tt.valid {
			t.Errorf("%q.Valid() = %v, want %v", tt.status, got, tt.valid)
		}
		if got := tt.status.Ended(); got != tt.ended {
			t.Errorf("%q.Ended() = %v, want %v", tt.status, got, tt.ended)
		}
	}
	if len(models.WorkflowRunStatuses) != 5 {
		t.Errorf("WorkflowRunStatuses = %v, want the five statuses", models.WorkflowRunStatuses)
	}
}

func TestWorkflowTrigger(t *testing.T) {
	t.Parallel()
	tests := []struct {
		trigger models.WorkflowTrigger
		valid   bool
	}{
		{models.TriggerByHand, true},
		{models.TriggerBySchedule, true},
		{"manual", true},
		{"", false},
		{"cron", false},
		{"Manual", false},
	}
	for _, tt := range tests {
		if got := tt.trigger.Valid(); got != tt.valid {
			t.Errorf("%q.Valid() = %v, want %v", tt.trigger, got, tt.valid)
		}
	}
}
