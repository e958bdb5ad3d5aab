package discord

import (
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestTaskViewSaysWhyATaskWaits: the task view shows a READY task's
// waiting reason.
func TestTaskViewSaysWhyATaskWaits(t *testing.T) {
	t.Parallel()
	d := models.TaskDetail{Task: models.Task{ID: "bold-orbit", ProjectID: "web", Title: "t", Status: models.StatusReady,
		WaitingCode: models.WaitingNoAgent, WaitingReason: "no agent works on project web"}}
	if got := renderTaskDetail(d); !strings.Contains(got, "waiting: no agent works on project web") {
		t.Fatalf("task view:\n%s", got)
	}
}
