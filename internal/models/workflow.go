package models

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Workflow is a reusable DAG of steps for one project: triggering it makes
// a run whose tasks are ordinary tasks.
type Workflow struct {
	// Name identifies the workflow (an id: lower-case letters, digits, '-', '_').
	Name        string `json:"name"`
	ProjectID   string `json:"project_id"`
	Description string `json:"description,omitempty"`
	// Schedule is a cron expression (five fields or a descriptor) read in
	// Timezone (IANA, default UTC); each scheduled time starts one run.
	Schedule string `json:"schedule,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	// ScheduleEnabled turns the schedule on or off; default on.
	ScheduleEnabled bool `json:"schedule_enabled"`
	// Inputs are the values a run is given ({{inputs.<name>}}).
	Inputs []WorkflowInput `json:"inputs,omitempty"`
	Steps  []WorkflowStep  `json:"steps"`
	// Source is the YAML document the workflow was read from.
	Source string `json:"source,omitempty"`
	// Origin says where it came from: "file" (the workflows directory) or "api".
	Origin string `json:"origin"`
	// NextRun is the next scheduled time, when there is a schedule.
	NextRun      *time.Time `json:"next_run,omitempty"`
	ScheduleFrom time.Time  `json:"schedule_from"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
}

// WorkflowInput declares a value a run of a workflow is given, by hand
// (ctl workflow run --input name=value, the API's "inputs") or from its
// default. A required input has no default, and a workflow with a
// schedule requires none.
type WorkflowInput struct {
	Name        string  `json:"name"`
	Description string  `json:"description,omitempty"`
	Default     *string `json:"default,omitempty"`
	Required    bool    `json:"required,omitempty"`
}

// Workflow origins.
const (
	WorkflowFromFile = "file"
	WorkflowFromAPI  = "api"
)

// WorkflowStep is one step of a workflow: one task, or several when it
// fans out.
type WorkflowStep struct {
	Name string `json:"name"`
	// Title and Description are templates: {{run.id}}, {{run.workflow}},
	// {{item}}, {{index}}, {{count}} and {{<step>.outputs.<field>}}.
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	// DependsOn are the steps this one waits for.
	DependsOn []StepDependency `json:"depends_on,omitempty"`
	// Profile chooses how the step's tasks run; AgentType routes them to
	// agents of that type (empty: any agent of the project).
	Profile   string `json:"profile,omitempty"`
	AgentType string `json:"agent_type,omitempty"`
	// RunnerLabels limit the step's tasks to agents on runners with these
	// labels (Task.RunnerLabels).
	RunnerLabels []string `json:"runner_labels,omitempty"`
	Kind         string   `json:"kind,omitempty"`
	Priority     *int     `json:"priority,omitempty"`
	// TestCommands, Verification and RequiresApproval are the tasks' own.
	TestCommands     []string         `json:"test_commands,omitempty"`
	Verification     VerificationType `json:"verification,omitempty"`
	RequiresApproval bool             `json:"requires_approval,omitempty"`
	MaxRetries       *int             `json:"max_retries,omitempty"`
	// Parallel makes N tasks: a number, or "<step>.outputs.<field>", a
	// count an upstream step reported.
	Parallel *FanOut `json:"parallel,omitempty"`
	// Foreach makes one task per item of "<step>.outputs.<list>".
	Foreach string `json:"foreach,omitempty"`
	// Concurrency caps this step's tasks of one run running at once; 0 is
	// no cap.
	Concurrency int `json:"concurrency,omitempty"`
	// Timeout caps each of the step's runs (Task.Timeout); 0 is none.
	Timeout Duration `json:"timeout,omitempty"`
	// ExpectedCount is each of the step's tasks' expected_count, what
	// Capacity rules count: a fixed number, or one placeholder filled for
	// each task ({{<step>.outputs.<field>}}, {{item.<field>}},
	// {{inputs.<name>}}, …). nil: none.
	ExpectedCount *StepCount `json:"expected_count,omitempty"`
}

// StepCount is a step's expected_count: a fixed Count, or Template, one
// {{…}} placeholder whose value, a whole number, is each task's count.
// In JSON it is a number, or the template as a string.
type StepCount struct {
	Count    int
	Template string
}

// MarshalJSON writes the count as a number, or the template as a string.
func (c StepCount) MarshalJSON() ([]byte, error) {
	if c.Template != "" {
		return json.Marshal(c.Template)
	}
	return json.Marshal(c.Count)
}

// UnmarshalJSON reads a whole number, or a string: a whole number
// written as text, or a template.
func (c *StepCount) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		*c = StepCount{Count: n}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return Errorf(CodeInvalid, "expected_count: must be a whole number or a {{…}} placeholder")
	}
	if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
		*c = StepCount{Count: n}
		return nil
	}
	*c = StepCount{Template: s}
	return nil
}

// String is the count, or the template, as written.
func (c StepCount) String() string {
	if c.Template != "" {
		return c.Template
	}
	return strconv.Itoa(c.Count)
}

// StepDependency is one upstream step; RequiresSuccess defaults to true.
type StepDependency struct {
	Step            string `json:"step"`
	RequiresSuccess *bool  `json:"requires_success,omitempty"`
}

// Required reports the dependency's requires_success, true when unset.
func (d StepDependency) Required() bool { return d.RequiresSuccess == nil || *d.RequiresSuccess }

// FanOut is a step's parallel: a fixed Count, or From, an upstream step's
// output field.
type FanOut struct {
	Count int    `json:"count,omitempty"`
	From  string `json:"from,omitempty"`
}

