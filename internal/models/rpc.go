package models

import (
	"encoding/json"
	"strings"
	"time"
)

// Completion is what an agent reports when it has finished its task.
type Completion struct {
	Summary      string   `json:"summary"`
	FilesChanged []string `json:"files_changed,omitempty"`
	// Outputs is structured data handed to the task's dependents.
	Outputs json.RawMessage `json:"outputs,omitempty"`
	// NoChanges says the agent finished the task without changing the
	// repository on purpose: a task of a project with a repository whose
	// run leaves no change completes only when its agent said so.
	NoChanges bool `json:"no_changes,omitempty"`
}

// Validate checks a completion report.
func (c *Completion) Validate() error {
	if err := CheckText("summary", c.Summary, MaxDescriptionLen); err != nil {
		return err
	}
	if err := checkFiles(c.FilesChanged); err != nil {
		return err
	}
	if len(c.Outputs) > MaxOutputsBytes {
		return Errorf(CodeInvalid, "outputs: at most 1 MiB of JSON")
	}
	if len(c.Outputs) > 0 {
		var v map[string]any
		if err := json.Unmarshal(c.Outputs, &v); err != nil {
			return Errorf(CodeInvalid, "outputs: must be a JSON object: %v", err)
		}
	}
	return nil
}

// Limits of an agent's reports.
const (
	// MaxFilesChanged caps the files a report lists.
	MaxFilesChanged = 10_000
	// MaxOutputsBytes caps a completion's outputs, in bytes of JSON.
	MaxOutputsBytes = 1 << 20
	// MaxRateLimitMessageLen caps a rate limit's message.
	MaxRateLimitMessageLen = 4096
)

// checkFiles checks the files a report lists: at most MaxFilesChanged
// paths of at most MaxPathLen characters. A path may hold any printable
// character, line breaks and tabs, as git allows.
func checkFiles(files []string) error {
	return checkList("files_changed", files, MaxFilesChanged, func(name, f string) error {
		return CheckText(name, f, MaxPathLen)
	})
}

// RateLimit is an agent's report that its provider refused more work until
// a reset time: the task is PAUSED until then and no retry is used.
type RateLimit struct {
	// ResetAt is when work may resume; nil means the daemon's default delay.
	ResetAt *time.Time `json:"reset_at,omitempty"`
	// Kind is "rate_limit" (RATE_LIMITED) or "tokens" (TOKENS_EXHAUSTED).
	Kind string `json:"kind,omitempty"`
	// Message is the provider's words, kept as the pause's reason.
	Message string `json:"message,omitempty"`
}

// Validate checks a rate-limit report.
func (r *RateLimit) Validate() error {
	switch r.Kind {
	case "", "rate_limit", "tokens":
	default:
		return Errorf(CodeInvalid, "kind: must be rate_limit or tokens (got %s)", Quote(r.Kind))
	}
	return CheckText("message", r.Message, MaxRateLimitMessageLen)
}

// Question is an agent's question to a human, and its answer once given.
type Question struct {
	ID         int64      `json:"id"`
	TaskID     string     `json:"task_id"`
	ProjectID  string     `json:"project_id"`
	RunID      int64      `json:"run_id"`
	Text       string     `json:"text"`
	AskedAt    time.Time  `json:"asked_at"`
	Answer     *string    `json:"answer,omitempty"`
	AnsweredBy string     `json:"answered_by,omitempty"`
	AnsweredAt *time.Time `json:"answered_at,omitempty"`
	// ClosedAt is when the question was closed unanswered because its task
	// stopped waiting for it otherwise than by an answer or its expiry (it
	// was cancelled, restarted or stopped); ClosedReason says which. A
	// closed question takes no answer.
	ClosedAt     *time.Time `json:"closed_at,omitempty"`
	ClosedReason string     `json:"closed_reason,omitempty"`
	// ExpiresAt is when the question expires unanswered: asked_at plus the
	// input timeout in force when it was asked. ExpiredAt is when it did;
	// an expired question takes no answer (its project's on_expiry decided
	// what became of the task).
	ExpiresAt time.Time  `json:"expires_at"`
	ExpiredAt *time.Time `json:"expired_at,omitempty"`
	// Default is the answer the agent proposed (`ask --default`), used when
	// the question expires in a project whose on_expiry is default.
	Default *string `json:"default,omitempty"`
	// RunEndedAt is when the run that asked ended while the question was
	// open (the daemon restarted, the agent's CLI gave up on the call): the
	// task waits on without a run, and the answer runs it again.
	RunEndedAt *time.Time `json:"run_ended_at,omitempty"`
}

