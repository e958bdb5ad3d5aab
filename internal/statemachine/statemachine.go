package statemachine

import (
	"fmt"
	"slices"

	"github.com/agentqueued/agentqueued/internal/models"
)

type key struct {
	from  models.TaskStatus
	event models.TaskEvent
}

// Row is one entry of the transition table.
type Row struct {
	From  models.TaskStatus
	Event models.TaskEvent
	To    models.TaskStatus
}

// rows is the transition table: the Agent Queue specification's rows, then
// the extensions (see doc.go). It is the only authority on legal status changes.
var rows = []Row{
	// Core lifecycle.
	{models.StatusDefined, models.EventDepsMet, models.StatusReady},
	{models.StatusReady, models.EventAssigned, models.StatusAssigned},
	{models.StatusAssigned, models.EventAgentStarted, models.StatusInProgress},
	{models.StatusInProgress, models.EventAgentCompleted, models.StatusVerifying},
	{models.StatusVerifying, models.EventVerifyPassed, models.StatusCompleted},
	{models.StatusVerifying, models.EventPRCreated, models.StatusAwaitingApproval},
	{models.StatusAwaitingApproval, models.EventPRMerged, models.StatusCompleted},
	// Failure and retry.
	{models.StatusInProgress, models.EventAgentFailed, models.StatusFailed},
	{models.StatusVerifying, models.EventVerifyFailed, models.StatusFailed},
	{models.StatusFailed, models.EventRetry, models.StatusReady},
	{models.StatusFailed, models.EventMaxRetries, models.StatusBlocked},
	// Pause and resume.
	{models.StatusInProgress, models.EventTokensExhausted, models.StatusPaused},
	{models.StatusInProgress, models.EventAgentQuestion, models.StatusWaitingInput},
	{models.StatusWaitingInput, models.EventHumanReplied, models.StatusInProgress},
	{models.StatusWaitingInput, models.EventInputTimeout, models.StatusPaused},
	{models.StatusPaused, models.EventResumeTimer, models.StatusReady},
	// Direct shortcuts from IN_PROGRESS.
	{models.StatusInProgress, models.EventMaxRetries, models.StatusBlocked},
	{models.StatusInProgress, models.EventRetry, models.StatusReady},
	// Administrative.
	{models.StatusBlocked, models.EventAdminSkip, models.StatusCompleted},
	{models.StatusFailed, models.EventAdminSkip, models.StatusCompleted},
	{models.StatusInProgress, models.EventAdminStop, models.StatusBlocked},
	{models.StatusBlocked, models.EventAdminRestart, models.StatusReady},
	{models.StatusFailed, models.EventAdminRestart, models.StatusReady},
	{models.StatusCompleted, models.EventAdminRestart, models.StatusReady},
	{models.StatusPaused, models.EventAdminRestart, models.StatusReady},
	{models.StatusDefined, models.EventAdminRestart, models.StatusReady},
	{models.StatusAssigned, models.EventAdminRestart, models.StatusReady},
	{models.StatusAwaitingApproval, models.EventAdminRestart, models.StatusReady},
	{models.StatusVerifying, models.EventAdminRestart, models.StatusReady},
	{models.StatusWaitingInput, models.EventAdminRestart, models.StatusReady},
	// PR lifecycle.
	{models.StatusAwaitingApproval, models.EventPRClosed, models.StatusBlocked},
	// Errors and timeouts.
	{models.StatusInProgress, models.EventTimeout, models.StatusBlocked},
	{models.StatusAssigned, models.EventTimeout, models.StatusBlocked},
	{models.StatusAssigned, models.EventExecutionError, models.StatusReady},
	// Daemon recovery.
	{models.StatusInProgress, models.EventRecovery, models.StatusReady},
	{models.StatusAssigned, models.EventRecovery, models.StatusReady},
	// Extensions (see doc.go).
	{models.StatusAwaitingApproval, models.EventHumanApproved, models.StatusCompleted},
	{models.StatusDefined, models.EventUpstreamFailed, models.StatusBlocked},
	{models.StatusBlocked, models.EventUpstreamReopened, models.StatusDefined},
	{models.StatusVerifying, models.EventHumanApproved, models.StatusCompleted},
	{models.StatusVerifying, models.EventApprovalRequested, models.StatusAwaitingApproval},
	{models.StatusVerifying, models.EventPRUnavailable, models.StatusBlocked},
	{models.StatusDefined, models.EventRunStopped, models.StatusBlocked},
	{models.StatusReady, models.EventRunStopped, models.StatusBlocked},
	{models.StatusAssigned, models.EventRunStopped, models.StatusBlocked},
	{models.StatusInProgress, models.EventRunStopped, models.StatusBlocked},
	{models.StatusWaitingInput, models.EventRunStopped, models.StatusBlocked},
	{models.StatusPaused, models.EventRunStopped, models.StatusBlocked},
	{models.StatusVerifying, models.EventRunStopped, models.StatusBlocked},
	{models.StatusAwaitingApproval, models.EventRunStopped, models.StatusBlocked},
	{models.StatusFailed, models.EventRunStopped, models.StatusBlocked},
	{models.StatusDefined, models.EventAdminCancel, models.StatusBlocked},
	{models.StatusReady, models.EventAdminCancel, models.StatusBlocked},
	{models.StatusAssigned, models.EventAdminCancel, models.StatusBlocked},
	{models.StatusInProgress, models.EventAdminCancel, models.StatusBlocked},
	{models.StatusWaitingInput, models.EventAdminCancel, models.StatusBlocked},
	{models.StatusPaused, models.EventAdminCancel, models.StatusBlocked},
	{models.StatusVerifying, models.EventAdminCancel, models.StatusBlocked},
	{models.StatusAwaitingApproval, models.EventAdminCancel, models.StatusBlocked},
	{models.StatusFailed, models.EventAdminCancel, models.StatusBlocked},
	{models.StatusReady, models.EventDepsAdded, models.StatusDefined},
	{models.StatusAssigned, models.EventTimeoutFailed, models.StatusFailed},
	{models.StatusInProgress, models.EventTimeoutFailed, models.StatusFailed},
	// A question's wait: answered after its run ended, or expired.
	{models.StatusWaitingInput, models.EventReplyRequeued, models.StatusReady},
	{models.StatusWaitingInput, models.EventTimeoutFailed, models.StatusFailed},
	{models.StatusWaitingInput, models.EventMaxRetries, models.StatusBlocked},
}

