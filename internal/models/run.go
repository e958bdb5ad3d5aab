package models

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Run is one attempt of a task on an agent.
type Run struct {
	ID             int64      `json:"id"`
	TaskID         string     `json:"task_id"`
	AgentID        string     `json:"agent_id"`
	ProjectID      string     `json:"project_id"`
	Attempt        int        `json:"attempt"`
	PID            *int       `json:"pid,omitempty"`
	CheckoutPath   string     `json:"checkout_path,omitempty"`
	StartedAt      time.Time  `json:"started_at"`
	LastActivityAt time.Time  `json:"last_activity_at"`
	EndedAt        *time.Time `json:"ended_at,omitempty"`
	Outcome        RunOutcome `json:"outcome,omitempty"`
	// Error is why the run failed; on a completed run, what its CLI
	// refused to do (a write its sandbox rejected), when it said so.
	Error string `json:"error,omitempty"`
	// Kind is RunWork (the task's own work) or RunReview (a QA review of it).
	Kind string `json:"kind"`
	// SessionID is the agent CLI's session of this run, if it reported one.
	SessionID string `json:"session_id,omitempty"`
	// CLI is the agent type whose CLI ran (claude, codex, …) and
	// CLIVersion the version it reported, "" when unknown.
	CLI        string `json:"cli,omitempty"`
	CLIVersion string `json:"cli_version,omitempty"`
	// CLIWarning says why CLIVersion is not known to be good (see
	// CLIVersionWarning); it is derived, not stored.
	CLIWarning string `json:"cli_warning,omitempty"`
	// Usage is the tokens the run used, cache reads and writes apart.
	Usage RunTokens `json:"usage"`
	// CostUSD is the cost the CLI reported, when it did (Claude's
	// total_cost_usd; for a resumed session the CLI may count the whole
	// session).
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// DeniedTools are the tool calls the CLI refused for want of a
	// permission, by tool name.
	DeniedTools []string `json:"denied_tools,omitempty"`
	// MCPNotReady names the MCP servers that were not connected when the
	// CLI began its first turn, each as "name (status)".
	MCPNotReady []string `json:"mcp_not_ready,omitempty"`
	// LeaseGeneration is the generation of the daemon lease under which
	// the run was claimed (0: before generations were recorded, or a store
	// without a lease): a daemon never signals a run of a newer
	// generation than its own.
	LeaseGeneration int64 `json:"-"`
}

// RunTokens is the token usage of one run.
type RunTokens struct {
	Input      int64 `json:"input_tokens"`
	Output     int64 `json:"output_tokens"`
	CacheRead  int64 `json:"cache_read_tokens"`
	CacheWrite int64 `json:"cache_write_tokens"`
}

// RunCLI is what a run's CLI showed of itself at start.
type RunCLI struct {
	CLI         string
	Version     string
	MCPNotReady []string
}

// Run kinds.
const (
	RunWork   = "work"
	RunReview = "review"
)

// RunOutcome names how an agent run ended, as its row records it; an open
// run has none ("").
type RunOutcome string

