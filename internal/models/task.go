package models

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Task defaults of the specification.
const (
	DefaultPriority   = 100
	DefaultMaxRetries = 3
)

// MaxTaskTimeout is the longest timeout a task or a workflow step may set.
const MaxTaskTimeout = 7 * 24 * time.Hour

// MinTaskTimeout is the shortest timeout a task or a workflow step may set
// (other than 0, none): a shorter one would end every run at its start.
const MinTaskTimeout = time.Second

// ValidTaskTimeout reports whether d is a timeout a task may set: 0 (none)
// or between MinTaskTimeout and MaxTaskTimeout.
func ValidTaskTimeout(d time.Duration) bool {
	return d == 0 || d >= MinTaskTimeout && d <= MaxTaskTimeout
}

// Task is a unit of work executed by an agent.
type Task struct {
	ID               string           `json:"id"`
	ProjectID        string           `json:"project_id"`
	Title            string           `json:"title"`
	Description      string           `json:"description"`
	Priority         int              `json:"priority"`
	Status           TaskStatus       `json:"status"`
	VerificationType VerificationType `json:"verification_type"`
	RetryCount       int              `json:"retry_count"`
	MaxRetries       int              `json:"max_retries"`
	ParentTaskID     *string          `json:"parent_task_id,omitempty"`
	RepoID           *string          `json:"repo_id,omitempty"`
	AssignedAgentID  *string          `json:"assigned_agent_id,omitempty"`
	BranchName       *string          `json:"branch_name,omitempty"`
	ResumeAfter      *time.Time       `json:"resume_after,omitempty"`
	RequiresApproval bool             `json:"requires_approval"`
	PRURL            *string          `json:"pr_url,omitempty"`
	PlanSource       *string          `json:"plan_source,omitempty"`
	IsPlanSubtask    bool             `json:"is_plan_subtask"`

	// Kind groups tasks for dedupe and rules (seed Core Concepts).
	Kind string `json:"kind,omitempty"`
	// Metadata is free key/value data matched by dedupe strategies and rules.
	Metadata map[string]string `json:"metadata,omitempty"`
	// CreatedBy names the person or system that created the task.
	CreatedBy string `json:"created_by,omitempty"`
	// NotBefore keeps a READY task from starting before this time.
	NotBefore *time.Time `json:"not_before,omitempty"`
	// ExpectedCount is how many items of work the task is expected to process.
	ExpectedCount int `json:"expected_count,omitempty"`
	// SuccessCount and FailureCount count processed items that succeeded or failed.
	SuccessCount int `json:"success_count"`
	FailureCount int `json:"failure_count"`
	// Rules are the task's own scheduling rules (a batch entry's rules): the
	// task never starts while starting it would exceed one of them.
	Rules []Rule `json:"rules,omitempty"`

	AcceptanceCriteria []string `json:"acceptance_criteria,omitempty"`
	TestCommands       []string `json:"test_commands,omitempty"`
	// Profile names the agent profile (from config) the task runs with;
	// empty means the project's default, else the agent's own settings.
	Profile string `json:"profile,omitempty"`
	// Timeout caps each run of the task's wall-clock time, like an agent's
	// max_runtime: the smaller of the two governs; 0 is no cap of its own.
	Timeout Duration `json:"timeout,omitempty"`
	// AgentType routes the task to agents of that type (one of AgentTypes);
	// empty means any agent.
	AgentType string `json:"agent_type,omitempty"`
	// RunnerLabels limits the task to agents on runners that have every
	// one of these labels, besides its project's (docs/runners.md); empty:
	// any agent the project allows.
	RunnerLabels []string `json:"runner_labels,omitempty"`
	// PreferAgentID is the agent a READY task goes to when it is idle: the
	// agent whose question was answered after its run ended, so that its
	// session resumes. Read by scheduling rounds only; cleared at the claim.
	PreferAgentID string `json:"-"`

	// StatusReason is the reason recorded with the latest transition.
	StatusReason string `json:"status_reason,omitempty"`
	// CascadeRootID names the BLOCKED task whose failure blocked this one
	// through UPSTREAM_FAILED; empty otherwise.
	CascadeRootID string `json:"cascade_root_id,omitempty"`
	// WaitingCode and WaitingReason say why a READY task has not started
	// (see the Waiting* codes), or why a VERIFYING or AWAITING_APPROVAL
	// task's work waits to land (WaitingLanding); both are empty in any
	// other case and until a scheduling round has looked at the task.
	WaitingCode   string `json:"waiting_code,omitempty"`
	WaitingReason string `json:"waiting_reason,omitempty"`
	// NextEvent, NextEventAt and NextEventReason say what the daemon does
	// next to a FAILED or PAUSED task by itself, and when: RETRY,
	// MAX_RETRIES or RESUME_TIMER, the time it is due, and a sentence
	// (see SetNextEvent). They are computed when a task is read for
	// people, never stored, and empty for any other status.
	NextEvent       TaskEvent  `json:"next_event,omitempty"`
	NextEventAt     *time.Time `json:"next_event_at,omitempty"`
	NextEventReason string     `json:"next_event_reason,omitempty"`

	// RunID, StepName, ParallelIndex and ParallelCount place a task of a
	// workflow run: its step, and its index among the step's tasks (0 to
	// ParallelCount-1) when the step fans out. StepConcurrency caps the
	// step's tasks of the run running at once (0: no cap).
	RunID           string `json:"run_id,omitempty"`
	StepName        string `json:"step_name,omitempty"`
	ParallelIndex   int    `json:"parallel_index,omitempty"`
	ParallelCount   int    `json:"parallel_count,omitempty"`
	StepConcurrency int    `json:"step_concurrency,omitempty"`

	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// SubmissionSeq numbers tasks in the order they were submitted, a
	// batch's entries in their order: after priority, tasks start and are
	// listed in this order. Given by the store; never reused.
	SubmissionSeq int64 `json:"submission_seq,omitempty"`
}

