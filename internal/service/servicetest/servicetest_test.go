package servicetest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/hooks"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestAWorkedTaskIsDiffedAndApprovedThroughTheRealParts: a task worked in
// a real checkout shows its change and is approved through the service,
// its orchestrator and its lander.
func TestAWorkedTaskIsDiffedAndApprovedThroughTheRealParts(t *testing.T) {
	t.Parallel()
	k := servicetest.New(t)
	ctx := context.Background()
	storetest.ProjectWith(t, k.Store, models.Project{ID: "web", Repo: servicetest.Origin(t)})
	storetest.Agent(t, k.Store, "a1", "web")
	id := storetest.Task(t, k.Store, "web", "Ship it")
	if run := k.Work(id, "a1", map[string]string{"ship.txt": "shipped\n"}); run.CheckoutPath == "" {
		t.Fatalf("run %+v has no checkout", run)
	}
	storetest.Apply(t, k.Store, id, models.EventApprovalRequested)
	diff, err := k.Service.TaskDiff(ctx, id)
	if err != nil || !strings.Contains(diff, "+++ b/ship.txt") || !strings.Contains(diff, "+shipped") {
		t.Fatalf("diff %q, %v", diff, err)
	}
	res, err := k.Service.ApproveTask(ctx, id, "ana", "fine")
	if err != nil || res.To != models.StatusCompleted {
		t.Fatalf("approve: %+v, %v", res, err)
	}
}

// TestUseHooksSwapsTheServicesEngine: the service goes through the engine
// a test put in last.
func TestUseHooksSwapsTheServicesEngine(t *testing.T) {
	t.Parallel()
	k := servicetest.New(t)
	first := k.Hooks()
	second := k.UseHooks(hooks.Config{MaxRunning: 1})
	if first == nil || second == first || k.Hooks() != second {
		t.Fatalf("engines %p, %p; the service's %p", first, second, k.Hooks())
	}
	if k.Workflows() == nil {
		t.Fatal("no workflow engine")
	}
}
