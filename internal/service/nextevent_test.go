package service

import (
	"context"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/orchestrator"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// TestTasksReadForPeopleSayWhatHappensNext: every read of a task for
// people — its detail, a listing, a workflow run's tasks, an edit's
// answer — carries a FAILED task's retry time from the configured
// backoff, or from the orchestrator's default when none is configured.
func TestTasksReadForPeopleSayWhatHappensNext(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	if _, err := st.CreateProject(ctx, models.Project{ID: "web"}); err != nil {
		t.Fatal(err)
	}
	w, err := workflow.Parse("flow.yaml", []byte("name: one\nproject: web\nsteps:\n  - name: only\n    title: Only\n"))
	if err != nil {
		t.Fatal(err)
	}
	w.Origin = models.WorkflowFromAPI
	if _, err := st.SaveWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	run, _, err := st.StartWorkflowRun(ctx, models.RunRequest{Workflow: "one", Trigger: models.TriggerByHand, TriggeredBy: "t",
		FireKey: "manual:1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.RegisterAgent(ctx, models.Agent{ID: "a1", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	rts, err := st.RunTasks(ctx, run.ID)
	if err != nil || len(rts) != 1 {
		t.Fatalf("run tasks: %v, %v", rts, err)
	}
	id := rts[0].ID
	r, _, err := st.ClaimTask(ctx, id, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.StartRun(ctx, r.ID, 1000, "/tmp"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.FinishRun(ctx, models.RunEnd{RunID: r.ID, Event: models.EventAgentFailed, ExpectFrom: models.StatusInProgress,
		Reason: "boom", Outcome: "failed", Error: "boom"}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		cfg  Config
		wait time.Duration
	}{
		{"configured", Config{Store: st, RetryBackoff: 2 * time.Minute, MaxBackoff: time.Hour}, 2 * time.Minute},
		{"the orchestrator's default", Config{Store: st}, orchestrator.DefaultRetryBackoff},
	} {
		s := New(tc.cfg)
		reads := map[string]func() (models.Task, error){
			"detail": func() (models.Task, error) {
				d, err := s.GetTaskDetail(ctx, id)
				return d.Task, err
			},
			"listing": func() (models.Task, error) {
				ts, err := s.ListTasks(ctx, models.TaskFilter{ProjectID: "web"})
				if err != nil || len(ts) != 1 {
					return models.Task{}, err
				}
				return ts[0], nil
			},
			"run tasks": func() (models.Task, error) {
				ts, err := s.RunTasks(ctx, run.ID)
				if err != nil || len(ts) != 1 {
					return models.Task{}, err
				}
				return ts[0].Task, nil
			},
			"edit": func() (models.Task, error) {
				return s.EditTask(ctx, id, models.TaskPatch{Priority: ptrTo(7)})
			},
		}
		for what, read := range reads {
			task, err := read()
			if err != nil {
				t.Fatalf("%s, %s: %v", tc.name, what, err)
			}
			// An edit restarts the wait: updated_at is the task's own.
			want := task.UpdatedAt.Add(tc.wait)
			if task.NextEvent != models.EventRetry || task.NextEventAt == nil || !task.NextEventAt.Equal(want) {
				t.Errorf("%s, %s: next %q at %v, want RETRY at %s", tc.name, what, task.NextEvent, task.NextEventAt, want)
			}
		}
	}
}
