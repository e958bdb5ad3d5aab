package store

import (
	"context"
	"fmt"

	"github.com/agentqueued/agentqueued/internal/models"
)

// overviewWorking bounds the tasks in flight an overview reads.
const overviewWorking = 500

// qActivity counts each project's tasks in flight by whether they hold a
// slot (slotHeld: an agent or a process of the daemon works for them) or
// wait to be verified or to land.
const qActivity = `SELECT project_id, sum(held), sum(NOT held AND status IN ('VERIFYING', 'AWAITING_APPROVAL'))
	FROM (SELECT project_id, status, ` + slotHeld + ` AS held FROM tasks
	WHERE status IN ('ASSIGNED', 'IN_PROGRESS', 'WAITING_INPUT', 'VERIFYING', 'AWAITING_APPROVAL'))
	GROUP BY project_id ORDER BY project_id`

// Overview reads the daemon's state at a glance: projects, agents, task
// counts, what the agents work on, the desk of what waits on a person
// (Desk) and the rules. Budget is left to the caller.
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
	if v.ProjectActivity, err = s.Activity(ctx); err != nil {
		return v, fmt.Errorf("overview: %w", err)
	}
	for _, a := range v.ProjectActivity {
		v.Activity.AgentsWorking += a.AgentsWorking
		v.Activity.WaitingToLand += a.WaitingToLand
	}
	if v.Working, err = s.ListTasks(ctx, models.TaskFilter{Statuses: []models.TaskStatus{models.StatusAssigned,
		models.StatusInProgress, models.StatusWaitingInput, models.StatusVerifying}, Limit: overviewWorking}); err != nil {
		return v, fmt.Errorf("overview: %w", err)
	}
	desk, err := s.Desk(ctx)
	if err != nil {
		return v, fmt.Errorf("overview: %w", err)
	}
	v.Desk, v.DeskTruncated = desk.Items, desk.Truncated
	rules, err := s.Rules(ctx)
	if err != nil {
		return v, fmt.Errorf("overview: %w", err)
	}
	v.Rules = rules.Rules
	return v, nil
}

// Activity counts each project's tasks in flight by whether an agent or a
// process of the daemon works on them (they hold a slot, as
// SchedulingState counts them) or they wait to be verified or to land
// (models.Activity). Projects with neither are left out.
func (s *Store) Activity(ctx context.Context) (map[string]models.Activity, error) {
	rows, err := s.rdb.QueryContext(ctx, qActivity)
	if err != nil {
		return nil, fmt.Errorf("count activity: %w", err)
	}
	defer rows.Close()
	out := map[string]models.Activity{}
	for rows.Next() {
		var (
			project string
			a       models.Activity
		)
		if err := rows.Scan(&project, &a.AgentsWorking, &a.WaitingToLand); err != nil {
			return nil, fmt.Errorf("count activity: %w", err)
		}
		if a != (models.Activity{}) {
			out[project] = a
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count activity: %w", err)
	}
	return out, nil
}