// Run outcomes.
const (
	// RunOutcomeCompleted: the agent completed its work (AGENT_COMPLETED).
	RunOutcomeCompleted RunOutcome = "completed"
	// RunOutcomeFailed: the agent failed, or a reviewer ended without a verdict.
	RunOutcomeFailed RunOutcome = "failed"
	// RunOutcomeStopped: the daemon stopped the run (an admin event, shutdown).
	RunOutcomeStopped RunOutcome = "stopped"
	// RunOutcomeTimeout: the run was quiet for too long or ran too long.
	RunOutcomeTimeout RunOutcome = "timeout"
	// RunOutcomeExecutionError: the run could not start or be recorded.
	RunOutcomeExecutionError RunOutcome = "execution_error"
	// RunOutcomePaused: a rate limit or the end of the tokens paused it.
	RunOutcomePaused RunOutcome = "paused"
	// RunOutcomeRecovered: a restart found it open and closed it.
	RunOutcomeRecovered RunOutcome = "recovered"
	// RunOutcomeStageFailed: a review whose change could not be staged.
	RunOutcomeStageFailed RunOutcome = "stage_failed"
	// RunOutcomeApproved and RunOutcomeRejected: a review's verdict.
	RunOutcomeApproved RunOutcome = "approved"
	RunOutcomeRejected RunOutcome = "rejected"
	// RunOutcomeVerifyFailed: the work of a completed run failed its
	// verification (recorded after the run ended).
	RunOutcomeVerifyFailed RunOutcome = "verify_failed"
	// RunOutcomeDeliverFailed: the work of a completed run could not be
	// delivered (recorded by earlier versions).
	RunOutcomeDeliverFailed RunOutcome = "deliver_failed"
)

// RunOutcomes lists every run outcome.
var RunOutcomes = []RunOutcome{
	RunOutcomeCompleted, RunOutcomeFailed, RunOutcomeStopped, RunOutcomeTimeout, RunOutcomeExecutionError,
	RunOutcomePaused, RunOutcomeRecovered, RunOutcomeStageFailed, RunOutcomeApproved, RunOutcomeRejected,
	RunOutcomeVerifyFailed, RunOutcomeDeliverFailed,
}

// Valid reports whether o is one of the run outcomes.
func (o RunOutcome) Valid() bool { return slices.Contains(RunOutcomes, o) }

// ProjectUsage is one project's figures for a scheduling round.
type ProjectUsage struct {
	Project Project `json:"project"`
	// AgentSeconds is the agent time its runs used in the window.
	AgentSeconds float64 `json:"agent_seconds"`
	// CompletedInWindow counts its tasks completed in the window.
	CompletedInWindow int `json:"completed_in_window"`
	// Running counts its tasks that hold a slot (see SchedulingState.Running).
	Running int `json:"running"`
}

// SchedulingState is what one scheduling round reads before its READY
// tasks (read per project with ReadyQuery): bounded by the running work and
// the agents, never by history.
type SchedulingState struct {
	Now      time.Time      `json:"now"`
	Projects []ProjectUsage `json:"projects"`
	// Running holds the tasks that hold a slot: an agent or a process of
	// the daemon works for them (ASSIGNED, IN_PROGRESS, WAITING_INPUT, a
	// task with an open run, VERIFYING while its checks run or its work
	// is merged).
	Running []Task `json:"running"`
	// Waiting holds the tasks in a running status that hold no slot: they
	// wait for a person or a pull request (AWAITING_APPROVAL, VERIFYING
	// for a person's decision or for a reviewer to become free).
	Waiting    []Task  `json:"waiting"`
	IdleAgents []Agent `json:"idle_agents"`
	// Agents are all the agents, for saying why a task waits.
	Agents []Agent `json:"agents"`
	// Runners are the runners, for their agents' labels and capacity.
	Runners []Runner `json:"runners,omitempty"`
	// NextNotBefore is the earliest not_before of a READY task after Now.
	NextNotBefore *time.Time `json:"next_not_before,omitempty"`
	// TokensInWindow is the token use of all projects in the window.
	TokensInWindow int64 `json:"tokens_in_window"`
	// ReadyGeneration moves whenever a task becomes READY or a READY task
	// changes otherwise than by having its waiting reason written; equal
	// values mean the READY tasks' inputs to their waiting reasons are
	// unchanged.
	ReadyGeneration int64 `json:"-"`
}

// ReadyQuery reads one page of a project's READY tasks that can start at
// Now, in the order they start (priority, then age, then id).
type ReadyQuery struct {
	ProjectID string
	Now       time.Time
	// After continues after the task with this position (nil: from the start).
	After *ReadyCursor
	// Exclude leaves out groups of tasks that cannot start this round (a
	// rule or a workflow step at its limit).
	Exclude []ReadyExclusion
	Limit   int
}

