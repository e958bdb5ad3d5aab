package models

import (
	"encoding/json"
	"maps"
	"slices"
	"time"
)

// NoticeKind names what an outbox message tells: its kind column. Each kind
// has one payload type, written as JSON in the message's payload column;
// [DecodeNotice] reads it back.
type NoticeKind string

// The notice kinds.
const (
	// NoticeTaskStarted is sent when an agent starts a task (AGENT_STARTED
	// → IN_PROGRESS); it carries a [TransitionNotice].
	NoticeTaskStarted NoticeKind = "task.started"
	// NoticeTaskCompleted is sent when a task becomes COMPLETED; it
	// carries a [TransitionNotice].
	NoticeTaskCompleted NoticeKind = "task.completed"
	// NoticeTaskFailed is sent when a task becomes FAILED; it carries a
	// [TransitionNotice].
	NoticeTaskFailed NoticeKind = "task.failed"
	// NoticeTaskBlocked is sent when a task becomes BLOCKED; it carries a
	// [TransitionNotice].
	NoticeTaskBlocked NoticeKind = "task.blocked"
	// NoticeTaskPaused is sent when a task becomes PAUSED; it carries a
	// [TransitionNotice].
	NoticeTaskPaused NoticeKind = "task.paused"
	// NoticeTaskWaitingInput is sent when a task becomes WAITING_INPUT;
	// it carries a [TransitionNotice].
	NoticeTaskWaitingInput NoticeKind = "task.waiting_input"
	// NoticeTaskAwaitingApproval is sent when a task becomes
	// AWAITING_APPROVAL; it carries a [TransitionNotice].
	NoticeTaskAwaitingApproval NoticeKind = "task.awaiting_approval"
	// NoticeChainBroken is sent when a change blocks dependents of a task
	// (UPSTREAM_FAILED); it carries a [TransitionNotice] of the root task
	// with Blocked set.
	NoticeChainBroken NoticeKind = "chain.broken"
	// NoticeTaskQuestion is sent when an agent asks a person a question;
	// it carries the [Question].
	NoticeTaskQuestion NoticeKind = "task.question"
	// NoticeTaskProgress is sent for each progress line of a run (an
	// agent's report or what it says); it carries a [ProgressNotice].
	NoticeTaskProgress NoticeKind = "task.progress"
	// NoticeTaskApprovalNeeded is sent when a task's verification waits
	// for a person to approve its changes; it carries an
	// [ApprovalNeededNotice].
	NoticeTaskApprovalNeeded NoticeKind = "task.approval_needed"
	// NoticeTaskLandingWaits is sent when a verified task cannot land yet;
	// it carries a [LandingWaitsNotice].
	NoticeTaskLandingWaits NoticeKind = "task.landing_waits"
	// NoticeTaskDeleted is sent when a task is deleted; it carries a
	// [TaskDeletedNotice].
	NoticeTaskDeleted NoticeKind = "task.deleted"
	// NoticePlanFailed is sent when an approved plan's subtasks cannot be
	// created; it carries a [PlanFailedNotice].
	NoticePlanFailed NoticeKind = "plan.failed"
	// NoticeRunSuccess is sent when a workflow run succeeds; it carries a
	// [RunEndedNotice].
	NoticeRunSuccess NoticeKind = "run.success"
	// NoticeRunFailed is sent when a workflow run fails; it carries a
	// [RunEndedNotice].
	NoticeRunFailed NoticeKind = "run.failed"
	// NoticeRunCancelled is sent when a person cancels a workflow run; it
	// carries a [RunEndedNotice].
	NoticeRunCancelled NoticeKind = "run.cancelled"
	// NoticeHookMessage is a message a hook posts to its project; it
	// carries a [HookMessage].
	NoticeHookMessage NoticeKind = "hook.message"
	// NoticeDeskEscalation re-posts a desk item that has waited its
	// project's escalate_after; it carries a [DeskEscalationNotice].
	NoticeDeskEscalation NoticeKind = "desk.escalation"
	// NoticeDeskDigest sums up what waits on a person in a project; it
	// carries a [DeskDigestNotice].
	NoticeDeskDigest NoticeKind = "desk.digest"
)