// ApplyDefaults fills the specification's defaults into unset fields.
func (t *Task) ApplyDefaults() {
	if t.Status == "" {
		t.Status = StatusDefined
	}
	if t.VerificationType == "" {
		t.VerificationType = VerifyAutoTest
	}
}

// Validate checks the task's fields and the specification's constraints.
func (t *Task) Validate() error {
	if err := t.validateContent(); err != nil {
		return err
	}
	return t.ValidateConstraints()
}

func (t *Task) validateContent() error {
	if strings.TrimSpace(t.Title) == "" {
		return Errorf(CodeInvalid, "title: required")
	}
	for _, f := range []struct {
		name, v   string
		max       int
		multiline bool
	}{
		{"title", t.Title, MaxTitleLen, false},
		{"description", t.Description, MaxDescriptionLen, true},
		{"kind", t.Kind, MaxKindLen, false},
		{"created_by", t.CreatedBy, MaxActorLen, false},
	} {
		if err := checkText(f.name, f.v, f.max, f.multiline); err != nil {
			return err
		}
	}
	switch {
	case t.Priority < 0:
		return Errorf(CodeInvalid, "priority: must not be negative (0 is the most urgent)")
	case !t.VerificationType.Valid():
		return Errorf(CodeInvalid, "verification_type: must be AUTO_TEST, QA_AGENT or HUMAN (got %s)", Quote(string(t.VerificationType)))
	case t.MaxRetries < 0 || t.MaxRetries > 100:
		return Errorf(CodeInvalid, "max_retries: must be between 0 and 100")
	case !ValidTaskTimeout(t.Timeout.Std()):
		return Errorf(CodeInvalid, "timeout: must be 0 (none) or between %s and %s (got %s)", MinTaskTimeout, MaxTaskTimeout, t.Timeout)
	case t.ExpectedCount < 0:
		return Errorf(CodeInvalid, "expected_count: must not be negative")
	case t.ExpectedCount > MaxExpectedCount:
		return Errorf(CodeInvalid, "expected_count: at most %d (got %d)", MaxExpectedCount, t.ExpectedCount)
	case t.AgentType != "" && !slices.Contains(AgentTypes, t.AgentType):
		return Errorf(CodeInvalid, "agent_type: %s is not an agent type (%s)", Quote(t.AgentType), strings.Join(AgentTypes, ", "))
	case checkRunnerLabels("runner_labels", t.RunnerLabels) != nil:
		return checkRunnerLabels("runner_labels", t.RunnerLabels)
	case t.Profile != "" && !ValidID(t.Profile):
		return Errorf(CodeInvalid, "profile: %s is not a profile name (1-64 lower-case letters, digits, '-' or '_')", Quote(t.Profile))
	case t.ParentTaskID != nil && !ValidTaskID(*t.ParentTaskID):
		return Errorf(CodeInvalid, "parent_task_id: %s is not a task id", Quote(*t.ParentTaskID))
	case t.RepoID != nil && !ValidID(*t.RepoID):
		return Errorf(CodeInvalid, "repo_id: %s is not a repo id", Quote(*t.RepoID))
	}
	if t.PlanSource != nil {
		if err := CheckLine("plan_source", *t.PlanSource, MaxActorLen); err != nil {
			return err
		}
	}
	if err := checkMetadata("metadata", t.Metadata); err != nil {
		return err
	}
	if err := checkList("acceptance_criteria", t.AcceptanceCriteria, MaxListEntries, func(name, v string) error {
		return CheckText(name, v, MaxCriterionLen)
	}); err != nil {
		return err
	}
	return checkList("test_commands", t.TestCommands, MaxListEntries, func(name, c string) error {
		if strings.TrimSpace(c) == "" {
			return Errorf(CodeInvalid, "%s: empty command", name)
		}
		return CheckText(name, c, MaxTestCommandLen)
	})
}

