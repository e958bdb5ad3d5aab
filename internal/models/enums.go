package models

import (
	"fmt"
	"slices"
	"strings"
)

// TaskStatus is a task's lifecycle position; the values are the spec's names.
type TaskStatus string

// The eleven task statuses of the Agent Queue specification.
const (
	StatusDefined          TaskStatus = "DEFINED"
	StatusReady            TaskStatus = "READY"
	StatusAssigned         TaskStatus = "ASSIGNED"
	StatusInProgress       TaskStatus = "IN_PROGRESS"
	StatusWaitingInput     TaskStatus = "WAITING_INPUT"
	StatusPaused           TaskStatus = "PAUSED"
	StatusVerifying        TaskStatus = "VERIFYING"
	StatusAwaitingApproval TaskStatus = "AWAITING_APPROVAL"
	StatusCompleted        TaskStatus = "COMPLETED"
	StatusFailed           TaskStatus = "FAILED"
	StatusBlocked          TaskStatus = "BLOCKED"
)

// TaskStatuses lists every task status in lifecycle order.
var TaskStatuses = []TaskStatus{
	StatusDefined, StatusReady, StatusAssigned, StatusInProgress, StatusWaitingInput,
	StatusPaused, StatusVerifying, StatusAwaitingApproval, StatusCompleted, StatusFailed, StatusBlocked,
}

// Valid reports whether s is one of the eleven statuses.
func (s TaskStatus) Valid() bool { return slices.Contains(TaskStatuses, s) }

// Terminal reports whether no automatic transition leaves s (only admin events do).
func (s TaskStatus) Terminal() bool { return s == StatusCompleted || s == StatusBlocked }

// Running reports whether a task in s holds an agent or is being finished
// (assigned, running, waiting for a human, verifying, or awaiting approval).
func (s TaskStatus) Running() bool {
	switch s {
	case StatusAssigned, StatusInProgress, StatusWaitingInput, StatusVerifying, StatusAwaitingApproval:
		return true
	}
	return false
}

// TaskEvent is an input to the task state machine; the values are the spec's
// names plus the extensions documented in internal/statemachine.
type TaskEvent string

// The 23 events of the Agent Queue specification.
const (
	EventDepsMet         TaskEvent = "DEPS_MET"
	EventAssigned        TaskEvent = "ASSIGNED"
	EventAgentStarted    TaskEvent = "AGENT_STARTED"
	EventAgentCompleted  TaskEvent = "AGENT_COMPLETED"
	EventAgentFailed     TaskEvent = "AGENT_FAILED"
	EventTokensExhausted TaskEvent = "TOKENS_EXHAUSTED"
	EventAgentQuestion   TaskEvent = "AGENT_QUESTION"
	EventHumanReplied    TaskEvent = "HUMAN_REPLIED"
	EventInputTimeout    TaskEvent = "INPUT_TIMEOUT"
	EventResumeTimer     TaskEvent = "RESUME_TIMER"
	EventVerifyPassed    TaskEvent = "VERIFY_PASSED"
	EventVerifyFailed    TaskEvent = "VERIFY_FAILED"
	EventPRCreated       TaskEvent = "PR_CREATED"
	EventPRMerged        TaskEvent = "PR_MERGED"
	EventRetry           TaskEvent = "RETRY"
	EventMaxRetries      TaskEvent = "MAX_RETRIES"
	EventAdminSkip       TaskEvent = "ADMIN_SKIP"
	EventAdminStop       TaskEvent = "ADMIN_STOP"
	EventAdminRestart    TaskEvent = "ADMIN_RESTART"
	EventPRClosed        TaskEvent = "PR_CLOSED"
	EventTimeout         TaskEvent = "TIMEOUT"
	EventExecutionError  TaskEvent = "EXECUTION_ERROR"
	EventRecovery        TaskEvent = "RECOVERY"
)

