package service

import (
	"context"
	"fmt"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/orchestrator"
)

// This file holds the service's reports and rules: the overview (with
// the runners as ListRunners gives them), the desk, task counts and
// verifications are the store's; the budget report adds the configured
// window and global budget to the store's token counts; the rules in
// force are the store's (the orchestrator reads them from it).

// Budget reports each project's token use in the scheduling window
// (s.window, the orchestrator's default when unset) and in total against its
// budget_limit, and the use of all projects in the window against the
// global budget (s.globalBudget; negative is unlimited).
func (s *Service) Budget(ctx context.Context) (models.BudgetReport, error) {
	window := s.window
	if window <= 0 {
		window = orchestrator.DefaultWindow
	}
	since := s.clock.Now().Add(-window).UTC()
	projects, err := s.store.ListProjects(ctx)
	if err != nil {
		return models.BudgetReport{}, fmt.Errorf("budget: %w", err)
	}
	used, err := s.store.TokensUsedByProjectSince(ctx, since)
	if err != nil {
		return models.BudgetReport{}, fmt.Errorf("budget: %w", err)
	}
	r := models.BudgetReport{Window: models.Duration(window), Since: since, Projects: []models.ProjectBudget{}}
	for _, n := range used {
		r.Global.TokensInWindow += n
	}
	if s.globalBudget >= 0 {
		b := s.globalBudget
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

// Overview is the daemon's state at a glance (the store's), its projects
// and agents redacted, with the runners as ListRunners gives them.
func (s *Service) Overview(ctx context.Context) (models.Overview, error) {
	o, err := s.store.Overview(ctx)
	redactProjects(o.Projects)
	redactAgents(o.Agents)
	if err != nil {
		return o, err
	}
	if o.Runners, err = s.ListRunners(ctx); err != nil {
		return o, fmt.Errorf("overview: %w", err)
	}
	return o, nil
}

// Desk lists what waits on a person, of every project or of projectID's
// (the store's).
func (s *Service) Desk(ctx context.Context, projectID string) (models.Desk, error) {
	return s.store.DeskFor(ctx, projectID)
}

// AgentTime returns each project's agent time and completions in the
// scheduling window, and its running tasks (the store's scheduling
// state, of which the projects' part).
func (s *Service) AgentTime(ctx context.Context) ([]models.ProjectUsage, error) {
	window := s.window
	if window <= 0 {
		window = orchestrator.DefaultWindow
	}
	st, err := s.store.SchedulingState(ctx, s.clock.Now(), window)
	if err != nil {
		return nil, fmt.Errorf("agent time: %w", err)
	}
	return st.Projects, nil
}

// Stats reads each project's throughput over the last day (the store's).
func (s *Service) Stats(ctx context.Context) (models.Stats, error) {
	return s.store.Stats(ctx)
}

// TaskCounts counts each project's tasks by status (the store's).
func (s *Service) TaskCounts(ctx context.Context) (map[string]map[models.TaskStatus]int, error) {
	return s.store.TaskCounts(ctx)
}

// Verifications lists the verifications in the given phases (the
// store's).
func (s *Service) Verifications(ctx context.Context, phases ...models.VerificationPhase) ([]models.Verification, error) {
	return s.store.Verifications(ctx, phases...)
}

// Rules returns the rule set in force (the store's).
func (s *Service) Rules(ctx context.Context) (models.RuleSet, error) {
	return s.store.Rules(ctx)
}

// ReplaceRules validates and replaces the whole rule set (the store's).
func (s *Service) ReplaceRules(ctx context.Context, rules []models.Rule, by string) (models.RuleSet, error) {
	return s.store.ReplaceRules(ctx, rules, by)
}
