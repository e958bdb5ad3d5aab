package main

import (
	"context"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// This file holds the command layer's workflow operations: documents are
// parsed and checked against the configuration before the store keeps
// them; runs start, cancel and retry through the workflow engine, which
// stops and restarts tasks through the orchestrator.

// SaveWorkflowDocument reads a workflow document (YAML or JSON) given
// through the API or chat, and saves it.
func (c commands) SaveWorkflowDocument(ctx context.Context, name string, src []byte) (models.Workflow, error) {
	w, err := workflow.Parse(name, src)
	if err != nil {
		return models.Workflow{}, err
	}
	for i, st := range w.Steps {
		if st.Profile != "" && !c.hasProfile(st.Profile) {
			return models.Workflow{}, models.Errorf(models.CodeInvalid, "steps[%d] (%s).profile: no profile %q is configured", i, st.Name, st.Profile)
		}
	}
	w.Origin = models.WorkflowFromAPI
	saved, err := c.Store.SaveWorkflow(ctx, w)
	if err == nil {
		c.workflows.Wake() // its schedule's next time
	}
	return saved, err
}

// StartRun starts a run of a workflow by hand, its inputs from their
// defaults.
func (c commands) StartRun(ctx context.Context, name, by string) (models.WorkflowRun, error) {
	return c.workflows.Trigger(ctx, name, by)
}

// StartRunWith starts a run of a workflow by hand with values for its
// inputs.
func (c commands) StartRunWith(ctx context.Context, name, by string, inputs map[string]string) (models.WorkflowRun, error) {
	return c.workflows.TriggerWith(ctx, name, by, inputs)
}

// CancelRun cancels a run, stopping its tasks.
func (c commands) CancelRun(ctx context.Context, id, by string) (models.WorkflowRun, error) {
	return c.workflows.Cancel(ctx, id, by)
}

// RetryRun starts a run's failed and blocked tasks again.
func (c commands) RetryRun(ctx context.Context, id, by string) (models.WorkflowRun, error) {
	return c.workflows.Retry(ctx, id, by)
}

// RunTaskLogs returns the logs of a run's task named name ("build",
// "upgrade[2]"), of every attempt or of one.
func (c commands) RunTaskLogs(ctx context.Context, runID, name string, attempt int) (models.TaskLogs, error) {
	t, err := c.Store.RunTaskByName(ctx, runID, name)
	if err != nil {
		return models.TaskLogs{}, err
	}
	return c.orch.TaskLogs(ctx, t.ID, attempt)
}
