// Package areas declares the operations of the daemon's service
// (*service.Service) once, by area, as small interfaces. A client asks for
// the areas it uses by composing them: api.Service, api.HookService,
// api.WorkflowService and api.LogService, and discord.Service. No method is
// declared in two of them.
//
// The package holds interfaces only and imports nothing but models, so
// that the API (whose agent RPC client agents' tools and test agents
// import) does not depend on the store, the orchestrator or the engines
// the service goes through, and none of those packages' tests meets an
// import cycle by importing the API.
package areas

import (
	"context"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Projects creates, reads, changes and deletes projects. Answers carry no
// credentials (every project is models.Project.Redacted).
type Projects interface {
	// CreateProject creates a project after checking the profiles its
	// settings name and its repository.
	CreateProject(ctx context.Context, p models.Project) (models.Project, error)
	GetProject(ctx context.Context, id string) (models.Project, error)
	ListProjects(ctx context.Context) ([]models.Project, error)
	// UpdateProject updates a project after checking the profiles its new
	// settings name and its new repository.
	UpdateProject(ctx context.Context, id string, patch models.ProjectPatch) (models.Project, error)
	// DeleteProject deletes a project with its tasks, hooks and workflows,
	// refusing while its work is live.
	DeleteProject(ctx context.Context, id string) error
}

// Landing retries the landings that wait on a project's repository.
type Landing interface {
	// LandProject retries the project's landings that wait for its LINK
	// repository's checked-out default branch to be clean.
	LandProject(ctx context.Context, id string) (models.LandResult, error)
}

// Tasks creates, reads, changes and deletes tasks, and applies admin
// events to them.
type Tasks interface {
	TaskCreator
	// GetTaskDetail returns a task with its edges, events, verification,
	// result, pending plan, runs and, once it has run in a project with a
	// repository, its branch.
	GetTaskDetail(ctx context.Context, id string) (models.TaskDetail, error)
	ListTasks(ctx context.Context, f models.TaskFilter) ([]models.Task, error)
	// ApplyEvent applies an admin event, ending the task's run when needed.
	ApplyEvent(ctx context.Context, req models.TransitionRequest) (models.TransitionResult, error)
	// EditTask edits a task that is not being worked on and has not
	// completed; ChangeDependencies adds and removes its dependencies;
	// DeleteTask deletes a task nothing depends on and nothing runs.
	EditTask(ctx context.Context, id string, patch models.TaskPatch) (models.Task, error)
	ChangeDependencies(ctx context.Context, id string, c models.DependencyChange) (models.DependencyResult, error)
	DeleteTask(ctx context.Context, id string) error
	// RunErrors returns the errors of a task's runs.
	RunErrors(ctx context.Context, taskID string) ([]string, error)
}

// Agents registers, lists, pauses and removes agents. Answers carry no
// secrets (every agent is models.Agent.Redacted: env values masked).
type Agents interface {
	RegisterAgent(ctx context.Context, a models.Agent) (models.Agent, error)
	ListAgents(ctx context.Context) ([]models.Agent, error)
	// GetAgent returns one agent; an unknown id is not_found.
	GetAgent(ctx context.Context, id string) (models.Agent, error)
	SetAgentPaused(ctx context.Context, id string, paused bool) (models.Agent, error)
	// RemoveAgent deletes an agent that runs nothing.
	RemoveAgent(ctx context.Context, id string) error
}

// Runners registers, lists, drains and removes runners: agentqueued runner
// processes on other machines that hold agents (docs/runners.md). A
// runner's token is answered once, by AddRunner, and never again.
type Runners interface {
	// AddRunner registers an ACTIVE runner and returns it with its token
	// ("aqr_" and 43 characters); only the token's hash is kept.
	AddRunner(ctx context.Context, name string, labels []string, capacity int) (models.Runner, string, error)
	// ListRunners lists the runners with their agents, by name, each
	// with whether it is connected now and its runs in progress.
	ListRunners(ctx context.Context) ([]models.Runner, error)
	// GetRunner returns one runner; an unknown name is not_found.
	GetRunner(ctx context.Context, name string) (models.Runner, error)
	// DrainRunner makes a runner DRAINING (no new run; those it holds go
	// on); ResumeRunner makes it ACTIVE again.
	DrainRunner(ctx context.Context, name string) (models.Runner, error)
	ResumeRunner(ctx context.Context, name string) (models.Runner, error)
	// RemoveRunner deletes a runner and its agents, refused while one of
	// them runs something.
	RemoveRunner(ctx context.Context, name string) error
}

// Questions lists the agents' questions and answers them.
type Questions interface {
	// OpenQuestions lists every question waiting for an answer;
	// OpenQuestionsPage lists them oldest first, at most limit, after the
	// question afterID (0: from the oldest); TaskQuestions lists a task's.
	OpenQuestions(ctx context.Context) ([]models.Question, error)
	OpenQuestionsPage(ctx context.Context, afterID int64, limit int) ([]models.Question, error)
	TaskQuestions(ctx context.Context, taskID string) ([]models.Question, error)
	// GetQuestion returns one question, whatever its state.
	GetQuestion(ctx context.Context, id int64) (models.Question, error)
	// AnswerQuestion answers a question and hands the answer to the
	// waiting agent.
	AnswerQuestion(ctx context.Context, id int64, answer, by string) (models.Question, error)
}

// Approvals is a person's decision on a task waiting for one: HUMAN
// verification, work or a plan awaiting approval, or a pull request
// (merged through GitHub when the project allows it).
type Approvals interface {
	ApproveTask(ctx context.Context, id, by, note string) (models.TransitionResult, error)
	RejectTask(ctx context.Context, id, by, feedback string) (models.TransitionResult, error)
	// TaskDiff returns the change a task's branch makes against its
	// project's default branch (what an approval would merge).
	TaskDiff(ctx context.Context, id string) (string, error)
}

// Status reports the daemon's state and its token use.
type Status interface {
	// Ping checks that the store answers.
	Ping(ctx context.Context) error
	// Overview is the daemon's state at a glance: projects and agents
	// (redacted as Projects and Agents answer them), the runners (as
	// ListRunners answers them), task counts, what the agents work on,
	// the desk of what waits on a person.
	Overview(ctx context.Context) (models.Overview, error)
	// Desk lists everything that waits on a person, oldest first, each
	// item with the action that ends it: of every project and the
	// agents, or of project projectID only (an unknown project is
	// not_found).
	Desk(ctx context.Context, projectID string) (models.Desk, error)
	// Budget reports token use against the projects' and the global budgets.
	Budget(ctx context.Context) (models.BudgetReport, error)
	// Stats reads each project's throughput over the last day: tasks by
	// status, archived tasks, completions per hour, mean queue wait and run
	// time.
	Stats(ctx context.Context) (models.Stats, error)
	// TaskCounts counts each project's tasks by status.
	TaskCounts(ctx context.Context) (map[string]map[models.TaskStatus]int, error)
	// Verifications lists the verifications in the given phases.
	Verifications(ctx context.Context, phases ...models.VerificationPhase) ([]models.Verification, error)
}

// Usage reports how the agents' time is shared among the projects.
type Usage interface {
	// AgentTime returns each project's agent time and completions in
	// the scheduling window, and how many of its tasks run.
	AgentTime(ctx context.Context) ([]models.ProjectUsage, error)
}

// Rules is the rule set in force and its replacement, all or nothing.
type Rules interface {
	// Rules returns the rule set in force.
	Rules(ctx context.Context) (models.RuleSet, error)
	// ReplaceRules validates and replaces the whole rule set, keeping it
	// across restarts; by names who replaced it.
	ReplaceRules(ctx context.Context, rules []models.Rule, by string) (models.RuleSet, error)
}

// Hooks manages hooks and their runs. Answers carry no secrets (a hook's
// llm_config.api_key is redacted).
type Hooks interface {
	// ListHooks lists the hooks of a project, or of every project when
	// projectID is empty; an unknown project is not_found.
	ListHooks(ctx context.Context, projectID string) ([]models.Hook, error)
	GetHook(ctx context.Context, id string) (models.Hook, error)
	// CreateHook validates and stores a hook (defaults already applied);
	// UpdateHook applies a patch and validates the result.
	CreateHook(ctx context.Context, h models.Hook) (models.Hook, error)
	UpdateHook(ctx context.Context, id string, p models.HookPatch) (models.Hook, error)
	// DeleteHook deletes a hook with its runs.
	DeleteHook(ctx context.Context, id string) error
	// FireHook fires a hook by hand (by names who) and returns its run:
	// running, or skipped with the reason.
	FireHook(ctx context.Context, id, by string, f models.HookFire) (models.HookRun, error)
	// ListHookRuns lists hook runs, newest first; ListHookRunsAfter lists
	// them after the run afterID (empty: from the newest); GetHookRun
	// returns one.
	ListHookRuns(ctx context.Context, f models.HookRunFilter) ([]models.HookRun, error)
	ListHookRunsAfter(ctx context.Context, f models.HookRunFilter, afterID string) ([]models.HookRun, error)
	GetHookRun(ctx context.Context, id string) (models.HookRun, error)
}

// Workflows reads, schedules and deletes workflows.
type Workflows interface {
	// ListWorkflows lists the workflows of a project, or of every project
	// when projectID is empty, by name.
	ListWorkflows(ctx context.Context, projectID string) ([]models.Workflow, error)
	GetWorkflow(ctx context.Context, name string) (models.Workflow, error)
	// DeleteWorkflow deletes a workflow; its runs and their tasks stay.
	DeleteWorkflow(ctx context.Context, name string) error
	// SetWorkflowSchedule turns a workflow's schedule on or off.
	SetWorkflowSchedule(ctx context.Context, name string, enabled bool) (models.Workflow, error)
}

// WorkflowDocuments saves workflows written as documents.
type WorkflowDocuments interface {
	// SaveWorkflowDocument parses a workflow document (YAML or JSON),
	// checks it and saves it, replacing a workflow of the same name. name
	// labels the positions of its problems ("request:LINE:COL: ...").
	SaveWorkflowDocument(ctx context.Context, name string, src []byte) (models.Workflow, error)
}

// WorkflowRuns reads, cancels and retries workflow runs.
type WorkflowRuns interface {
	// ListWorkflowRuns lists runs, newest first; ListWorkflowRunsAfter
	// lists them after the run afterID (empty: from the newest);
	// GetWorkflowRun returns one with its tasks counted by status.
	ListWorkflowRuns(ctx context.Context, f models.RunFilter) ([]models.WorkflowRun, error)
	ListWorkflowRunsAfter(ctx context.Context, f models.RunFilter, afterID string) ([]models.WorkflowRun, error)
	GetWorkflowRun(ctx context.Context, id string) (models.WorkflowRun, error)
	// CancelRun cancels a run, stopping its tasks; RetryRun starts a
	// failed or cancelled run's failed and blocked tasks again.
	CancelRun(ctx context.Context, id, by string) (models.WorkflowRun, error)
	RetryRun(ctx context.Context, id, by string) (models.WorkflowRun, error)
	// RunTasks lists a run's tasks, each with its name in the run.
	RunTasks(ctx context.Context, runID string) ([]models.RunTask, error)
}

// RunStarter starts a workflow run by hand with its inputs' defaults.
type RunStarter interface {
	// StartRun starts a run of a workflow (by names who).
	StartRun(ctx context.Context, name, by string) (models.WorkflowRun, error)
}

// RunStarterWithInputs starts a workflow run by hand with values for its
// inputs.
type RunStarterWithInputs interface {
	// StartRunWith starts a run of a workflow by hand (by names who) with
	// values for its inputs; the workflow's defaults fill the rest.
	StartRunWith(ctx context.Context, name, by string, inputs map[string]string) (models.WorkflowRun, error)
}

// RunTaskLogs reads the logs of a workflow run's tasks.
type RunTaskLogs interface {
	// RunTaskLogs returns the logs of the run's task named name ("build",
	// "upgrade[2]"): of every attempt when attempt is 0, else of that one.
	RunTaskLogs(ctx context.Context, runID, name string, attempt int) (models.TaskLogs, error)
}

// Changes tells streams that follow the daemon that its state changed.
type Changes interface {
	// Changed returns the number of changes so far and a channel closed
	// at the next change: a committed change of the daemon's state (a
	// run's output is not one).
	Changed() (seq uint64, next <-chan struct{})
}

// Logs serves tasks' run logs to read and follow.
type Logs interface {
	Changes
	// LogChanged returns a channel closed once the log of a run of the
	// task grows, and a function to call when no longer waiting on it.
	LogChanged(taskID string) (next <-chan struct{}, done func())
	// ReadTaskLog reads the log of a task's attempt (0: its latest) from
	// byte offset on (a negative offset: the last -offset bytes), at most
	// max bytes; the chunk says when nothing more will be written.
	ReadTaskLog(ctx context.Context, taskID string, attempt int, offset int64, max int) (models.LogChunk, error)
}

// TaskCreator creates a batch of tasks (people through the API and
// Discord, and hooks' LLM).
type TaskCreator interface {
	CreateTasks(ctx context.Context, b models.TaskBatch) ([]models.BatchResult, error)
}

// HookActions are what a hook's LLM may do besides creating tasks: leave
// feedback on a task and post to its project's channel.
type HookActions interface {
	TaskCreator
	AddTaskFeedback(ctx context.Context, projectID, taskID string, f models.Feedback) error
	Notify(ctx context.Context, key string, n models.Notice) error
}

// TokenHistory is token use over time, from the token ledger.
type TokenHistory interface {
	// TokenSeries sums the ledger in buckets per project and agent; a
	// zero Until is now, a zero Since is DefaultTokenSeriesSpan before
	// Until, a zero Step cuts the span into DefaultTokenSeriesBuckets.
	TokenSeries(ctx context.Context, q models.TokenSeriesQuery) (models.TokenSeries, error)
}

// TaskGraphs reads tasks with the dependencies between them.
type TaskGraphs interface {
	// TaskGraph returns a project's open work or a task's neighbourhood
	// with the edges between its tasks and the root causes of its
	// cascade-blocked tasks.
	TaskGraph(ctx context.Context, q models.TaskGraphQuery) (models.TaskGraph, error)
	// PendingUpstreams returns, for each of tasks ids that has some, the
	// upstreams whose edges into it are undecided: what a DEFINED task
	// waits for.
	PendingUpstreams(ctx context.Context, ids []string) (map[string][]models.Task, error)
}