// The extension events decided in the design (see internal/statemachine/doc.go).
const (
	// EventHumanApproved completes a task awaiting approval without a PR.
	EventHumanApproved TaskEvent = "HUMAN_APPROVED"
	// EventUpstreamFailed blocks a DEFINED task whose required upstream is BLOCKED.
	EventUpstreamFailed TaskEvent = "UPSTREAM_FAILED"
	// EventUpstreamReopened returns a cascade-blocked task to DEFINED when its root is repaired.
	EventUpstreamReopened TaskEvent = "UPSTREAM_REOPENED"
	// EventApprovalRequested moves a verified task to AWAITING_APPROVAL when
	// a person must approve what it proposed (a plan) before it completes.
	EventApprovalRequested TaskEvent = "APPROVAL_REQUESTED"
	// EventPRUnavailable blocks a verified task that must land through a
	// pull request that cannot be opened (no GitHub configured).
	EventPRUnavailable TaskEvent = "PR_UNAVAILABLE"
	// EventRunStopped blocks an unfinished task of a workflow run that will
	// not go on: the run was cancelled, or its step could not fan out.
	EventRunStopped TaskEvent = "RUN_STOPPED"
	// EventAdminCancel blocks any unfinished task at a person's request:
	// its run, if any, ends, and it is recorded as cancelled, not failed.
	EventAdminCancel TaskEvent = "ADMIN_CANCEL"
	// EventDepsAdded returns a READY task to DEFINED when a person adds a
	// dependency it has to wait for.
	EventDepsAdded TaskEvent = "DEPS_ADDED"
	// EventTimeoutFailed fails a run that a time limit ended (start, idle,
	// heartbeat or max_runtime): like AGENT_FAILED it leads to FAILED, so
	// the task is retried with backoff while retries remain.
	EventTimeoutFailed TaskEvent = "TIMEOUT_FAILED"
	// EventReplyRequeued returns a WAITING_INPUT task to READY when its
	// question is answered after the run that asked has ended (a restart,
	// the agent gave up on the call): the task runs again, its session
	// resumed where the CLI keeps one, with the answer in its prompt.
	EventReplyRequeued TaskEvent = "REPLY_REQUEUED"
)

// TaskEvents lists every event: the spec's 23, then the extensions.
var TaskEvents = []TaskEvent{
	EventDepsMet, EventAssigned, EventAgentStarted, EventAgentCompleted, EventAgentFailed,
	EventTokensExhausted, EventAgentQuestion, EventHumanReplied, EventInputTimeout, EventResumeTimer,
	EventVerifyPassed, EventVerifyFailed, EventPRCreated, EventPRMerged, EventRetry, EventMaxRetries,
	EventAdminSkip, EventAdminStop, EventAdminRestart, EventPRClosed, EventTimeout, EventExecutionError,
	EventRecovery, EventHumanApproved, EventUpstreamFailed, EventUpstreamReopened, EventApprovalRequested,
	EventPRUnavailable, EventRunStopped, EventAdminCancel, EventDepsAdded, EventTimeoutFailed, EventReplyRequeued,
}

// Valid reports whether e is a known event.
func (e TaskEvent) Valid() bool { return slices.Contains(TaskEvents, e) }

// AdminEvents are the events a person may send through the API or chat.
var AdminEvents = []TaskEvent{EventAdminSkip, EventAdminStop, EventAdminRestart, EventAdminCancel}

// IsAdmin reports whether e is one of AdminEvents.
func (e TaskEvent) IsAdmin() bool { return slices.Contains(AdminEvents, e) }

// AgentState is an agent worker's operational status.
type AgentState string

// Agent states of the specification.
const (
	AgentIdle     AgentState = "IDLE"
	AgentStarting AgentState = "STARTING"
	AgentBusy     AgentState = "BUSY"
	AgentPaused   AgentState = "PAUSED"
	AgentError    AgentState = "ERROR"
)

// AgentStates lists every agent state.
var AgentStates = []AgentState{AgentIdle, AgentStarting, AgentBusy, AgentPaused, AgentError}

// Valid reports whether s is a known agent state.
func (s AgentState) Valid() bool { return slices.Contains(AgentStates, s) }

// ProjectStatus controls whether a project takes part in scheduling.
type ProjectStatus string

// Project statuses of the specification.
const (
	ProjectActive   ProjectStatus = "ACTIVE"
	ProjectPaused   ProjectStatus = "PAUSED"
	ProjectArchived ProjectStatus = "ARCHIVED"
)