// Open reports whether the question still waits for an answer: not
// answered, expired or closed.
func (q Question) Open() bool { return q.Answer == nil && q.ExpiredAt == nil && q.ClosedAt == nil }

// DefaultInputTimeout is how long a question waits for an answer when
// neither the daemon's configuration nor its project says otherwise.
const DefaultInputTimeout = 4 * time.Hour

// DefaultAnswerActor is who answered a question that expired in a project
// whose on_expiry is default: the agent's own proposed answer.
const DefaultAnswerActor = "default"

// ExpiryOutcome is what a question's expiry did to its task.
type ExpiryOutcome string

// The outcomes of an expiry (see Store.ExpireQuestion).
const (
	// ExpiryNone: nothing; the question was answered, expired or closed
	// meanwhile, or is not due.
	ExpiryNone ExpiryOutcome = ""
	// ExpiryPaused: INPUT_TIMEOUT, the task PAUSED (on_expiry pause).
	ExpiryPaused ExpiryOutcome = "paused"
	// ExpiryFailed: TIMEOUT_FAILED, the task FAILED (on_expiry fail).
	ExpiryFailed ExpiryOutcome = "failed"
	// ExpiryAnswered: the agent's default answer was given (on_expiry
	// default).
	ExpiryAnswered ExpiryOutcome = "answered"
	// ExpiryBlocked: MAX_RETRIES, the task BLOCKED: it had no retry left.
	ExpiryBlocked ExpiryOutcome = "blocked"
)

// QuestionExpiry is what the expiry of a question did.
type QuestionExpiry struct {
	Question Question
	Outcome  ExpiryOutcome
	// Task is the question's task after the expiry (when Outcome is set).
	Task Task
	// Answer is the default answer given (ExpiryAnswered); RunWaits says
	// that the run that asked still waits for it.
	Answer   string
	RunWaits bool
	// EndRun says that the run that asked is still open and must end: the
	// task is no longer waiting for it.
	EndRun bool
}

// Ask is an agent's question as it asks it: the text and, optionally, the
// answer it proposes should nobody answer in time.
type Ask struct {
	Question string  `json:"question"`
	Default  *string `json:"default,omitempty"`
}

// Validate checks an ask: a question, and a default that is a valid answer.
func (a Ask) Validate() error {
	if err := ValidateQuestionText("question", a.Question); err != nil {
		return err
	}
	if a.Default != nil {
		return ValidateQuestionText("default", *a.Default)
	}
	return nil
}

// ValidateQuestionText checks the text of a question, an answer or an
// agent's message: required, at most MaxMessageLen characters, line breaks
// and tabs allowed.
func ValidateQuestionText(field, s string) error {
	if strings.TrimSpace(s) == "" {
		return Errorf(CodeInvalid, "%s: required", field)
	}
	return CheckText(field, s, MaxMessageLen)
}

// EmptyJSON reports whether s, trimmed, is blank, null, or an empty JSON
// list or object (whitespace inside allowed): output that says nothing.
func EmptyJSON(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" || s == "null" {
		return true
	}
	if len(s) < 2 || strings.TrimSpace(s[1:len(s)-1]) != "" {
		return false
	}
	return (s[0] == '[' && s[len(s)-1] == ']') || (s[0] == '{' && s[len(s)-1] == '}')
}
