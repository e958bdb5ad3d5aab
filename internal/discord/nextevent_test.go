package discord

import (
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestTaskViewSaysWhatHappensNext: the task view (/task show) of a FAILED
// task says when it is retried, or that it blocks with no retry left, and
// a PAUSED task's when it resumes, against testdata/task-view.golden; a
// task of another status has no such line.
func TestTaskViewSaysWhatHappensNext(t *testing.T) {
	t.Parallel()
	failed := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	resume := failed.Add(time.Hour)
	tasks := []models.Task{
		{ID: "dry-stone", ProjectID: "web", Title: "Flaky build", Status: models.StatusFailed, VerificationType: models.VerifyAutoTest,
			RetryCount: 1, MaxRetries: 3, StatusReason: "go test ./... failed", UpdatedAt: failed},
		{ID: "frail-leaf", ProjectID: "web", Title: "Out of retries", Status: models.StatusFailed, VerificationType: models.VerifyAutoTest,
			RetryCount: 3, MaxRetries: 3, StatusReason: "go vet failed", UpdatedAt: failed},
		{ID: "eager-fox", ProjectID: "web", Title: "Rate limited", Status: models.StatusPaused, VerificationType: models.VerifyAutoTest,
			ResumeAfter: &resume, StatusReason: "rate limited until 2026-03-01T13:00:00Z", UpdatedAt: failed},
		{ID: "calm-river", ProjectID: "web", Title: "Ready", Status: models.StatusReady, VerificationType: models.VerifyAutoTest,
			UpdatedAt: failed},
	}
	var out strings.Builder
	for _, task := range tasks {
		// What the service adds to a task it reads.
		task.SetNextEvent(30*time.Second, 30*time.Minute)
		got := renderTaskDetail(models.TaskDetail{Task: task})
		if strings.Contains(got, "next: ") != (task.Status != models.StatusReady) {
			t.Errorf("%s: the next line is missing or extra:\n%s", task.ID, got)
		}
		out.WriteString("--- /task show " + task.ID + "\n" + got + "\n\n")
	}
	golden(t, "testdata/task-view.golden", out.String())
}