// ReadyCursor is a READY task's position in its project's start order:
// priority, then submission.
type ReadyCursor struct {
	Priority      int
	SubmissionSeq int64
}

// ReadyExclusion describes READY tasks that cannot start: those of Kind
// (any kind when empty), in ProjectID (any when empty), whose metadata
// equals Fields (a nil value: the key is missing) and whose remaining work
// is more than MaxRemaining (when set); or, when RunID is set, the tasks of
// that run and step whose step concurrency is at most StepRunning.
type ReadyExclusion struct {
	ProjectID string
	// Rules, when set, limits the exclusion to tasks whose own rules are
	// stored as exactly this text (a task's rules column).
	Rules        string
	Kind         string
	Fields       map[string]*string
	MaxRemaining *int
	RunID, Step  string
	StepRunning  int
	// Code and Reason are the waiting reason of the tasks excluded.
	Code, Reason string
}

// Matches reports whether e describes t (its status aside).
func (e ReadyExclusion) Matches(t Task) bool {
	if e.RunID != "" {
		return t.RunID == e.RunID && t.StepName == e.Step && t.StepConcurrency > 0 && t.StepConcurrency <= e.StepRunning
	}
	if (e.ProjectID != "" && t.ProjectID != e.ProjectID) || (e.Kind != "" && t.Kind != e.Kind) {
		return false
	}
	if e.Rules != "" {
		var own []Rule
		if err := json.Unmarshal([]byte(e.Rules), &own); err != nil || !reflect.DeepEqual(own, t.Rules) {
			return false
		}
	}
	for k, want := range e.Fields {
		v, ok := t.Metadata[k]
		if ok != (want != nil) || (ok && v != *want) {
			return false
		}
	}
	return e.MaxRemaining == nil || RemainingWork(t.ExpectedCount, t.SuccessCount, t.FailureCount) > *e.MaxRemaining
}

// WaitingUpdate writes one waiting reason on READY tasks of a project,
// only on those that do not carry it already; Scope says which.
type WaitingUpdate struct {
	ProjectID string
	Scope     WaitScope
	Now       time.Time
	// After and Exclude: see WaitRest and WaitExcluded.
	After   *ReadyCursor
	Exclude []ReadyExclusion
	TaskIDs []string
	Code    string
	Reason  string
}

// WaitScope says which READY tasks of a project a WaitingUpdate writes.
type WaitScope int

// The scopes of a WaitingUpdate.
const (
	// WaitAll: every READY task of the project.
	WaitAll WaitScope = iota
	// WaitFuture: those whose not_before is after Now; the reason is
	// followed by each task's own time.
	WaitFuture
	// WaitExcluded: those that can start at Now and match Exclude[0].
	WaitExcluded
	// WaitTasks: the tasks of TaskIDs.
	WaitTasks
	// WaitRest: those after After in the start order that can start at
	// Now and match none of Exclude.
	WaitRest
)

// Waiting reason codes of a READY task.
const (
	WaitingProjectPaused = "project_paused"
	WaitingBudget        = "budget_exhausted"
	WaitingNoAgent       = "no_agent"
	WaitingAgentsBusy    = "agents_busy"
	WaitingAgentResting  = "agent_resting"
	WaitingSlots         = "slots_busy"
	WaitingRule          = "rule_limit"
	WaitingStep          = "step_limit"
	WaitingNotBefore     = "not_before"
	WaitingQueued        = "queued"
	// WaitingAgentType: the task is routed to an agent type, and no idle
	// agent of that type works on its project.
	WaitingAgentType = "agent_type"
	// WaitingRunnerLabels: the task needs runner labels of its own, and no
	// idle agent on a runner with all of them works on its project.
	WaitingRunnerLabels = "runner_labels"
)