// checkMetadata checks metadata: at most MaxMetadataEntries entries, keys
// of one line of 1 to MaxMetadataKeyLen characters, values of at most
// MaxMetadataLen characters (line breaks and tabs allowed). The first bad
// key in sorted order is named.
func checkMetadata(field string, m map[string]string) error {
	switch {
	case len(m) == 0:
		return nil
	case len(m) > MaxMetadataEntries:
		return Errorf(CodeInvalid, "%s: at most %d entries (got %d)", field, MaxMetadataEntries, len(m))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k == "" {
			return Errorf(CodeInvalid, "%s: a key must not be empty", field)
		}
		short := cutRunes(k, 40)
		if err := CheckLine(fmt.Sprintf("%s key %q", field, short), k, MaxMetadataKeyLen); err != nil {
			return err
		}
		if err := CheckText(fmt.Sprintf("%s[%q]", field, short), m[k], MaxMetadataLen); err != nil {
			return err
		}
	}
	return nil
}

// ValidateConstraints checks the specification's state constraints:
// retry_count ≤ max_retries, PAUSED ⇒ resume_after, and ASSIGNED or
// IN_PROGRESS ⇒ assigned_agent_id.
func (t *Task) ValidateConstraints() error {
	switch {
	case !t.Status.Valid():
		return Errorf(CodeInvalid, "status: unknown task status %s", Quote(string(t.Status)))
	case t.RetryCount < 0 || t.RetryCount > t.MaxRetries:
		return Errorf(CodeInvalid, "retry_count %d: must be between 0 and max_retries (%d)", t.RetryCount, t.MaxRetries)
	case t.Status == StatusPaused && t.ResumeAfter == nil:
		return Errorf(CodeInvalid, "task %s: a PAUSED task needs resume_after", t.ID)
	case (t.Status == StatusAssigned || t.Status == StatusInProgress) && (t.AssignedAgentID == nil || *t.AssignedAgentID == ""):
		return Errorf(CodeInvalid, "task %s: an %s task needs assigned_agent_id", t.ID, t.Status)
	}
	return nil
}

