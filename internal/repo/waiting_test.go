package repo_test

import (
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// The branch of a task that waits (for a person's approval, or a slow
// verification) stays reachable after its agent's checkout has moved on to
// another task that was merged: its diff is shown and it is delivered from
// that checkout.
func TestWaitingBranchSurvivesTheCheckoutMovingOn(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{ID: "web", SourceType: models.RepoClone, URL: origin, DefaultBranch: "main"})
	a, o := task("t-one", "One"), task("t-two", "Two")
	ws := work(t, w, "ag", p, a, map[string]string{"a.txt": "a\n"})
	stage(t, w, p, a, ws.Dir)
	if err := w.Cleanup(ctx, p, a, "", false); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Diff(ctx, p, a, ws.Dir); err != nil {
		t.Fatalf("diff before: %v", err)
	}
	ws2 := work(t, w, "ag", p, o, map[string]string{"b.txt": "b\n"})
	stage(t, w, p, o, ws2.Dir)
	if _, err := w.Diff(ctx, p, a, ws.Dir); err != nil {
		t.Fatalf("diff after prepare of the second: %v", err)
	}
	d := deliver(t, w, p, o, ws2.Dir)
	if err := w.Cleanup(ctx, p, o, ws2.Dir, d.Merged); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Diff(ctx, p, a, ws.Dir); err != nil {
		t.Fatalf("diff after the second merged: %v", err)
	}
	if _, err := w.Deliver(ctx, p, a, ws.Dir); err != nil {
		t.Fatalf("deliver after: %v", err)
	}
}
