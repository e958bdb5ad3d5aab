package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// TestTasksStartInSubmissionOrder: tasks created together — a batch's
// entries, a workflow fan-out's tasks — share their created_at (the
// harness's clock never moves) and have random ids; of equal priority,
// they start in the order they were submitted.
func TestTasksStartInSubmissionOrder(t *testing.T) {
	t.Parallel()
	const n = 8
	tests := []struct {
		name string
		// create creates the tasks and returns their ids in submission order.
		create func(*harness) []string
	}{
		{"a batch", func(h *harness) []string {
			var entries []models.BatchTask
			for i := range n {
				entries = append(entries, models.BatchTask{LocalID: fmt.Sprint(i), Title: fmt.Sprintf("task %d", i)})
			}
			ids := h.tasks(entries...)
			var want []string
			for i := range n {
				want = append(want, ids[fmt.Sprint(i)])
			}
			return want
		}},
		{"a workflow fan-out", func(h *harness) []string {
			ctx := context.Background()
			w, err := workflow.Parse("shards.yaml", fmt.Appendf(nil, `
name: shards
project: p
steps:
  - name: work
    title: "Shard {{index}} of {{count}}"
    parallel: %d
`, n))
			if err != nil {
				h.t.Fatal(err)
			}
			w.Origin = models.WorkflowFromAPI
			if _, err := h.st.SaveWorkflow(ctx, w); err != nil {
				h.t.Fatal(err)
			}
			r, _, err := h.st.StartWorkflowRun(ctx, models.RunRequest{Workflow: "shards", Trigger: models.TriggerByHand,
				TriggeredBy: "t", FireKey: "manual:1"})
			if err != nil {
				h.t.Fatal(err)
			}
			ts, err := h.st.RunTasks(ctx, r.ID)
			if err != nil || len(ts) != n {
				h.t.Fatalf("run tasks %+v, %v", ts, err)
			}
			want := make([]string, n)
			for _, tk := range ts {
				want[tk.ParallelIndex] = tk.ID
			}
			return want
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil)
			want := tc.create(h)
			h.agent("a1", "command", "exit0", nil) // one agent: one task at a time
			h.start()
			var got []string
			for range want {
				got = append(got, h.waitStart().TaskID)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("started %v, want the order of submission %v", got, want)
			}
		})
	}
}