// WaitingLanding is the waiting code of a task whose verified (or
// approved) work waits to be merged into a LINK repository's default
// branch, checked out with local changes (verification phase landing).
const WaitingLanding = "landing"

// RunEnd is how a run ended and what it does to its task.
type RunEnd struct {
	RunID int64
	// Event is applied to the task when set (AGENT_COMPLETED, AGENT_FAILED,
	// TIMEOUT, EXECUTION_ERROR, TOKENS_EXHAUSTED, RECOVERY, …), expecting the
	// task in ExpectFrom when that is set.
	Event       TaskEvent
	ExpectFrom  TaskStatus
	Reason      string
	ResumeAfter *time.Time
	// Outcome names the end for the run row (RunOutcomeCompleted, …).
	Outcome RunOutcome
	// Error keeps the failure text for the next attempt's context; on a
	// completed run, what its CLI refused (see Run.Error).
	Error string
	// AgentError, when set, puts the agent in ERROR (it takes no task until
	// a person resumes it) instead of freeing it: the run could not start
	// because of the agent itself (its command, its checkout).
	AgentError string
	// Result and Verification, when set, are saved in the same transaction
	// (the task's result, the start of its verification) as long as the run
	// is still its task's current run.
	Result       *Completion
	Verification *Verification
}

// Workspace is an agent's checkout prepared for one task.
type Workspace struct {
	// Dir is the working directory of the run.
	Dir string `json:"dir"`
	// Branch is the task branch checked out in Dir ("" without a repo).
	Branch string `json:"branch,omitempty"`
	// DefaultBranch is the branch the work is merged into.
	DefaultBranch string `json:"default_branch,omitempty"`
	// Base is the commit of the default branch the task branch starts from
	// or was brought up to date with.
	Base string `json:"base,omitempty"`
	// Conflicts lists files left in conflict when the task branch was
	// brought up to date with the default branch: the agent resolves them.
	Conflicts []string `json:"conflicts,omitempty"`
	// Rescued names the branch where uncommitted changes found in the
	// checkout (left by a killed run) were committed before it was reset.
	Rescued string `json:"rescued,omitempty"`
}

// Staged is a verification checkout of a task: its branch merged into the
// current default branch, in a daemon-owned directory.
type Staged struct {
	// Dir is where checks and reviewers run.
	Dir string `json:"dir"`
	// Diff is the task's change against the default branch.
	Diff string `json:"diff"`
	// Files are the files the task changes.
	Files []string `json:"files,omitempty"`
}

// Delivery is what merging a task's branch did.
type Delivery struct {
	// Merged is true when the default branch now contains the task branch.
	Merged bool `json:"merged"`
	// Commit is the default branch's commit after the merge.
	Commit string `json:"commit,omitempty"`
	// Note says what a delivery did besides merging ("no repository").
	Note string `json:"note,omitempty"`
	// Waiting says why a delivery could not move the default branch yet
	// (it is checked out in a working tree with local changes) and what
	// finishes it; nothing was merged and the task branch is kept.
	Waiting string `json:"waiting,omitempty"`
}

// LandResult answers a retry of a project's waiting landings
// (`agentqueued land PROJECT`).
type LandResult struct {
	ProjectID string `json:"project_id"`
	// Landed lists the tasks whose work landed (their status and reason
	// now); Waiting those whose landing still waits, with why; Failed
	// those whose work could not be merged now (the default branch moved
	// and the merge conflicts: the task runs again with the conflict to
	// resolve), with why and the files in conflict.
	Landed  []LandTask `json:"landed"`
	Waiting []LandTask `json:"waiting"`
	Failed  []LandTask `json:"failed"`
}

// LandTask is one task of a LandResult.
type LandTask struct {
	TaskID string     `json:"task_id"`
	Status TaskStatus `json:"status"`
	Reason string     `json:"reason"`
	// Files are the files in conflict, for a task of Failed whose merge
	// conflicts.
	Files []string `json:"files,omitempty"`
}