// ProjectStatuses lists every project status.
var ProjectStatuses = []ProjectStatus{ProjectActive, ProjectPaused, ProjectArchived}

// Valid reports whether s is a known project status.
func (s ProjectStatus) Valid() bool { return slices.Contains(ProjectStatuses, s) }

// VerificationType says how a task's work is checked before it completes.
type VerificationType string

// Verification types of the specification.
const (
	VerifyAutoTest VerificationType = "AUTO_TEST"
	VerifyQAAgent  VerificationType = "QA_AGENT"
	VerifyHuman    VerificationType = "HUMAN"
)

// VerificationTypes lists every verification type.
var VerificationTypes = []VerificationType{VerifyAutoTest, VerifyQAAgent, VerifyHuman}

// Valid reports whether v is a known verification type.
func (v VerificationType) Valid() bool { return slices.Contains(VerificationTypes, v) }

// RepoSourceType says how a project's repository is obtained.
type RepoSourceType string

// Repo source types of the specification.
const (
	RepoClone RepoSourceType = "CLONE"
	RepoLink  RepoSourceType = "LINK"
	RepoInit  RepoSourceType = "INIT"
)

// RepoSourceTypes lists every repo source type.
var RepoSourceTypes = []RepoSourceType{RepoClone, RepoLink, RepoInit}

// Valid reports whether t is a known source type.
func (t RepoSourceType) Valid() bool { return slices.Contains(RepoSourceTypes, t) }

// EdgeResolution is the state of one dependency edge's fact.
type EdgeResolution string

// Edge resolutions. An edge is decided once per run of its upstream.
const (
	// EdgePending: the upstream has not finished in a way that decides the edge.
	EdgePending EdgeResolution = "PENDING"
	// EdgeSatisfied: the upstream COMPLETED (or, for requires_success=false, BLOCKED).
	EdgeSatisfied EdgeResolution = "SATISFIED"
	// EdgeBroken: the upstream is BLOCKED and the edge requires success.
	EdgeBroken EdgeResolution = "BROKEN"
)

// EdgeOutcome records how the upstream of a decided edge ended.
type EdgeOutcome string

// Edge outcomes; a PENDING edge has none.
const (
	// OutcomeSuccess: the upstream COMPLETED through its own work.
	OutcomeSuccess EdgeOutcome = "SUCCESS"
	// OutcomeFailed: the upstream became BLOCKED by a failure, a timeout, a
	// stop or the cascade of an upstream of its own.
	OutcomeFailed EdgeOutcome = "FAILED"
	// OutcomeSkipped: a person skipped the upstream to COMPLETED (ADMIN_SKIP).
	OutcomeSkipped EdgeOutcome = "SKIPPED"
	// OutcomeCancelled: the upstream was cancelled (ADMIN_CANCEL) or its
	// workflow run stopped (RUN_STOPPED).
	OutcomeCancelled EdgeOutcome = "CANCELLED"
)

// EdgeOutcomeOf returns the outcome an event that takes a task to status
// records on the task's outgoing edges.
func EdgeOutcomeOf(event TaskEvent, status TaskStatus) EdgeOutcome {
	switch {
	case event == EventAdminSkip:
		return OutcomeSkipped
	case event == EventAdminCancel || event == EventRunStopped:
		return OutcomeCancelled
	case status == StatusCompleted:
		return OutcomeSuccess
	}
	return OutcomeFailed
}

// CancelReason is the status reason of a task cancelled by actor, with the
// person's own reason, if any, after a colon.
func CancelReason(actor, reason string) string {
	if actor == "" {
		actor = "unknown"
	}
	if reason == "" {
		return "cancelled by " + actor
	}
	return "cancelled by " + actor + ": " + reason
}

// StatusCounts says tasks counts by status on one line, in the order tasks
// go through the statuses: "ready 2 · in_progress 1 · completed 5", or
// "no tasks".
func StatusCounts(counts map[TaskStatus]int) string {
	var parts []string
	for _, st := range TaskStatuses {
		if n := counts[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", strings.ToLower(string(st)), n))
		}
	}
	if len(parts) == 0 {
		return "no tasks"
	}
	return strings.Join(parts, " · ")
}