// DeskEscalationNotice is the payload of NoticeDeskEscalation: the item
// that waited too long, where it goes (a channel, empty: the project's)
// and whom it mentions (a role, empty: nobody).
type DeskEscalationNotice struct {
	ProjectID string   `json:"project_id"`
	Item      DeskItem `json:"item"`
	Channel   string   `json:"channel,omitempty"`
	Role      string   `json:"role,omitempty"`
	// Waited is how long the item had waited when it was escalated.
	Waited Duration `json:"waited"`
}

// MaxDigestItems bounds the items a digest names (it counts them all).
const MaxDigestItems = 10

// DeskDigestNotice is the payload of NoticeDeskDigest: how many things
// wait on a person in the project, since when the oldest, and the oldest
// of them (at most MaxDigestItems).
type DeskDigestNotice struct {
	ProjectID string     `json:"project_id"`
	Count     int        `json:"count"`
	Oldest    time.Time  `json:"oldest"`
	At        time.Time  `json:"at"`
	Items     []DeskItem `json:"items"`
}

// TransitionNotice is the payload of a task's notable status change and of
// a broken chain (NoticeChainBroken).
type TransitionNotice struct {
	TaskID    string     `json:"task_id"`
	ProjectID string     `json:"project_id"`
	Title     string     `json:"title"`
	From      TaskStatus `json:"from"`
	To        TaskStatus `json:"to"`
	Event     TaskEvent  `json:"event"`
	Reason    string     `json:"reason,omitempty"`
	Actor     string     `json:"actor,omitempty"`
	// Blocked lists the dependents blocked by this change (chain.broken).
	Blocked []string `json:"blocked,omitempty"`
}

// ProgressNotice is the payload of a progress line (NoticeTaskProgress).
type ProgressNotice struct {
	Message string `json:"message"`
	RunID   int64  `json:"run_id"`
	// Source is "agent" for what the agent said in its output, empty for
	// its progress reports.
	Source string `json:"source,omitempty"`
	TaskID string `json:"task_id"`
}

// ApprovalNeededNotice is the payload of NoticeTaskApprovalNeeded.
type ApprovalNeededNotice struct {
	// Files are the files the task's changes touch.
	Files  []string `json:"files"`
	TaskID string   `json:"task_id"`
	Title  string   `json:"title"`
}

// LandingWaitsNotice is the payload of NoticeTaskLandingWaits.
type LandingWaitsNotice struct {
	// Reason says what keeps the task from landing and what to do.
	Reason string `json:"reason"`
	TaskID string `json:"task_id"`
	Title  string `json:"title"`
}

// TaskDeletedNotice is the payload of NoticeTaskDeleted.
type TaskDeletedNotice struct {
	TaskID    string     `json:"task_id"`
	ProjectID string     `json:"project_id"`
	Title     string     `json:"title"`
	Status    TaskStatus `json:"status"`
}

// PlanFailedNotice is the payload of NoticePlanFailed.
type PlanFailedNotice struct {
	Error  string `json:"error"`
	PlanID int64  `json:"plan_id"`
	TaskID string `json:"task_id"`
}

// RunEndedNotice is the payload of a workflow run's end (NoticeRunSuccess,
// NoticeRunFailed, NoticeRunCancelled).
type RunEndedNotice struct {
	ProjectID string `json:"project_id"`
	Reason    string `json:"reason"`
	RunID     string `json:"run_id"`
	// Status is the run's status: RunSuccess, RunFailed or RunCancelled.
	Status   WorkflowRunStatus `json:"status"`
	Workflow string            `json:"workflow"`
}

// HookMessage is the payload of a hook's post_message (NoticeHookMessage).
type HookMessage struct {
	HookID    string `json:"hook_id"`
	HookName  string `json:"hook_name"`
	RunID     string `json:"run_id"`
	ProjectID string `json:"project_id"`
	Text      string `json:"text"`
}

// Notice is one outbox message: its kind, the project and task it belongs
// to (either may be empty) and its payload, of the kind's payload type.
// The New*Notice constructors build it; [DecodeNotice] reads one back.
type Notice struct {
	Kind      NoticeKind
	ProjectID string
	TaskID    string
	Payload   any
}

// Encode returns the notice's payload as the JSON the outbox keeps; an
// error is encoding/json's.
func (n Notice) Encode() (string, error) {
	b, err := json.Marshal(n.Payload)
	return string(b), err
}

