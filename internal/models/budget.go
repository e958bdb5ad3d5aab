package models

import "time"

// BudgetReport is token use against the budgets: each project's use in the
// scheduling window and in total against its budget_limit, and every
// project's use in the window against the global budget.
type BudgetReport struct {
	// Window is the scheduling window (orchestrator.window); Since is its
	// start when the report was made.
	Window Duration  `json:"window"`
	Since  time.Time `json:"since"`
	// Global is the use of all projects against the global budget.
	Global GlobalBudget `json:"global"`
	// Projects are ordered by id.
	Projects []ProjectBudget `json:"projects"`
}

// GlobalBudget is the tokens of all projects in the window against
// orchestrator.global_token_budget.
type GlobalBudget struct {
	// Budget caps TokensInWindow; null means unlimited.
	Budget         *int64 `json:"budget"`
	TokensInWindow int64  `json:"tokens_in_window"`
	// Exhausted is set when TokensInWindow has reached Budget: no task
	// starts until the window moves on.
	Exhausted bool `json:"exhausted"`
}

// ProjectBudget is one project's token use.
type ProjectBudget struct {
	ProjectID string        `json:"project_id"`
	Name      string        `json:"name"`
	Status    ProjectStatus `json:"status"`
	// TokensInWindow is the project's use in the scheduling window.
	TokensInWindow int64 `json:"tokens_in_window"`
	// TotalTokensUsed is the project's use since it was created.
	TotalTokensUsed int64 `json:"total_tokens_used"`
	// BudgetLimit caps TotalTokensUsed; null means unlimited.
	BudgetLimit *int64 `json:"budget_limit"`
	// Exhausted is set when TotalTokensUsed has reached BudgetLimit: the
	// project's tasks do not start until the limit is raised.
	Exhausted bool `json:"exhausted"`
}
