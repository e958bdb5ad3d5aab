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
	// was cancelled; a closed question takes no answer.
	ClosedAt *time.Time `json:"closed_at,omitempty"`
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
