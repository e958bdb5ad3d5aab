package orchestrator

import (
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Snapshot is everything the scheduler looks at in one round, read by the
// store in one transaction. The scheduler sorts every slice itself: the
// order in which the store returns rows never changes the result.
type Snapshot struct {
	// Now is the round's time: not_before is compared with it.
	Now time.Time
	// Window is the rolling window over which the usage figures
	// (ProjectState.AgentSeconds, CompletedInWindow, GlobalTokensUsed) were
	// computed. It is informational; the scheduler does not use it.
	Window time.Duration

	Projects []ProjectState
	// Ready holds READY tasks: a page of each project's, those that can
	// start first; tasks in any other status are ignored.
	Ready []TaskInfo
	// Running holds the tasks in running statuses (ASSIGNED, IN_PROGRESS,
	// WAITING_INPUT, VERIFYING, AWAITING_APPROVAL) of every project; rules,
	// workflow step caps and the creator round-robin count those that hold
	// a slot. One marked Waiting (it waits for a person or a pull request)
	// counts only under a rule whose matcher names its status itself.
	Running []TaskInfo
	// IdleAgents are the agents free to take a task now.
	IdleAgents []AgentInfo
	// Agents are all the registered agents, whatever their state; only the
	// waiting reason of a task routed to an agent type reads them (is
	// there an agent of that type at all).
	Agents []AgentInfo
	// Rules are the scheduling rules in force, validated when they were stored.
	Rules []models.Rule
	// OwnRules are the distinct own rules of READY tasks (a batch entry's
	// rules), read without the tasks so that [Exclusions] can describe the
	// groups they hold back; nil when unknown (the scheduler still applies
	// the rules of the READY tasks it is given).
	OwnRules []OwnRuleSet

	// GlobalBudget caps the tokens of all projects within the window; nil
	// means unlimited.
	GlobalBudget *int64
	// GlobalTokensUsed is the tokens used in the window by all projects.
	GlobalTokensUsed int64
	// GlobalBudgetFreesAt, when the global budget is exhausted, is when
	// enough usage leaves the window for work to start again (nil: unknown,
	// or never by ageing alone); the waiting reason names it.
	GlobalBudgetFreesAt *time.Time
}

// ProjectState is one project as the scheduler sees it.
type ProjectState struct {
	ID string
	// CreditWeight is the project's share of agent time relative to the
	// others (3 against 1 means three quarters of it).
	CreditWeight        float64
	MaxConcurrentAgents int
	Status              models.ProjectStatus
	// TokensUsed is the project's total token use, compared with BudgetLimit.
	TokensUsed int64
	// BudgetLimit caps TokensUsed; nil means unlimited.
	BudgetLimit *int64
	// AgentSeconds is the agent time the project used in the window.
	AgentSeconds float64
	// CompletedInWindow counts the project's tasks completed in the window;
	// zero with READY work triggers the minimum-task guarantee.
	CompletedInWindow int
	// Running counts the project's tasks holding a slot (an agent or a
	// process of the daemon works for them), compared with
	// MaxConcurrentAgents.
	Running int
	// RunnerLabels are the labels an agent's runner must all have for the
	// agent to work on the project (none: any agent).
	RunnerLabels []string
	// RepoID is the project's repository ("" without one): an agent whose
	// checkout is of it is warm and preferred.
	RepoID string
}

// TaskInfo is one task as the scheduler sees it.
type TaskInfo struct {
	ID        string
	ProjectID string
	// Priority: lower is sooner; 0 is critical.
	Priority  int
	CreatedBy string
	// SubmissionSeq is the task's place in the order of submission (the
	// store's submission_seq): its age, as the scheduler orders tasks.
	SubmissionSeq int64
	// NotBefore keeps a READY task from starting before it; nil means now.
	NotBefore *time.Time
	Kind      string
	Metadata  map[string]string
	Status    models.TaskStatus
	// ExpectedCount, SuccessCount and FailureCount give the remaining work
	// that capacity rules count.
	ExpectedCount, SuccessCount, FailureCount int
	// RunID and StepName place a task of a workflow run (both empty for a
	// task outside one). StepConcurrency caps the tasks of the same run and
	// step running at once, this one included; 0 means no cap.
	RunID, StepName string
	StepConcurrency int
	// AgentType routes the task to idle agents of that type; empty: any.
	AgentType string
	// RunnerLabels are labels of the task's own that an agent's runner
	// must all have, besides the project's; empty: none.
	RunnerLabels []string
	// PreferAgent is the agent the task goes to when that agent is idle
	// and may take it (the agent whose session it resumes); empty: none.
	PreferAgent string
	// Rules are the task's own rules (a batch entry's rules, scoped to its
	// project): it starts only when each of them allows it too.
	Rules []models.Rule
	// Waiting marks a running task that holds no slot: it waits for a
	// person or a pull request.
	Waiting bool
}

// AgentInfo is one idle agent.
type AgentInfo struct {
	ID string
	// AgentType is the agent's type (claude, codex, …): a task routed to a
	// type goes only to agents of it.
	AgentType string
	// Projects lists the projects the agent may work on; empty means any.
	Projects []string
	// Labels are the labels of the agent's runner (none for the daemon's
	// own agents).
	Labels []string
	// RepoID is the repository of the agent's checkout: the agent is warm
	// for the projects of that repository.
	RepoID string
}

// Assignment is one decision of the scheduler: start TaskID on AgentID.
// Dispatch claims it atomically; a lost race is simply not started.
type Assignment struct {
	TaskID    string
	AgentID   string
	ProjectID string
	// Reason says which part of the policy chose it, for logs.
	Reason string
}

// OwnRuleSet is one distinct set of own rules carried by READY tasks of a
// project: Text is exactly as stored (what the store compares), Rules its
// decoded form.
type OwnRuleSet struct {
	ProjectID string
	Text      string
	Rules     []models.Rule
}
