package models

import (
	"net/url"
	"time"
)

// DeskKind is what an item of the desk waits for a person to do.
type DeskKind string

// The kinds of desk items.
const (
	// DeskQuestion: an agent's open question, whether or not the run that
	// asked still waits.
	DeskQuestion DeskKind = "question"
	// DeskHumanCheck: a HUMAN verification, a person approves or rejects.
	DeskHumanCheck DeskKind = "human_verification"
	// DeskApproval: work (or a plan) awaiting a person's approval without
	// a pull request.
	DeskApproval DeskKind = "approval"
	// DeskPullRequest: a pull request to be reviewed and merged or closed.
	DeskPullRequest DeskKind = "pull_request"
	// DeskLanding: verified work held by local changes in a linked
	// repository's checked-out default branch.
	DeskLanding DeskKind = "landing"
	// DeskBlocked: a BLOCKED task that is the root of its block (not
	// blocked by another's failure, not cancelled or stopped on purpose):
	// a person restarts, skips or cancels it.
	DeskBlocked DeskKind = "blocked"
	// DeskBudget: a project that has used its budget_limit while READY work
	// waits.
	DeskBudget DeskKind = "budget"
	// DeskAgent: an agent set aside in ERROR, which takes no work until a
	// person resumes it.
	DeskAgent DeskKind = "agent"
)

// DeskKinds lists every kind, in the order the desk groups them.
var DeskKinds = []DeskKind{DeskQuestion, DeskHumanCheck, DeskApproval, DeskPullRequest, DeskLanding, DeskBlocked,
	DeskBudget, DeskAgent}

// DeskItem is one thing that waits on a person: the same fields wherever
// the desk is shown (ctl status and ctl desk, the dashboard's overview,
// Discord's /status, GET /api/v1/desk).
type DeskItem struct {
	// Key names the item for as long as it waits, the same across
	// restarts ("question:12", "landing:TASK:2"): escalations and digests
	// are keyed by it.
	Key  string   `json:"key"`
	Kind DeskKind `json:"kind"`
	// ProjectID and TaskID say whose it is (TaskID is empty for a budget
	// or an agent; AgentID names the agent of an agent item).
	ProjectID string `json:"project_id,omitempty"`
	TaskID    string `json:"task_id,omitempty"`
	AgentID   string `json:"agent_id,omitempty"`
	// Title is the task's title (a project's or an agent's name).
	Title string `json:"title"`
	// What is the one line a person reads: the question, what to approve,
	// why it is blocked.
	What string `json:"what"`
	// Since is when it began to wait; AskedBy who or what asked (an
	// agent, "system", a reviewer).
	Since   time.Time `json:"since"`
	AskedBy string    `json:"asked_by,omitempty"`
	// ExpiresAt is when a question expires unanswered; EscalatesAt when
	// the item is re-posted to the project's escalation (nil: no
	// escalation configured).
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	EscalatesAt *time.Time `json:"escalates_at,omitempty"`
	// QuestionID is the question of a question item; RunEnded says that
	// the run that asked has ended (the answer runs the task again).
	QuestionID int64 `json:"question_id,omitempty"`
	RunEnded   bool  `json:"run_ended,omitempty"`
	// Behind counts the tasks blocked behind a blocked item.
	Behind int `json:"behind,omitempty"`
	// Action is what ends the wait.
	Action DeskAction `json:"action"`
}

// DeskAction is the exact action that ends a desk item's wait: a command,
// the Discord button that does it, and a link (the dashboard's page, a
// pull request).
type DeskAction struct {
	Command string `json:"command"`
	Button  string `json:"button,omitempty"`
	URL     string `json:"url,omitempty"`
}

// Desk is everything that waits on a person, oldest first, and the counts
// of what the agents are doing meanwhile.
type Desk struct {
	Items []DeskItem `json:"items"`
	// Truncated says that more items wait than are listed.
	Truncated bool `json:"truncated,omitempty"`
}

// MaxWebhookURLLen bounds a desk webhook's URL.
const MaxWebhookURLLen = 2048

// ValidateWebhookURL checks a webhook's URL: https, or http to a loopback
// address, with a host, and no user or password in it.
func ValidateWebhookURL(field, raw string) error {
	if err := CheckLine(field, raw, MaxWebhookURLLen); err != nil {
		return err
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return Errorf(CodeInvalid, "%s: not a URL with a host", field)
	}
	if u.User != nil {
		return Errorf(CodeInvalid, "%s: must not hold a user or password (put a token in its path or query)", field)
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && IsLoopbackHost(u.Hostname())) {
		return Errorf(CodeInvalid, "%s: must be https (or http to a loopback address), not %s", field, Quote(u.Scheme))
	}
	return nil
}

// DeskWebhookBody is what an escalation POSTs to a desk webhook, as JSON:
// Text is a line a chat's incoming webhook shows as it is.
type DeskWebhookBody struct {
	Kind      NoticeKind `json:"kind"`
	ProjectID string     `json:"project_id"`
	Text      string     `json:"text"`
	Waited    Duration   `json:"waited"`
	Item      DeskItem   `json:"item"`
}

// WebhookDelivery is one POST of a desk notice to a webhook, waiting to be
// made: its key, the webhook's name, the JSON body and the attempts so far.
type WebhookDelivery struct {
	Key      string
	Webhook  string
	Payload  string
	Attempts int
}

// DeskSend is one notice of the desk's notifier: its mark's key (also the
// outbox key), project and kind, the notice, and optionally a webhook (one
// of the daemon's desk.webhooks, by name) the body is POSTed to.
type DeskSend struct {
	Key, ProjectID, Kind string
	Notice               Notice
	Webhook              string
	WebhookBody          []byte
}