// statusNoticeKinds are the task statuses whose reaching is a notice.
var statusNoticeKinds = map[TaskStatus]NoticeKind{
	StatusCompleted:        NoticeTaskCompleted,
	StatusFailed:           NoticeTaskFailed,
	StatusBlocked:          NoticeTaskBlocked,
	StatusPaused:           NoticeTaskPaused,
	StatusWaitingInput:     NoticeTaskWaitingInput,
	StatusAwaitingApproval: NoticeTaskAwaitingApproval,
	StatusInProgress:       NoticeTaskStarted,
}

// StatusNoticeKind returns the kind of the notice a task reaching status
// gets, and false for a status that gets none.
func StatusNoticeKind(status TaskStatus) (NoticeKind, bool) {
	k, ok := statusNoticeKinds[status]
	return k, ok
}

// RunEndedNoticeKind returns the kind of the notice of a workflow run that
// ended in status (RunSuccess, RunFailed or RunCancelled); any other status
// ends no run and has no kind ("").
func RunEndedNoticeKind(status WorkflowRunStatus) NoticeKind {
	switch status {
	case RunSuccess:
		return NoticeRunSuccess
	case RunFailed:
		return NoticeRunFailed
	case RunCancelled:
		return NoticeRunCancelled
	}
	return ""
}

// NewStatusNotice returns the notice of a task's change to p.To, and false
// when that status gets no notice ([StatusNoticeKind]).
func NewStatusNotice(p TransitionNotice) (Notice, bool) {
	k, ok := StatusNoticeKind(p.To)
	if !ok {
		return Notice{}, false
	}
	return Notice{Kind: k, ProjectID: p.ProjectID, TaskID: p.TaskID, Payload: p}, true
}

// NewChainBrokenNotice returns the notice of the dependents p.Blocked
// blocked behind p's task.
func NewChainBrokenNotice(p TransitionNotice) Notice {
	return Notice{Kind: NoticeChainBroken, ProjectID: p.ProjectID, TaskID: p.TaskID, Payload: p}
}

// NewQuestionNotice returns the notice of an agent's question.
func NewQuestionNotice(q Question) Notice {
	return Notice{Kind: NoticeTaskQuestion, ProjectID: q.ProjectID, TaskID: q.TaskID, Payload: q}
}

// NewProgressNotice returns the notice of a progress line of a task of
// project projectID.
func NewProgressNotice(projectID string, p ProgressNotice) Notice {
	return Notice{Kind: NoticeTaskProgress, ProjectID: projectID, TaskID: p.TaskID, Payload: p}
}

// NewApprovalNeededNotice returns the notice of a task of project
// projectID whose changes wait for a person's approval.
func NewApprovalNeededNotice(projectID string, p ApprovalNeededNotice) Notice {
	return Notice{Kind: NoticeTaskApprovalNeeded, ProjectID: projectID, TaskID: p.TaskID, Payload: p}
}

// NewLandingWaitsNotice returns the notice of a verified task of project
// projectID that cannot land yet.
func NewLandingWaitsNotice(projectID string, p LandingWaitsNotice) Notice {
	return Notice{Kind: NoticeTaskLandingWaits, ProjectID: projectID, TaskID: p.TaskID, Payload: p}
}

// NewTaskDeletedNotice returns the notice of a deleted task.
func NewTaskDeletedNotice(p TaskDeletedNotice) Notice {
	return Notice{Kind: NoticeTaskDeleted, ProjectID: p.ProjectID, TaskID: p.TaskID, Payload: p}
}

// NewPlanFailedNotice returns the notice of a plan of a task of project
// projectID whose subtasks could not be created.
func NewPlanFailedNotice(projectID string, p PlanFailedNotice) Notice {
	return Notice{Kind: NoticePlanFailed, ProjectID: projectID, TaskID: p.TaskID, Payload: p}
}

// NewRunEndedNotice returns the notice of a workflow run that ended in
// p.Status ([RunEndedNoticeKind]).
func NewRunEndedNotice(p RunEndedNotice) Notice {
	return Notice{Kind: RunEndedNoticeKind(p.Status), ProjectID: p.ProjectID, Payload: p}
}

// NewHookMessageNotice returns the notice of a hook's message.
func NewHookMessageNotice(p HookMessage) Notice {
	return Notice{Kind: NoticeHookMessage, ProjectID: p.ProjectID, Payload: p}
}

// NewDeskEscalationNotice returns the notice of a desk item escalated.
func NewDeskEscalationNotice(p DeskEscalationNotice) Notice {
	return Notice{Kind: NoticeDeskEscalation, ProjectID: p.ProjectID, Payload: p}
}

