package models

import (
	"encoding/json"
	"strings"
	"time"
)

// DefaultHookCooldown is the specification's default cooldown_seconds.
const DefaultHookCooldown = 3600

// Hook is an automation that fires on a schedule or a task event and may call an LLM.
type Hook struct {
	ID        string `json:"id"`
	ProjectID string `json:"project_id"`
	Name      string `json:"name"`
	Enabled   bool   `json:"enabled"`
	// Trigger is the JSON trigger configuration.
	Trigger string `json:"trigger"`
	// ContextSteps is the JSON array of context steps.
	ContextSteps    string    `json:"context_steps"`
	PromptTemplate  string    `json:"prompt_template"`
	LLMConfig       *string   `json:"llm_config,omitempty"`
	CooldownSeconds int       `json:"cooldown_seconds"`
	MaxTokensPerRun *int      `json:"max_tokens_per_run,omitempty"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
}

// Validate checks the hook's fields and that its JSON fields parse.
func (h *Hook) Validate() error {
	switch {
	case !ValidID(h.ID):
		return Errorf(CodeInvalid, "hook id %q: use 1-64 lower-case letters, digits, '-' or '_'", h.ID)
	case strings.TrimSpace(h.Name) == "":
		return Errorf(CodeInvalid, "hook name: required")
	case h.CooldownSeconds < 0:
		return Errorf(CodeInvalid, "cooldown_seconds: must not be negative")
	case h.MaxTokensPerRun != nil && *h.MaxTokensPerRun <= 0:
		return Errorf(CodeInvalid, "max_tokens_per_run: must be positive")
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(h.Trigger), &obj); err != nil {
		return Errorf(CodeInvalid, "trigger: not a JSON object: %v", err)
	}
	var steps []map[string]any
	if h.ContextSteps != "" {
		if err := json.Unmarshal([]byte(h.ContextSteps), &steps); err != nil {
			return Errorf(CodeInvalid, "context_steps: not a JSON array of objects: %v", err)
		}
	}
	if h.LLMConfig != nil {
		if err := json.Unmarshal([]byte(*h.LLMConfig), &obj); err != nil {
			return Errorf(CodeInvalid, "llm_config: not a JSON object: %v", err)
		}
	}
	return nil
}

// HookRun statuses.
const (
	HookRunRunning   = "running"
	HookRunCompleted = "completed"
	HookRunFailed    = "failed"
	HookRunSkipped   = "skipped"
)

// HookRun records one execution of a hook.
type HookRun struct {
	ID             string     `json:"id"`
	HookID         string     `json:"hook_id"`
	ProjectID      string     `json:"project_id"`
	TriggerReason  string     `json:"trigger_reason"`
	Status         string     `json:"status"`
	EventData      *string    `json:"event_data,omitempty"`
	ContextResults *string    `json:"context_results,omitempty"`
	PromptSent     *string    `json:"prompt_sent,omitempty"`
	LLMResponse    *string    `json:"llm_response,omitempty"`
	ActionsTaken   *string    `json:"actions_taken,omitempty"`
	SkippedReason  *string    `json:"skipped_reason,omitempty"`
	TokensUsed     int64      `json:"tokens_used"`
	StartedAt      time.Time  `json:"started_at"`
	CompletedAt    *time.Time `json:"completed_at,omitempty"`
}
