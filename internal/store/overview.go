package store

import (
	"context"
	"fmt"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Overview limits: how many tasks awaiting approval and blocked tasks an
// overview reads.
const (
	overviewAwaiting = 100
	overviewBlocked  = 1000
	overviewWorking  = 500
)

// Overview reads the daemon's state at a glance: projects, agents, task
// counts, open questions, rules, and the tasks waiting on a person (HUMAN
// verifications, approvals, pull requests, the roots of broken chains).
// Budget is left to the caller.
func (s *Store) Overview(ctx context.Context) (models.Overview, error) {
	var v models.Overview
	var err error
	if v.Projects, err = s.ListProjects(ctx); err != nil {
		return v, fmt.Errorf("overview: %w", err)
	}
	if v.Agents, err = s.ListAgents(ctx); err != nil {
		return v, fmt.Errorf("overview: %w", err)
	}
	if v.Counts, err = s.TaskCounts(ctx); err != nil {
		return v, fmt.Errorf("overview: %w", err)
	}
	if v.Working, err = s.ListTasks(ctx, models.TaskFilter{Statuses: []models.TaskStatus{models.StatusAssigned,
		models.StatusInProgress, models.StatusWaitingInput, models.StatusVerifying}, Limit: overviewWorking}); err != nil {
		return v, fmt.Errorf("overview: %w", err)
	}
	if v.Questions, err = s.OpenQuestions(ctx); err != nil {
		return v, fmt.Errorf("overview: %w", err)
	}
	rules, err := s.Rules(ctx)
	if err != nil {
		return v, fmt.Errorf("overview: %w", err)
	}
	v.Rules = rules.Rules
	v.Approvals, v.Broken = []models.WaitingTask{}, []models.WaitingTask{}
	human, err := s.Verifications(ctx, models.PhaseHuman)
	if err != nil {
		return v, fmt.Errorf("overview: %w", err)
	}
	for _, h := range human {
		t, err := s.GetTask(ctx, h.TaskID)
		if err != nil || t.Status != models.StatusVerifying {
			continue
		}
		v.Approvals = append(v.Approvals, models.WaitingTask{Task: t, Since: h.UpdatedAt, Waits: models.WaitHuman})
	}
	awaiting, err := s.ListTasks(ctx, models.TaskFilter{Statuses: []models.TaskStatus{models.StatusAwaitingApproval}, Limit: overviewAwaiting})
	if err != nil {
		return v, fmt.Errorf("overview: %w", err)
	}
	for _, t := range awaiting {
		w := models.WaitingTask{Task: t, Since: t.UpdatedAt, Waits: models.WaitApproval}
		if t.PRURL != nil {
			w.Waits = models.WaitPullRequest
		}
		v.Approvals = append(v.Approvals, w)
	}
	blocked, err := s.ListTasks(ctx, models.TaskFilter{Statuses: []models.TaskStatus{models.StatusBlocked}, Limit: overviewBlocked})
	if err != nil {
		return v, fmt.Errorf("overview: %w", err)
	}
	behind := map[string]int{}
	for _, t := range blocked {
		if t.CascadeRootID != "" {
			behind[t.CascadeRootID]++
		}
	}
	for _, t := range blocked {
		if t.CascadeRootID == "" {
			v.Broken = append(v.Broken, models.WaitingTask{Task: t, Since: t.UpdatedAt, Waits: models.WaitBlocked, Behind: behind[t.ID]})
		}
	}
	return v, nil
}