// MatchesFields reports whether t has the given kind and equal metadata
// values (a missing key equals only a missing key) for every field.
func (t *Task) MatchesFields(kind string, other map[string]string, fields []string) bool {
	if t.Kind != kind {
		return false
	}
	for _, f := range fields {
		a, okA := t.Metadata[f]
		b, okB := other[f]
		if okA != okB || a != b {
			return false
		}
	}
	return true
}

// Dependency is the fact recorded for one dependency edge: Downstream
// depends on Upstream.
type Dependency struct {
	Downstream      string         `json:"downstream"`
	Upstream        string         `json:"upstream"`
	RequiresSuccess bool           `json:"requires_success"`
	Resolution      EdgeResolution `json:"resolution"`
	ResolvedAt      *time.Time     `json:"resolved_at,omitempty"`
	// ResolvingEventID is the task_events row that last resolved the edge.
	ResolvingEventID *int64 `json:"resolving_event_id,omitempty"`
	// UpstreamOutcome is how the upstream ended when it decided the edge;
	// empty while the edge is PENDING.
	UpstreamOutcome EdgeOutcome `json:"upstream_outcome,omitempty"`
	// UpstreamAttempt is the upstream's work attempt whose end decided the
	// edge; nil when it never ran (skipped or cancelled before it started).
	UpstreamAttempt *int `json:"upstream_attempt,omitempty"`
}

