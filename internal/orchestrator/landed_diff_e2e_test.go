package orchestrator

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// A landed task's diff is the change its merge brought to main, though its
// branch was deleted once merged and main moved on; a landed task that
// changed nothing changes nothing.
func TestE2ELandedTaskDiffIsItsMerge(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	origin := bareOrigin(t)
	e.project("web", cloneRepo(origin), models.ProjectSettings{})
	e.cli("claude-1", "claude", "web")
	ids := e.add("web",
		models.BatchTask{LocalID: "a", Title: "Land it", Description: fmt.Sprintf(work, "landed.txt", "landed", "add landed", "wrote it")},
		models.BatchTask{LocalID: "b", Title: "Then more", Description: fmt.Sprintf(work, "more.txt", "more", "add more", "wrote more"),
			Dependencies: []models.BatchDependency{{ID: "a"}}},
		models.BatchTask{LocalID: "n", Title: "Nothing", Description: "@complete-no-changes nothing to change"})
	e.start()
	e.waitStatus(ids["a"], models.StatusCompleted)
	e.waitStatus(ids["b"], models.StatusCompleted)
	e.waitStatus(ids["n"], models.StatusCompleted)
	ctx := context.Background()
	diff, err := e.o.TaskDiff(ctx, ids["a"])
	if err != nil || !strings.Contains(diff, "+landed") || !strings.Contains(diff, "landed.txt") || strings.Contains(diff, "more.txt") {
		t.Fatalf("diff of the landed task: %q %v", diff, err)
	}
	if diff, err := e.o.TaskDiff(ctx, ids["n"]); err != nil || diff != "" {
		t.Fatalf("diff of a task that landed nothing: %q %v", diff, err)
	}
}