// NewDeskDigestNotice returns the notice of a project's desk digest.
func NewDeskDigestNotice(p DeskDigestNotice) Notice {
	return Notice{Kind: NoticeDeskDigest, ProjectID: p.ProjectID, Payload: p}
}

// decodeAs decodes a payload of type T and the project and task it names.
func decodeAs[T any](scope func(T) (projectID, taskID string)) func(string) (Notice, error) {
	return func(payload string) (Notice, error) {
		var v T
		if err := json.Unmarshal([]byte(payload), &v); err != nil {
			return Notice{}, err
		}
		p, t := scope(v)
		return Notice{ProjectID: p, TaskID: t, Payload: v}, nil
	}
}

var (
	decodeTransition = decodeAs(func(p TransitionNotice) (string, string) { return p.ProjectID, p.TaskID })
	decodeRunEnded   = decodeAs(func(p RunEndedNotice) (string, string) { return p.ProjectID, "" })
)

// noticeDecoders decode each kind's payload: every kind is here.
var noticeDecoders = map[NoticeKind]func(string) (Notice, error){
	NoticeTaskStarted:          decodeTransition,
	NoticeTaskCompleted:        decodeTransition,
	NoticeTaskFailed:           decodeTransition,
	NoticeTaskBlocked:          decodeTransition,
	NoticeTaskPaused:           decodeTransition,
	NoticeTaskWaitingInput:     decodeTransition,
	NoticeTaskAwaitingApproval: decodeTransition,
	NoticeChainBroken:          decodeTransition,
	NoticeTaskQuestion:         decodeAs(func(q Question) (string, string) { return q.ProjectID, q.TaskID }),
	NoticeTaskProgress:         decodeAs(func(p ProgressNotice) (string, string) { return "", p.TaskID }),
	NoticeTaskApprovalNeeded:   decodeAs(func(p ApprovalNeededNotice) (string, string) { return "", p.TaskID }),
	NoticeTaskLandingWaits:     decodeAs(func(p LandingWaitsNotice) (string, string) { return "", p.TaskID }),
	NoticeTaskDeleted:          decodeAs(func(p TaskDeletedNotice) (string, string) { return p.ProjectID, p.TaskID }),
	NoticePlanFailed:           decodeAs(func(p PlanFailedNotice) (string, string) { return "", p.TaskID }),
	NoticeRunSuccess:           decodeRunEnded,
	NoticeRunFailed:            decodeRunEnded,
	NoticeRunCancelled:         decodeRunEnded,
	NoticeHookMessage:          decodeAs(func(p HookMessage) (string, string) { return p.ProjectID, "" }),
	NoticeDeskEscalation:       decodeAs(func(p DeskEscalationNotice) (string, string) { return p.ProjectID, "" }),
	NoticeDeskDigest:           decodeAs(func(p DeskDigestNotice) (string, string) { return p.ProjectID, "" }),
}

// NoticeKinds returns every notice kind, sorted.
func NoticeKinds() []NoticeKind { return slices.Sorted(maps.Keys(noticeDecoders)) }

// Known reports whether k is one of the notice kinds.
func (k NoticeKind) Known() bool {
	_, ok := noticeDecoders[k]
	return ok
}

// TaskEvent reports whether notices of kind k are task lifecycle events,
// which event hooks read: a notable status change or a broken chain.
func (k NoticeKind) TaskEvent() bool {
	if k == NoticeChainBroken {
		return true
	}
	for _, sk := range statusNoticeKinds {
		if sk == k {
			return true
		}
	}
	return false
}

// DecodeNotice reads an outbox message's payload as its kind's payload
// type: Payload holds that type (not a pointer), and ProjectID and TaskID
// are the ones the payload names (empty where it names none). A kind this
// version does not know decodes to the project and task its payload names,
// with no payload; a payload that is not its kind's JSON is encoding/json's
// error, as it is (it is kept as a delivery's reason).
func DecodeNotice(kind NoticeKind, payload string) (Notice, error) {
	dec, ok := noticeDecoders[kind]
	if !ok {
		dec = decodeAs(func(s struct {
			TaskID    string `json:"task_id"`
			ProjectID string `json:"project_id"`
		}) (string, string) {
			return s.ProjectID, s.TaskID
		})
	}
	n, err := dec(payload)
	if err != nil {
		return Notice{}, err
	}
	n.Kind = kind
	if !ok {
		n.Payload = nil
	}
	return n, nil
}
