package models

import (
	"testing"
	"time"
)

// TestBatchTaskTask: an entry becomes a task with its own fields, the
// batch's project and creator when it names none, the defaults of a new
// task and its place in a workflow run.
func TestBatchTaskTask(t *testing.T) {
	t.Parallel()
	prio, retries := 7, 0
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name        string
		entry       BatchTask
		project, by string
		check       func(t *testing.T, got Task)
	}{
		{"defaults", BatchTask{Name: "n"}, "p", "alice", func(t *testing.T, got Task) {
			if got.Title != "n" || got.ProjectID != "p" || got.CreatedBy != "alice" || got.Priority != DefaultPriority ||
				got.MaxRetries != DefaultMaxRetries || got.Status != StatusDefined || got.VerificationType != VerifyAutoTest {
				t.Errorf("task = %+v", got)
			}
			if got.ParentTaskID != nil || got.RepoID != nil || got.PlanSource != nil || got.RunID != "" {
				t.Errorf("unset references set: %+v", got)
			}
		}},
		{"the entry's own values win", BatchTask{Title: "t", ProjectID: "q", CreatedBy: "bob", Priority: &prio,
			MaxRetries: &retries, VerificationType: VerifyHuman, ParentTaskID: "T1", RepoID: "r", PlanSource: "plan",
			RequiresApproval: true, IsPlanSubtask: true, NotBefore: &at, Timeout: Duration(time.Hour), AgentType: "claude"},
			"p", "alice", func(t *testing.T, got Task) {
				if got.ProjectID != "q" || got.CreatedBy != "bob" || got.Priority != 7 || got.MaxRetries != 0 ||
					got.VerificationType != VerifyHuman || !got.RequiresApproval || !got.IsPlanSubtask ||
					got.NotBefore == nil || !got.NotBefore.Equal(at) || got.Timeout != Duration(time.Hour) || got.AgentType != "claude" {
					t.Errorf("task = %+v", got)
				}
				if got.ParentTaskID == nil || *got.ParentTaskID != "T1" || got.RepoID == nil || *got.RepoID != "r" ||
					got.PlanSource == nil || *got.PlanSource != "plan" {
					t.Errorf("references = %v %v %v", got.ParentTaskID, got.RepoID, got.PlanSource)
				}
			}},
		{"a workflow place", BatchTask{Title: "t", Workflow: &TaskPlace{RunID: "R", Step: "s", Index: 2, Count: 3, Concurrency: 1}},
			"p", "", func(t *testing.T, got Task) {
				if got.RunID != "R" || got.StepName != "s" || got.ParallelIndex != 2 || got.ParallelCount != 3 || got.StepConcurrency != 1 {
					t.Errorf("task = %+v", got)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.check(t, tc.entry.Task(tc.project, tc.by))
		})
	}
}