// EventRecord is one row of the task audit log.
type EventRecord struct {
	ID        int64      `json:"id"`
	TaskID    string     `json:"task_id"`
	From      TaskStatus `json:"from"`
	To        TaskStatus `json:"to"`
	Event     TaskEvent  `json:"event"`
	Reason    string     `json:"reason,omitempty"`
	Actor     string     `json:"actor,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
}

// TaskDetail is a task with its edges, in both directions, and its events.
type TaskDetail struct {
	Task         Task          `json:"task"`
	Dependencies []Dependency  `json:"dependencies"`
	Dependents   []Dependency  `json:"dependents"`
	Events       []EventRecord `json:"events"`
	// Verification is the phase of a VERIFYING task's verification and
	// what it waits for.
	Verification *Verification `json:"verification,omitempty"`
	// Result is what the task's last completed run reported.
	Result *Completion `json:"result,omitempty"`
	// Plan is the task's pending plan: the subtasks its agent proposed,
	// created once the task's work is accepted.
	Plan *Plan `json:"plan,omitempty"`
	// Runs are the task's latest runs (at most TaskDetailRuns), oldest
	// first: work and reviews, with their CLI, version, session, usage,
	// cost and denied tools.
	Runs []Run `json:"runs"`
	// ArchivedAt is set when the task has been archived: it left the
	// working tables, and this detail is the one kept when it did.
	ArchivedAt *time.Time `json:"archived_at,omitempty"`
}

// TaskDetailRuns bounds the runs a task's detail shows.
const TaskDetailRuns = 20

// TaskFilter selects tasks for listing. Zero fields do not filter.
type TaskFilter struct {
	ProjectID string
	Statuses  []TaskStatus
	// Kind and CreatedBy select tasks of that kind, created by that
	// person or system.
	Kind      string
	CreatedBy string
	// Limit caps the result (default and maximum set by the store).
	Limit int
	// AfterID continues a listing after the task with this id (keyset paging).
	AfterID string
	// Archived lists archived tasks instead of those in the working tables.
	Archived bool
}

// TransitionRequest asks for one event to be applied to one task.
type TransitionRequest struct {
	TaskID string
	Event  TaskEvent
	// ExpectFrom, when set, is the status the caller saw: the change applies
	// only from that status. A repeat of an event already applied from it is
	// answered as a duplicate, not an error.
	ExpectFrom TaskStatus
	Reason     string
	Actor      string
	// AgentID is recorded as assigned_agent_id by ASSIGNED.
	AgentID string
	// ResumeAfter is recorded by events that pause the task.
	ResumeAfter *time.Time
	// Feedback, when set, is recorded with the transition: a reviewer's or
	// person's verdict for the task's next attempt.
	Feedback *Feedback
}

// Validate checks a person's transition request: a task id, a known
// event (and expected status), a reason of one line of at most
// MaxReasonLen characters, an actor of one line of at most MaxActorLen,
// and the feedback, if any. The daemon's own transitions carry reasons it
// composes (a failure's output among them) and are recorded as given.
func (r TransitionRequest) Validate() error {
	switch {
	case !ValidTaskID(r.TaskID):
		return Errorf(CodeInvalid, "task_id: %q is not a task id", cutRunes(r.TaskID, MaxTaskIDLen))
	case !r.Event.Valid():
		return Errorf(CodeInvalid, "event: unknown task event %q", cutRunes(string(r.Event), 40))
	case r.ExpectFrom != "" && !r.ExpectFrom.Valid():
		return Errorf(CodeInvalid, "expect_from: unknown task status %q", cutRunes(string(r.ExpectFrom), 40))
	}
	if err := CheckLine("reason", r.Reason, MaxReasonLen); err != nil {
		return err
	}
	if err := CheckLine("actor", r.Actor, MaxActorLen); err != nil {
		return err
	}
	if r.Feedback != nil {
		return r.Feedback.Validate()
	}
	return nil
}

// Feedback is what a reviewer (a QA agent) or a person said of a task's
// attempt: approve or reject, with reasons.
type Feedback struct {
	ID        int64     `json:"id,omitempty"`
	TaskID    string    `json:"task_id,omitempty"`
	Source    string    `json:"source"`
	Verdict   string    `json:"verdict"`
	Text      string    `json:"text"`
	CreatedAt time.Time `json:"created_at"`
}

// Verdicts of feedback.
const (
	VerdictApprove = "approve"
	VerdictReject  = "reject"
	// VerdictComment is feedback without a decision (a hook's); the next
	// attempt reads it as it reads a rejection's reasons.
	VerdictComment = "comment"
)

// Validate checks feedback: a source (who gave it) of one line of at most
// MaxActorLen characters, a known verdict, and a text of at most
// MaxDescriptionLen characters (line breaks and tabs allowed), required
// unless the verdict approves.
func (f Feedback) Validate() error {
	if err := CheckLine("source", f.Source, MaxActorLen); err != nil {
		return err
	}
	switch f.Verdict {
	case VerdictApprove, VerdictReject, VerdictComment:
	default:
		return Errorf(CodeInvalid, "verdict: must be approve, reject or comment (got %q)", cutRunes(f.Verdict, 40))
	}
	if f.Verdict != VerdictApprove && strings.TrimSpace(f.Text) == "" {
		return Errorf(CodeInvalid, "feedback: required (say what must change)")
	}
	return CheckText("feedback", f.Text, MaxDescriptionLen)
}

// TransitionResult says what a transition did.
type TransitionResult struct {
	Task Task       `json:"task"`
	From TaskStatus `json:"from"`
	To   TaskStatus `json:"to"`
	// Duplicate is true when the same event had already been applied and
	// nothing changed.
	Duplicate bool `json:"duplicate,omitempty"`
	// Promoted lists tasks that became READY in the same transaction.
	Promoted []string `json:"promoted,omitempty"`
	// Blocked lists tasks blocked by the UPSTREAM_FAILED cascade.
	Blocked []string `json:"blocked,omitempty"`
	// Reopened lists tasks returned to DEFINED by UPSTREAM_REOPENED.
	Reopened []string `json:"reopened,omitempty"`
}
