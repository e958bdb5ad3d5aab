package main

import (
	"context"
	"fmt"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/orchestrator"
)

// This file holds the command layer's editing and reporting operations:
// editing a task, the budget report. Changing dependencies, deleting tasks
// and removing agents are the store's operations as they are (nothing runs
// on what they touch).

// globalBudgetOf turns orchestrator.global_token_budget into
// commands.globalBudget: nil (unlimited) becomes -1, since 0 is a budget
// that lets nothing start.
func globalBudgetOf(b *int64) int64 {
	if b == nil {
		return -1
	}
	return *b
}

// EditTask edits a task after checking that the profile it names, if any,
// is configured.
func (c commands) EditTask(ctx context.Context, id string, patch models.TaskPatch) (models.Task, error) {
	if patch.Profile != nil && *patch.Profile != "" && !c.hasProfile(*patch.Profile) {
		return models.Task{}, fmt.Errorf("edit task %s: %w", id,
			models.Errorf(models.CodeInvalid, "profile: no profile %q is configured", *patch.Profile))
	}
	return c.Store.EditTask(ctx, id, patch)
}

// Budget reports each project's token use in the scheduling window
// (c.window, the orchestrator's default when unset) and in total against its
// budget_limit, and the use of all projects in the window against the
// global budget (c.globalBudget; negative is unlimited).
func (c commands) Budget(ctx context.Context) (models.BudgetReport, error) {
	window := c.window
	if window <= 0 {
		window = orchestrator.DefaultWindow
	}
	since := time.Now().Add(-window).UTC()
	projects, err := c.Store.ListProjects(ctx)
	if err != nil {
		return models.BudgetReport{}, fmt.Errorf("budget: %w", err)
	}
	used, err := c.Store.TokensUsedByProjectSince(ctx, since)
	if err != nil {
		return models.BudgetReport{}, fmt.Errorf("budget: %w", err)
	}
	r := models.BudgetReport{Window: models.Duration(window), Since: since, Projects: []models.ProjectBudget{}}
	for _, n := range used {
		r.Global.TokensInWindow += n
	}
	if c.globalBudget >= 0 {
		b := c.globalBudget
		r.Global.Budget = &b
		r.Global.Exhausted = r.Global.TokensInWindow >= b
	}
	for _, p := range projects {
		r.Projects = append(r.Projects, models.ProjectBudget{ProjectID: p.ID, Name: p.Name, Status: p.Status,
			TokensInWindow: used[p.ID], TotalTokensUsed: p.TotalTokensUsed, BudgetLimit: p.BudgetLimit,
			Exhausted: p.BudgetLimit != nil && p.TotalTokensUsed >= *p.BudgetLimit})
	}
	return r, nil
}