// Verification is the recorded phase of a task in VERIFYING (or waiting in
// AWAITING_APPROVAL for a person's approval of its work), so that a restart
// resumes it.
//
// In JSON its note is one "detail" string (see Detail), as it always was.
type Verification struct {
	TaskID  string            `json:"task_id"`
	Attempt int               `json:"attempt"`
	Phase   VerificationPhase `json:"phase"`
	// Source is the checkout the task's work is in (the worker's).
	Source string `json:"source,omitempty"`
	VerificationNote
	UpdatedAt time.Time `json:"updated_at"`
}

// VerificationNote is what a verification's phase records besides the
// phase itself.
type VerificationNote struct {
	// Event completes the task once its work has landed: set in the
	// deliver phase, and in the landing phase of a VERIFYING task
	// (VERIFY_PASSED, or HUMAN_APPROVED after a person's approval).
	Event TaskEvent
	// Actor is the person who decided: set in the approved and rejected
	// phases, and in the landing phase of a task awaiting approval.
	Actor string
	// Text is the reason of Event, the person's note, or what the phase
	// waits for or found.
	Text string
}

// Detail is the note as one text, as it is shown: "<event>\n<text>" when
// an event is set, "<actor>\n<text>" when an actor is, else the text.
func (n VerificationNote) Detail() string {
	switch {
	case n.Event != "":
		return string(n.Event) + "\n" + n.Text
	case n.Actor != "":
		return n.Actor + "\n" + n.Text
	}
	return n.Text
}

// ParseVerificationNote reads a note written as one text (Detail) in the
// given phase: "<event>\n<text>" in the deliver phase, "<actor>\n<text>"
// in the approved and rejected phases, either in the landing phase (an
// event when the first line is one), else the text alone.
func ParseVerificationNote(phase VerificationPhase, detail string) VerificationNote {
	first, rest, _ := strings.Cut(detail, "\n")
	switch phase {
	case PhaseDeliver:
		return VerificationNote{Event: TaskEvent(first), Text: rest}
	case PhaseApproved, PhaseRejected:
		return VerificationNote{Actor: first, Text: rest}
	case PhaseLanding:
		if TaskEvent(first).Valid() {
			return VerificationNote{Event: TaskEvent(first), Text: rest}
		}
		return VerificationNote{Actor: first, Text: rest}
	}
	return VerificationNote{Text: detail}
}

// verificationJSON is a Verification as JSON has it.
type verificationJSON struct {
	TaskID    string            `json:"task_id"`
	Attempt   int               `json:"attempt"`
	Phase     VerificationPhase `json:"phase"`
	Source    string            `json:"source,omitempty"`
	Detail    string            `json:"detail,omitempty"`
	UpdatedAt time.Time         `json:"updated_at"`
}

// MarshalJSON writes the note as "detail" (see Detail).
func (v Verification) MarshalJSON() ([]byte, error) {
	return json.Marshal(verificationJSON{TaskID: v.TaskID, Attempt: v.Attempt, Phase: v.Phase, Source: v.Source,
		Detail: v.Detail(), UpdatedAt: v.UpdatedAt})
}

// UnmarshalJSON reads "detail" back into the note (see ParseVerificationNote).
func (v *Verification) UnmarshalJSON(data []byte) error {
	var j verificationJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*v = Verification{TaskID: j.TaskID, Attempt: j.Attempt, Phase: j.Phase, Source: j.Source,
		VerificationNote: ParseVerificationNote(j.Phase, j.Detail), UpdatedAt: j.UpdatedAt}
	return nil
}

// VerificationPhase is where a task's verification stands.
type VerificationPhase string

