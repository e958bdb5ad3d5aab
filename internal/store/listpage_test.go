package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// page gathers a listing two at a time through next, which returns a page
// after the cursor and the cursor of its last item.
func page[T any](t *testing.T, list func(after string) ([]T, error), id func(T) string) []string {
	t.Helper()
	var ids []string
	after := ""
	for range 100 {
		items, err := list(after)
		if err != nil {
			t.Fatalf("page after %q: %v", after, err)
		}
		for _, it := range items {
			ids = append(ids, id(it))
		}
		if len(items) < 2 {
			return ids
		}
		after = id(items[len(items)-1])
	}
	t.Fatal("the listing does not end")
	return nil
}

// TestKeysetPagingWithEqualTimes: items created at the same instant (the
// store's clock stands still here) are each listed exactly once, in the
// order of the full listing, when listed a page at a time.
func TestKeysetPagingWithEqualTimes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openClocked(t)
	storetest.Project(t, s, "web")

	t.Run("hook runs", func(t *testing.T) {
		h := mustHook(t, s, `{"project_id":"web","name":"Pager","trigger":{"type":"manual"}}`)
		for i := range 5 {
			if _, err := s.ClaimHookRun(ctx, models.HookClaim{HookID: h.ID, FireKey: fmt.Sprintf("manual:%d", i), Manual: true}); err != nil {
				t.Fatal(err)
			}
		}
		all, err := s.ListHookRuns(ctx, models.HookRunFilter{HookID: h.ID})
		if err != nil || len(all) != 5 {
			t.Fatalf("all runs: %d, %v", len(all), err)
		}
		want := make([]string, len(all))
		for i, r := range all {
			want[i] = r.ID
		}
		got := page(t, func(after string) ([]models.HookRun, error) {
			return s.ListHookRunsAfter(ctx, models.HookRunFilter{HookID: h.ID, Limit: 2}, after)
		}, func(r models.HookRun) string { return r.ID })
		if !slices.Equal(got, want) {
			t.Fatalf("paged %v, want %v", got, want)
		}
		if _, err := s.ListHookRunsAfter(ctx, models.HookRunFilter{}, "ghost"); models.ErrorCodeOf(err) != models.CodeInvalid {
			t.Fatalf("unknown cursor: %v", err)
		}
	})

	t.Run("workflow runs", func(t *testing.T) {
		saveFlow(t, s, "name: pager\nproject: web\nsteps:\n  - name: a\n    title: A\n")
		for i := range 5 {
			if _, _, err := s.StartWorkflowRun(ctx, models.RunRequest{Workflow: "pager", Trigger: "manual",
				TriggeredBy: "test", FireKey: fmt.Sprintf("manual:%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		all, err := s.ListWorkflowRuns(ctx, models.RunFilter{Workflow: "pager"})
		if err != nil || len(all) != 5 {
			t.Fatalf("all runs: %d, %v", len(all), err)
		}
		want := make([]string, len(all))
		for i, r := range all {
			want[i] = r.ID
		}
		got := page(t, func(after string) ([]models.WorkflowRun, error) {
			return s.ListWorkflowRunsAfter(ctx, models.RunFilter{Workflow: "pager", Limit: 2}, after)
		}, func(r models.WorkflowRun) string { return r.ID })
		if !slices.Equal(got, want) {
			t.Fatalf("paged %v, want %v", got, want)
		}
		if _, err := s.ListWorkflowRunsAfter(ctx, models.RunFilter{}, "ghost"); models.ErrorCodeOf(err) != models.CodeInvalid {
			t.Fatalf("unknown cursor: %v", err)
		}
	})

	t.Run("open questions", func(t *testing.T) {
		for i := range 5 {
			agentID := fmt.Sprintf("asker-%d", i)
			storetest.Agent(t, s, agentID)
			ids := storetest.Tasks(t, s, "web", models.BatchTask{LocalID: "q", Title: "Ask"})
			run, _, err := s.ClaimTask(ctx, ids["q"], agentID)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.StartRun(ctx, run.ID, 1, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := s.AskQuestion(ctx, run.ID, fmt.Sprintf("question %d?", i)); err != nil {
				t.Fatal(err)
			}
		}
		all, err := s.OpenQuestions(ctx)
		if err != nil || len(all) != 5 {
			t.Fatalf("open questions: %d, %v", len(all), err)
		}
		want := make([]string, len(all))
		for i, q := range all {
			want[i] = fmt.Sprint(q.ID)
		}
		got := page(t, func(after string) ([]models.Question, error) {
			var id int64
			if after != "" {
				if _, err := fmt.Sscan(after, &id); err != nil {
					return nil, err
				}
			}
			return s.OpenQuestionsPage(ctx, id, 2)
		}, func(q models.Question) string { return fmt.Sprint(q.ID) })
		if !slices.Equal(got, want) {
			t.Fatalf("paged %v, want %v", got, want)
		}
		if _, err := s.OpenQuestionsPage(ctx, 99999, 2); models.ErrorCodeOf(err) != models.CodeInvalid {
			t.Fatalf("unknown cursor: %v", err)
		}
	})
}

// saveFlow saves a workflow document through the store.
func saveFlow(t *testing.T, s *store.Store, doc string) {
	t.Helper()
	w, err := workflow.Parse("flow.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	w.Origin = models.WorkflowFromAPI
	if _, err := s.SaveWorkflow(context.Background(), w); err != nil {
		t.Fatal(err)
	}
}
