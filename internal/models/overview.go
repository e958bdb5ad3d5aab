package models

// Overview is the state of the whole daemon at a glance, what Discord's
// /status, `ctl status` and the dashboard's overview show: the projects,
// the agents and what each is doing, the runners, the tasks of each
// project counted by status and by whether someone works on them, and the
// desk of what waits on a person.
type Overview struct {
	Projects []Project `json:"projects"`
	// Agents are the daemon's own agents and its runners' (RUNNER/NAME).
	Agents []Agent `json:"agents"`
	// Runners are the runners, by name, each with whether it is connected
	// and its runs in progress.
	Runners []Runner `json:"runners"`
	// Counts are each project's tasks by status (projects without tasks
	// are left out).
	Counts map[string]map[TaskStatus]int `json:"task_counts"`
	// Activity counts the tasks in flight of all projects by whether an
	// agent or a process of the daemon works on them; ProjectActivity is
	// the same per project (projects with neither left out).
	Activity        Activity            `json:"activity"`
	ProjectActivity map[string]Activity `json:"project_activity"`
	// Working are the tasks in ASSIGNED, IN_PROGRESS, WAITING_INPUT and
	// VERIFYING, where the agents' current tasks are found (Activity says
	// which of them someone works on).
	Working []Task `json:"working"`
	// Desk is everything that waits on a person, oldest first, as
	// GET /api/v1/desk answers it; DeskTruncated says more waits than
	// it lists.
	Desk          []DeskItem `json:"desk"`
	DeskTruncated bool       `json:"desk_truncated,omitempty"`
	// Rules are the scheduling rules in force.
	Rules []Rule `json:"rules"`
	// Budget is the token use against the budgets; set by the command
	// layer, which knows the window and the global budget.
	Budget *BudgetReport `json:"budget,omitempty"`
}

// Activity tells the tasks agents work on from those that only wait to
// land or be verified, so that a task waiting for a person or a reviewer
// is not shown as running.
type Activity struct {
	// AgentsWorking counts the tasks an agent or a process of the daemon
	// works on: ASSIGNED and IN_PROGRESS, WAITING_INPUT while its run
	// waits for the answer, VERIFYING while its checks or its reviewer run
	// or its work is merged. These are the tasks that hold a slot of their
	// project.
	AgentsWorking int `json:"agents_working"`
	// WaitingToLand counts the tasks whose work is done and waits to be
	// verified or to land: VERIFYING for a person, for its reviewer to
	// become free or for a linked checkout to be clean, and
	// AWAITING_APPROVAL (a pull request or a person's approval).
	WaitingToLand int `json:"waiting_to_land"`
}