// Dynamic reports whether the step's tasks are known only when an
// upstream step has completed.
func (s WorkflowStep) Dynamic() bool {
	return s.Foreach != "" || (s.Parallel != nil && s.Parallel.From != "")
}

// WorkflowRunStatus is a workflow run's status: pending while every task
// waits, running, and then success, failed or cancelled (ended).
type WorkflowRunStatus string

// WorkflowRun statuses.
const (
	RunPending   WorkflowRunStatus = "pending"
	RunRunning   WorkflowRunStatus = "running"
	RunSuccess   WorkflowRunStatus = "success"
	RunFailed    WorkflowRunStatus = "failed"
	RunCancelled WorkflowRunStatus = "cancelled"
)

// WorkflowRunStatuses lists every run status, the unended first.
var WorkflowRunStatuses = []WorkflowRunStatus{RunPending, RunRunning, RunSuccess, RunFailed, RunCancelled}

// Valid reports whether s is one of the run statuses.
func (s WorkflowRunStatus) Valid() bool { return slices.Contains(WorkflowRunStatuses, s) }

// Ended reports whether a run in s has ended: success, failed or
// cancelled.
func (s WorkflowRunStatus) Ended() bool {
	return s == RunSuccess || s == RunFailed || s == RunCancelled
}

// WorkflowTrigger says what started a workflow run.
type WorkflowTrigger string

// Run triggers.
const (
	TriggerByHand     WorkflowTrigger = "manual"
	TriggerBySchedule WorkflowTrigger = "schedule"
)

// WorkflowTriggers lists every run trigger.
var WorkflowTriggers = []WorkflowTrigger{TriggerByHand, TriggerBySchedule}

// Valid reports whether t is one of the run triggers.
func (t WorkflowTrigger) Valid() bool { return slices.Contains(WorkflowTriggers, t) }

// WorkflowRun is one instantiation of a workflow.
type WorkflowRun struct {
	ID        string            `json:"id"`
	Workflow  string            `json:"workflow"`
	ProjectID string            `json:"project_id"`
	Status    WorkflowRunStatus `json:"status"`
	// Trigger is manual or schedule; TriggeredBy names who or what.
	Trigger     WorkflowTrigger `json:"trigger"`
	TriggeredBy string          `json:"triggered_by,omitempty"`
	// ScheduledAt is a scheduled run's time.
	ScheduledAt *time.Time `json:"scheduled_at,omitempty"`
	// Reason says why the run ended as it did.
	Reason string `json:"reason,omitempty"`
	// Inputs are the values the run was given, defaults filled in: every
	// input the workflow declared.
	Inputs map[string]string `json:"inputs,omitempty"`
	// Definition is the workflow as it was when the run started.
	Definition json.RawMessage `json:"definition,omitempty"`
	// Tasks counts the run's tasks by status, its archived tasks
	// included.
	Tasks map[TaskStatus]int `json:"tasks,omitempty"`
	// ArchivedTasks counts those of its tasks that are archived (counted
	// in Tasks too).
	ArchivedTasks int        `json:"archived_tasks,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
	EndedAt       *time.Time `json:"ended_at,omitempty"`
}

// RunTask is a task of a workflow run with its place in the run.
type RunTask struct {
	Task
	// Name is the task's name in the run: its step, with "[i]" for a step
	// that fans out.
	Name string `json:"name"`
	// ArchivedAt is set when the task has been archived: it is the task as
	// the archive keeps it, and it never changes again.
	ArchivedAt *time.Time `json:"archived_at,omitempty"`
}

// RunFilter narrows a list of workflow runs.
type RunFilter struct {
	Workflow  string
	ProjectID string
	Status    WorkflowRunStatus
	Limit     int
}

// RunName is a workflow task's name in its run: its step, with "[i]" when
// the step fans out.
func (t Task) RunName() string {
	if t.ParallelCount > 0 {
		return t.StepName + "[" + strconv.Itoa(t.ParallelIndex) + "]"
	}
	return t.StepName
}

// RunRequest asks for a run of a workflow.
type RunRequest struct {
	Workflow    string
	Trigger     WorkflowTrigger
	TriggeredBy string
	// FireKey identifies the trigger: a workflow runs once per key (a
	// scheduled time; a manual trigger's own key).
	FireKey     string
	ScheduledAt *time.Time
	// Inputs are the values given for the workflow's inputs; defaults fill
	// the rest (see workflow.ResolveInputs).
	Inputs map[string]string
}

// AttemptLog is what an agent printed in one attempt at a task.
type AttemptLog struct {
	Attempt int    `json:"attempt"`
	Log     string `json:"log"`
	// Truncated is set when only the end of a long log is given.
	Truncated bool `json:"truncated,omitempty"`
}

// TaskLogs are a task's logs, one per attempt, oldest first.
type TaskLogs struct {
	TaskID   string       `json:"task_id"`
	Attempts []AttemptLog `json:"attempts"`
}

// LogChunk is a piece of one attempt's log, read from an offset: what
// GET /api/v1/tasks/{id}/logs streams.
type LogChunk struct {
	TaskID string `json:"task_id"`
	// Attempt is the attempt whose log this is; 0 while there is none.
	Attempt int `json:"attempt"`
	// Data is the log's bytes from the offset asked for.
	Data string `json:"data"`
	// Next is the offset after Data.
	Next int64 `json:"next"`
	// Ended says that nothing more will be written to this log: its run
	// has ended, or the task finished without one.
	Ended bool `json:"ended"`
}
