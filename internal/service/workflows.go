package service

import (
	"context"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// This file holds the service's workflow operations: documents are
// parsed and checked against the configuration before the store keeps
// them; runs start, cancel and retry through the workflow engine, which
// stops and restarts tasks through the orchestrator.

// SaveWorkflowDocument reads a workflow document (YAML or JSON) given
// through the API or chat, checks the profiles its steps name, saves it
// and wakes the workflow engine for its schedule.
func (s *Service) SaveWorkflowDocument(ctx context.Context, name string, src []byte) (models.Workflow, error) {
	w, err := workflow.Parse(name, src)
	if err != nil {
		return models.Workflow{}, err
	}
	for i, step := range w.Steps {
		if step.Profile != "" && !s.HasProfile(step.Profile) {
			return models.Workflow{}, models.Errorf(models.CodeInvalid, "steps[%d] (%s).profile: no profile %q is configured", i, step.Name, step.Profile)
		}
	}
	w.Origin = models.WorkflowFromAPI
	saved, err := s.store.SaveWorkflow(ctx, w)
	if err == nil {
		s.workflows.Wake() // its schedule's next time
	}
	return saved, err
}

// StartRun starts a run of a workflow by hand, its inputs from their
// defaults (the workflow engine's).
func (s *Service) StartRun(ctx context.Context, name, by string) (models.WorkflowRun, error) {
	return s.workflows.Trigger(ctx, name, by)
}

// StartRunWith starts a run of a workflow by hand with values for its
// inputs (the workflow engine's).
func (s *Service) StartRunWith(ctx context.Context, name, by string, inputs map[string]string) (models.WorkflowRun, error) {
	return s.workflows.TriggerWith(ctx, name, by, inputs)
}

// CancelRun cancels a run, stopping its tasks (the workflow engine's,
// through the orchestrator).
func (s *Service) CancelRun(ctx context.Context, id, by string) (models.WorkflowRun, error) {
	return s.workflows.Cancel(ctx, id, by)
}

// RetryRun starts a run's failed and blocked tasks again (the workflow
// engine's).
func (s *Service) RetryRun(ctx context.Context, id, by string) (models.WorkflowRun, error) {
	return s.workflows.Retry(ctx, id, by)
}

// RunTaskLogs returns the logs of a run's task named name ("build",
// "upgrade[2]"), of every attempt or of one: the store finds the task,
// the orchestrator reads its logs. An archived task's logs went with its
// run directory when it was archived: asking for them is not found, and
// says so.
func (s *Service) RunTaskLogs(ctx context.Context, runID, name string, attempt int) (models.TaskLogs, error) {
	t, err := s.store.RunTaskByName(ctx, runID, name)
	if err != nil {
		return models.TaskLogs{}, err
	}
	if t.ArchivedAt != nil {
		return models.TaskLogs{}, models.Errorf(models.CodeNotFound, "task %s (%s of run %s) was archived %s "+
			"and its logs were deleted with it; ctl task show %s shows what the archive keeps (its events, result and runs)",
			t.ID, t.Name, runID, t.ArchivedAt.UTC().Format(time.RFC3339), t.ID)
	}
	return s.orch.TaskLogs(ctx, t.ID, attempt)
}

// ListWorkflows lists the workflows of a project, or of every project
// when projectID is empty (the store's).
func (s *Service) ListWorkflows(ctx context.Context, projectID string) ([]models.Workflow, error) {
	return s.store.ListWorkflows(ctx, projectID)
}

// GetWorkflow returns a workflow (the store's).
func (s *Service) GetWorkflow(ctx context.Context, name string) (models.Workflow, error) {
	return s.store.GetWorkflow(ctx, name)
}

// DeleteWorkflow deletes a workflow; its runs and their tasks stay (the
// store's).
func (s *Service) DeleteWorkflow(ctx context.Context, name string) error {
	return s.store.DeleteWorkflow(ctx, name)
}

// SetWorkflowSchedule turns a workflow's schedule on or off (the store's).
func (s *Service) SetWorkflowSchedule(ctx context.Context, name string, enabled bool) (models.Workflow, error) {
	return s.store.SetWorkflowSchedule(ctx, name, enabled)
}

// ListWorkflowRuns lists runs, newest first (the store's).
func (s *Service) ListWorkflowRuns(ctx context.Context, f models.RunFilter) ([]models.WorkflowRun, error) {
	return s.store.ListWorkflowRuns(ctx, f)
}

// ListWorkflowRunsAfter lists runs, newest first, after the run afterID
// (the store's).
func (s *Service) ListWorkflowRunsAfter(ctx context.Context, f models.RunFilter, afterID string) ([]models.WorkflowRun, error) {
	return s.store.ListWorkflowRunsAfter(ctx, f, afterID)
}

// GetWorkflowRun returns a run with its tasks counted by status (the
// store's).
func (s *Service) GetWorkflowRun(ctx context.Context, id string) (models.WorkflowRun, error) {
	return s.store.GetWorkflowRun(ctx, id)
}

// RunTasks lists a run's tasks, each with its name in the run (the
// store's), and a FAILED or PAUSED one with its next event.
func (s *Service) RunTasks(ctx context.Context, runID string) ([]models.RunTask, error) {
	ts, err := s.store.RunTasks(ctx, runID)
	for i := range ts {
		s.setNextEvent(&ts[i].Task)
	}
	return ts, err
}
