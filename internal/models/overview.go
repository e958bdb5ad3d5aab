package models

import "time"

// Overview is the state of the whole daemon at a glance, what Discord's
// /status and `ctl status` show: the projects, the agents and what each
// is doing, the tasks of each project counted by status, and what waits
// on a person.
type Overview struct {
	Projects []Project `json:"projects"`
	Agents   []Agent   `json:"agents"`
	// Counts are each project's tasks by status (projects without tasks
	// are left out).
	Counts map[string]map[TaskStatus]int `json:"task_counts"`
	// Working are the tasks agents hold: ASSIGNED, IN_PROGRESS,
	// WAITING_INPUT and VERIFYING, what the agents are doing.
	Working []Task `json:"working"`
	// Questions are the agents' questions waiting for an answer, oldest first.
	Questions []Question `json:"questions"`
	// Approvals are the tasks waiting for a person's approval: HUMAN
	// verification, work awaiting approval, or a pull request.
	Approvals []WaitingTask `json:"approvals"`
	// Broken are the BLOCKED tasks that are not blocked by another's
	// failure: the roots of broken chains, each with how many tasks wait
	// behind it.
	Broken []WaitingTask `json:"broken"`
	// Rules are the scheduling rules in force.
	Rules []Rule `json:"rules"`
	// Budget is the token use against the budgets; set by the command
	// layer, which knows the window and the global budget.
	Budget *BudgetReport `json:"budget,omitempty"`
}

// What a WaitingTask waits for.
const (
	// WaitHuman: HUMAN verification, a person approves or rejects.
	WaitHuman = "human_verification"
	// WaitApproval: work awaiting approval without a pull request.
	WaitApproval = "approval"
	// WaitPullRequest: a pull request to be merged or closed.
	WaitPullRequest = "pull_request"
	// WaitBlocked: a BLOCKED task, with Behind tasks blocked by it.
	WaitBlocked = "blocked"
)

// WaitingTask is a task waiting on a person, since when and for what.
type WaitingTask struct {
	Task  Task      `json:"task"`
	Since time.Time `json:"since"`
	// Waits is one of WaitHuman, WaitApproval, WaitPullRequest, WaitBlocked.
	Waits string `json:"waits"`
	// Behind counts the tasks blocked because this one is (WaitBlocked).
	Behind int `json:"behind,omitempty"`
}