// Verification phases.
const (
	// PhaseChecks: the task's test commands run (AUTO_TEST).
	PhaseChecks VerificationPhase = "checks"
	// PhaseReview: a reviewer agent is to review, or reviewing (QA_AGENT).
	PhaseReview VerificationPhase = "review"
	// PhaseHuman: a person is to approve or reject (HUMAN).
	PhaseHuman VerificationPhase = "human"
	// PhaseDeliver: the checks passed; the branch is being merged.
	PhaseDeliver VerificationPhase = "deliver"
	// PhaseApproval: the task requires approval and no pull request is
	// opened for it; it waits in AWAITING_APPROVAL, unmerged, for a person.
	PhaseApproval VerificationPhase = "approval"
	// PhaseApproved: a person approved the work of a task waiting in
	// AWAITING_APPROVAL; its branch is being merged.
	PhaseApproved VerificationPhase = "approved"
	// PhaseRejected: a person rejected the work (the note's actor and
	// text say who and why) until VERIFY_FAILED (from VERIFYING) or ADMIN_RESTART
	// (from AWAITING_APPROVAL) applies; a restart applies it then.
	PhaseRejected VerificationPhase = "rejected"
	// PhaseLanding: the verified (or approved) work waits to be merged
	// into a LINK repository's default branch, which is checked out in a
	// working tree with local changes; the note is the one of the phase
	// it came from (deliver or approved). `agentqueued land` retries it.
	PhaseLanding VerificationPhase = "landing"
)

// VerificationPhases lists every verification phase.
var VerificationPhases = []VerificationPhase{
	PhaseChecks, PhaseReview, PhaseHuman, PhaseDeliver, PhaseApproval, PhaseApproved, PhaseRejected, PhaseLanding,
}

// Valid reports whether p is one of the verification phases.
func (p VerificationPhase) Valid() bool { return slices.Contains(VerificationPhases, p) }

// Plan is a set of subtasks a task's agent proposed, created when the task
// completes (after a person's approval when its project requires it).
type Plan struct {
	ID     int64       `json:"id"`
	TaskID string      `json:"task_id"`
	Source string      `json:"source"`
	Tasks  []BatchTask `json:"tasks"`
	// Status is pending, created, rejected or failed.
	Status    string     `json:"status"`
	Error     string     `json:"error,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	DecidedAt *time.Time `json:"decided_at,omitempty"`
}

// PullRequest is the pull request a task lands through, and what the
// watcher last saw of it.
type PullRequest struct {
	TaskID    string `json:"task_id"`
	ProjectID string `json:"project_id"`
	Owner     string `json:"owner"`
	Repo      string `json:"repo"`
	Number    int    `json:"number"`
	URL       string `json:"url"`
	Branch    string `json:"branch"`
	// State is open, merged or closed.
	State string `json:"state"`
	// ETag and ReviewsETag make polls conditional (304s are free).
	ETag        string `json:"-"`
	ReviewsETag string `json:"-"`
	// LastReviewID is the newest review already acted on.
	LastReviewID int64     `json:"-"`
	NextCheckAt  time.Time `json:"next_check_at"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// Pull request states.
const (
	PROpen   = "open"
	PRMerged = "merged"
	PRClosed = "closed"
)

// PRContent is what a task's pull request says of its work.
type PRContent struct {
	Summary string
	Files   []string
	// Checks says which checks passed (test commands, a reviewer).
	Checks string
}

// PRCheck is what a check of a pull request found.
type PRCheck struct {
	// NotModified is GitHub's 304: nothing changed since the last check.
	NotModified bool
	State       string
	ETag        string
	ReviewsETag string
	// ChangesRequested are the reviews asking for changes since
	// LastReviewID, newest last.
	ChangesRequested []Feedback
	LastReviewID     int64
}

// RunStart is what a work run's start records: its process and checkout,
// the task's branch (empty: none) and the repository of the agent's
// checkout (nil: unchanged; empty: none).
type RunStart struct {
	PID          int
	CheckoutPath string
	Branch       string
	RepoID       *string
}