var (
	table       = map[key]models.TaskStatus{}
	statusPairs = map[[2]models.TaskStatus]bool{}
)

func init() {
	for _, r := range rows {
		k := key{r.From, r.Event}
		if _, dup := table[k]; dup {
			panic(fmt.Sprintf("statemachine: duplicate row (%s, %s)", r.From, r.Event))
		}
		table[k] = r.To
		statusPairs[[2]models.TaskStatus{r.From, r.To}] = true
	}
}

// InvalidTransitionError is returned for a (status, event) pair that is not
// in the table.
type InvalidTransitionError struct {
	State models.TaskStatus
	Event models.TaskEvent
}

// Error returns "Invalid transition: (STATE, EVENT)".
func (e *InvalidTransitionError) Error() string {
	return fmt.Sprintf("Invalid transition: (%s, %s)", e.State, e.Event)
}

// TaskTransition returns the status that event moves a task in current to,
// or an *InvalidTransitionError.
func TaskTransition(current models.TaskStatus, event models.TaskEvent) (models.TaskStatus, error) {
	to, ok := table[key{current, event}]
	if !ok {
		return "", &InvalidTransitionError{State: current, Event: event}
	}
	return to, nil
}

// IsValidStatusTransition reports whether some event moves a task from one
// status to the other.
func IsValidStatusTransition(from, to models.TaskStatus) bool {
	return statusPairs[[2]models.TaskStatus{from, to}]
}

// Rows returns a copy of the transition table, in its documented order.
func Rows() []Row { return slices.Clone(rows) }
