package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// cancelAfterDeliver runs the real Deliver, then calls after: a person's
// cancel that arrives once the merge was published.
type cancelAfterDeliver struct {
	Workspaces
	after func(t models.Task)
}

func (c cancelAfterDeliver) Deliver(ctx context.Context, p models.Project, t models.Task, src string) (models.Delivery, error) {
	d, err := c.Workspaces.Deliver(ctx, p, t, src)
	if err == nil && c.after != nil {
		c.after(t)
	}
	return d, err
}

// A cancel that arrives while an approved change is being merged is
// refused: the change lands, the task completes and its dependent goes on.
// (Accepted, it left the work on main and the task BLOCKED "cancelled",
// its dependents blocked by the cascade.)
func TestCancelDuringApprovedMergeIsRefused(t *testing.T) {
	e := newE2E(t)
	origin := bareOrigin(t)
	e.project("web", cloneRepo(origin), models.ProjectSettings{PRMode: models.PRNever})
	e.cli("claude-1", "claude", "web")
	ids := e.add("web", models.BatchTask{LocalID: "t", Title: "Needs a person", RequiresApproval: true,
		Description: fmt.Sprintf(work, "gated.txt", "gated", "gated", "wrote it")},
		models.BatchTask{LocalID: "d", Title: "After it", Dependencies: []models.BatchDependency{{ID: "t"}}})
	cancelErr := errors.New("no cancel was tried")
	e.o.ws = cancelAfterDeliver{Workspaces: e.o.ws, after: func(tk models.Task) {
		_, cancelErr = e.o.ApplyAdminEvent(context.Background(), models.TransitionRequest{TaskID: tk.ID,
			Event: models.EventAdminCancel, Actor: "bob"})
	}}
	e.start()
	e.waitStatus(ids["t"], models.StatusAwaitingApproval)
	res, err := e.o.Approve(context.Background(), ids["t"], "ana", "")
	if err != nil || res.To != models.StatusCompleted {
		t.Fatalf("approve: %+v, %v", res, err)
	}
	wantMergingRefusal(t, cancelErr)
	if tk := e.task(ids["t"]); tk.Status != models.StatusCompleted || !onMain(t, origin, "gated.txt") {
		t.Fatalf("the task is %s (%q); its change on main: %v", tk.Status, tk.StatusReason, onMain(t, origin, "gated.txt"))
	}
	e.waitFor("the dependent to go on", func() bool { return e.task(ids["d"]).Status != models.StatusDefined })
}

// The same for a task without approval: a cancel during its verification's
// merge is refused and the task completes.
func TestCancelDuringVerifyMergeIsRefused(t *testing.T) {
	e := newE2E(t)
	origin := bareOrigin(t)
	e.project("web", cloneRepo(origin), models.ProjectSettings{PRMode: models.PRNever})
	e.cli("claude-1", "claude", "web")
	ids := e.add("web", models.BatchTask{LocalID: "t", Title: "Plain",
		Description: fmt.Sprintf(work, "plain.txt", "plain", "plain", "wrote it")},
		models.BatchTask{LocalID: "d", Title: "After it", Dependencies: []models.BatchDependency{{ID: "t"}}})
	var cancelErr error = errors.New("no cancel was tried")
	e.o.ws = cancelAfterDeliver{Workspaces: e.o.ws, after: func(tk models.Task) {
		_, cancelErr = e.o.ApplyAdminEvent(context.Background(), models.TransitionRequest{TaskID: tk.ID,
			Event: models.EventAdminCancel, Actor: "bob"})
	}}
	e.start()
	e.waitFor("the task to end", func() bool {
		st := e.task(ids["t"]).Status
		return st == models.StatusCompleted || st == models.StatusBlocked
	})
	wantMergingRefusal(t, cancelErr)
	if tk := e.task(ids["t"]); tk.Status != models.StatusCompleted {
		t.Fatalf("the task is %s (%q)", tk.Status, tk.StatusReason)
	}
	if !onMain(t, origin, "plain.txt") {
		t.Fatal("the completed task's change is not on main")
	}
}

// wantMergingRefusal checks that err refuses a cancel because the task's
// change is being merged.
func wantMergingRefusal(t *testing.T, err error) {
	t.Helper()
	if models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), "being merged") {
		t.Fatalf("the cancel during the merge answered %v, want a conflict saying the change is being merged", err)
	}
}
