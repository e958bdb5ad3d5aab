package service

import (
	"context"
	"fmt"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/repo"
)

// This file holds the service's task operations: creating and editing
// tasks checks the profiles they name; admin events go through the
// orchestrator, which ends a task's run when needed; changing
// dependencies and deleting tasks are the store's operations as they are
// (nothing runs on what they touch).

// CreateTasks creates a batch after checking that every profile it names is
// configured.
func (s *Service) CreateTasks(ctx context.Context, b models.TaskBatch) ([]models.BatchResult, error) {
	for i, t := range b.Tasks {
		if t.Profile != "" && !s.HasProfile(t.Profile) {
			return nil, models.Errorf(models.CodeInvalid, "tasks[%d].profile: no profile %q is configured", i, t.Profile)
		}
	}
	return s.store.CreateTasks(ctx, b)
}

// GetTaskDetail returns a task with its edges, events, verification,
// result, pending plan and runs; a task that has run in a project with a
// repository names its branch, and a FAILED or PAUSED one (not archived)
// its next event.
func (s *Service) GetTaskDetail(ctx context.Context, id string) (models.TaskDetail, error) {
	d, err := s.store.GetTaskDetail(ctx, id)
	if err != nil {
		return d, err
	}
	if d.ArchivedAt == nil {
		s.setNextEvent(&d.Task)
	}
	if d.Task.BranchName != nil || len(d.Runs) == 0 {
		return d, nil
	}
	p, err := s.store.GetProject(ctx, d.Task.ProjectID)
	if err != nil {
		return models.TaskDetail{}, fmt.Errorf("get task %s: %w", id, err)
	}
	if p.Repo != nil {
		branch := repo.BranchName(d.Task)
		d.Task.BranchName = &branch
	}
	return d, nil
}

// ListTasks lists tasks (the store's), each FAILED or PAUSED one with its
// next event.
func (s *Service) ListTasks(ctx context.Context, f models.TaskFilter) ([]models.Task, error) {
	ts, err := s.store.ListTasks(ctx, f)
	if err != nil || f.Archived {
		return ts, err
	}
	for i := range ts {
		s.setNextEvent(&ts[i])
	}
	return ts, nil
}

// setNextEvent says what the orchestrator does next to a FAILED or PAUSED
// task, and when, with the orchestrator's retry backoff: computed when a
// task is read for people, never stored.
func (s *Service) setNextEvent(t *models.Task) {
	t.SetNextEvent(s.retryBackoff, s.maxBackoff)
}

// ApplyEvent applies an admin event and ends the task's run when needed
// (the orchestrator's).
func (s *Service) ApplyEvent(ctx context.Context, req models.TransitionRequest) (models.TransitionResult, error) {
	return s.orch.ApplyAdminEvent(ctx, req)
}

// EditTask edits a task after checking that the profile it names, if any,
// is configured.
func (s *Service) EditTask(ctx context.Context, id string, patch models.TaskPatch) (models.Task, error) {
	if patch.Profile != nil && *patch.Profile != "" && !s.HasProfile(*patch.Profile) {
		return models.Task{}, fmt.Errorf("edit task %s: %w", id,
			models.Errorf(models.CodeInvalid, "profile: no profile %q is configured", *patch.Profile))
	}
	t, err := s.store.EditTask(ctx, id, patch)
	if err != nil {
		return t, err
	}
	s.setNextEvent(&t)
	return t, nil
}

// ChangeDependencies adds and removes a task's dependencies (the store's).
func (s *Service) ChangeDependencies(ctx context.Context, id string, c models.DependencyChange) (models.DependencyResult, error) {
	return s.store.ChangeDependencies(ctx, id, c)
}

// DeleteTask deletes a task nothing depends on and nothing runs (the
// store's); then, for a project with a linked repository, its branch
// there, unless that holds work the default branch lacks (Traces: what is
// kept is logged, with why).
func (s *Service) DeleteTask(ctx context.Context, id string) error {
	var (
		t   models.Task
		p   models.Project
		err error
	)
	if s.traces != nil {
		if t, err = s.store.GetTask(ctx, id); err == nil {
			p, err = s.store.GetProject(ctx, t.ProjectID)
		}
		if err != nil {
			return fmt.Errorf("delete task %s: %w", id, err)
		}
	}
	if err := s.store.DeleteTask(ctx, id); err != nil {
		return err
	}
	if s.traces == nil || p.Repo == nil {
		return nil
	}
	// The task is gone whatever happens here: a branch that stays is said.
	kept, err := s.traces.RemoveTaskBranch(ctx, p, t)
	switch {
	case err != nil:
		s.log.WarnContext(ctx, "the deleted task's branch could not be removed", "task_id", id, "project_id", p.ID, "err", err)
	case kept != "":
		s.log.WarnContext(ctx, "the deleted task's branch was kept", "task_id", id, "project_id", p.ID, "reason", kept)
	}
	return nil
}

// RunErrors returns the errors of a task's runs (the store's).
func (s *Service) RunErrors(ctx context.Context, taskID string) ([]string, error) {
	return s.store.RunErrors(ctx, taskID)
}

// AddTaskFeedback records feedback on a task, as a hook's action (the
// store's).
func (s *Service) AddTaskFeedback(ctx context.Context, projectID, taskID string, f models.Feedback) error {
	return s.store.AddTaskFeedback(ctx, projectID, taskID, f)
}

// Notify queues a notice for the chat, as a hook's action (the store's).
func (s *Service) Notify(ctx context.Context, key string, n models.Notice) error {
	return s.store.Notify(ctx, key, n)
}
