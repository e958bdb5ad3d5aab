package models

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Limits and defaults of hooks.
const (
	// DefaultHookCooldown is the specification's default cooldown_seconds.
	DefaultHookCooldown = 3600
	// MinHookInterval and MaxHookInterval bound interval_seconds of a
	// periodic trigger; MaxHookCooldown bounds cooldown_seconds.
	MinHookInterval = 60
	MaxHookInterval = 366 * 24 * 3600
	MaxHookCooldown = 366 * 24 * 3600
	// MaxHookSteps caps a hook's context steps.
	MaxHookSteps = 20
	// MaxHookTemplate caps a prompt template, in characters.
	MaxHookTemplate = 64 << 10
	// MaxHookStepTimeout caps a run_command or http_get step's timeout.
	MaxHookStepTimeout = 30 * time.Minute
)

// HookTriggerType says when a hook fires: on an interval, on a cron
// schedule, on a task event, or only when a person fires it.
type HookTriggerType string

// Hook trigger types.
const (
	TriggerPeriodic HookTriggerType = "periodic"
	TriggerCron     HookTriggerType = "cron"
	TriggerEvent    HookTriggerType = "event"
	// TriggerManual hooks fire only when a person fires them.
	TriggerManual HookTriggerType = "manual"
)

// HookTriggerTypes are the trigger types, in the order they are offered.
var HookTriggerTypes = []HookTriggerType{TriggerPeriodic, TriggerCron, TriggerEvent, TriggerManual}

// HookEventTypes are the task lifecycle events an event trigger may name.
var HookEventTypes = []string{
	"task.started", "task.completed", "task.failed", "task.blocked", "task.paused",
	"task.waiting_input", "task.awaiting_approval", "pr.merged", "pr.closed", "chain.broken",
}

// HookEventCursor names the event cursor of the hooks engine: how far it
// has read the task events. While no enabled hook fires on events the
// engine neither reads nor moves it; the change that makes the first such
// hook moves it to the newest event, so that the hook sees only what
// happens from then on.
const HookEventCursor = "hooks"

// HookEventFields are the fields of a hook event: what filters match and
// what {{event.<field>}} placeholders name.
var HookEventFields = []string{"type", "task_id", "project_id", "title", "kind", "from", "to", "event", "reason", "actor", "blocked"}

// HookTrigger says when a hook fires.
type HookTrigger struct {
	// Type is periodic, cron, event or manual.
	Type HookTriggerType `json:"type"`
	// IntervalSeconds is a periodic trigger's interval.
	IntervalSeconds int `json:"interval_seconds,omitempty"`
	// Expr is a cron trigger's five-field expression (or a descriptor such
	// as @daily); Timezone is the IANA zone it is read in (default UTC).
	Expr     string `json:"expr,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	// EventType is an event trigger's event (one of HookEventTypes).
	EventType string `json:"event_type,omitempty"`
	// Filters, for an event trigger, must all equal the event's fields
	// (HookEventFields) for the hook to fire.
	Filters map[string]string `json:"filters,omitempty"`
}

// Validate checks the trigger, naming the bad field.
func (t HookTrigger) Validate() error {
	if err := CheckLine("trigger.expr", t.Expr, MaxShortLen); err != nil {
		return err
	}
	if err := CheckLine("trigger.timezone", t.Timezone, MaxShortLen); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(t.Filters)) {
		if err := CheckLine(fmt.Sprintf("trigger.filters[%q]", cutRunes(k, 40)), t.Filters[k], MaxMetadataLen); err != nil {
			return err
		}
	}
	switch t.Type {
	case TriggerPeriodic:
		if t.IntervalSeconds < MinHookInterval || t.IntervalSeconds > MaxHookInterval {
			return Errorf(CodeInvalid, "trigger.interval_seconds: must be between %d and %d (a year) (got %d)",
				MinHookInterval, MaxHookInterval, t.IntervalSeconds)
		}
	case TriggerCron:
		if _, _, err := t.Schedule(); err != nil {
			return err
		}
	case TriggerEvent:
		if !slices.Contains(HookEventTypes, t.EventType) {
			return Errorf(CodeInvalid, "trigger.event_type: %s is not one of %s", Quote(t.EventType), strings.Join(HookEventTypes, ", "))
		}
		for _, k := range slices.Sorted(maps.Keys(t.Filters)) {
			if !slices.Contains(HookEventFields, k) {
				return Errorf(CodeInvalid, "trigger.filters: %q is not an event field (%s)", cutRunes(k, 40), strings.Join(HookEventFields, ", "))
			}
		}
	case TriggerManual:
	default:
		return Errorf(CodeInvalid, "trigger.type: must be periodic, cron, event or manual (got %s)", Quote(string(t.Type)))
	}
	if t.Type != TriggerPeriodic && t.IntervalSeconds != 0 {
		return Errorf(CodeInvalid, "trigger.interval_seconds: only for periodic triggers")
	}
	if t.Type != TriggerCron && (t.Expr != "" || t.Timezone != "") {
		return Errorf(CodeInvalid, "trigger.expr and trigger.timezone: only for cron triggers")
	}
	if t.Type != TriggerEvent && (t.EventType != "" || len(t.Filters) > 0) {
		return Errorf(CodeInvalid, "trigger.event_type and trigger.filters: only for event triggers")
	}
	return nil
}

// Scheduled reports whether the trigger fires on a schedule.
func (t HookTrigger) Scheduled() bool { return t.Type == TriggerPeriodic || t.Type == TriggerCron }

// Context step types.
const (
	StepReadFile   = "read_file"
	StepListFiles  = "list_files"
	StepGitDiff    = "git_diff"
	StepGitLog     = "git_log"
	StepDBQuery    = "db_query"
	StepHTTPGet    = "http_get"
	StepRunCommand = "run_command"
)

// Short-circuits: a step's skip_llm_if condition that, when it holds,
// ends the run as skipped before the LLM is called.
const (
	SkipIfExitZero = "exit_code_zero"
	SkipIfEmpty    = "output_empty"
	SkipIfStatusOK = "status_ok"
)

// HookQueries are the named read-only queries of db_query steps, over the
// hook's own project.
var HookQueries = []string{"tasks", "failed_tasks", "recent_events", "recent_runs", "token_usage", "task_counts"}

// HookStep is one context step: it gathers text for the prompt.
type HookStep struct {
	// Type is one of the Step* constants.
	Type string `json:"type"`
	// Path is a file or directory relative to the project's checkout
	// (read_file, list_files).
	Path string `json:"path,omitempty"`
	// Pattern filters list_files by base name (path.Match syntax).
	Pattern string `json:"pattern,omitempty"`
	// Base and Head are git_diff's revisions (default HEAD~1 and HEAD).
	Base string `json:"base,omitempty"`
	Head string `json:"head,omitempty"`
	// Since bounds git_log (a duration such as "24h") and the time-based
	// queries of db_query (default 24h).
	Since string `json:"since,omitempty"`
	// MaxCount bounds git_log's commits and db_query's rows (default 20).
	MaxCount int `json:"max_count,omitempty"`
	// Query is db_query's named query (HookQueries); Status filters the
	// tasks and failed_tasks queries (a status or group as in dedupe).
	Query  string `json:"query,omitempty"`
	Status string `json:"status,omitempty"`
	// URL is http_get's address; its host must be on the allow list.
	URL string `json:"url,omitempty"`
	// Command is run_command's command line: split on spaces, run without
	// a shell, and only when it is one of the project's hook_commands.
	Command string `json:"command,omitempty"`
	// TimeoutSeconds bounds run_command and http_get.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	// SkipLLMIf ends the run without calling the LLM when it holds.
	SkipLLMIf string `json:"skip_llm_if,omitempty"`
}

// stepFields lists the fields each step type uses.
var stepFields = map[string][]string{
	StepReadFile:   {"path"},
	StepListFiles:  {"path", "pattern", "max_count"},
	StepGitDiff:    {"base", "head"},
	StepGitLog:     {"since", "max_count"},
	StepDBQuery:    {"query", "status", "since", "max_count"},
	StepHTTPGet:    {"url", "timeout_seconds"},
	StepRunCommand: {"command", "timeout_seconds"},
}

// StepResultFields are the fields {{step_N.<field>}} may name for each step
// type; {{step_N}} is the output.
var StepResultFields = map[string][]string{
	StepReadFile:   {"output", "truncated"},
	StepListFiles:  {"output", "truncated", "count"},
	StepGitDiff:    {"output", "truncated"},
	StepGitLog:     {"output", "truncated", "count"},
	StepDBQuery:    {"output", "truncated", "count"},
	StepHTTPGet:    {"output", "truncated", "status"},
	StepRunCommand: {"output", "truncated", "exit_code"},
}

// skipConditions lists the short-circuits each step type supports.
var skipConditions = map[string][]string{
	StepReadFile:   {SkipIfEmpty},
	StepListFiles:  {SkipIfEmpty},
	StepGitDiff:    {SkipIfEmpty},
	StepGitLog:     {SkipIfEmpty},
	StepDBQuery:    {SkipIfEmpty},
	StepHTTPGet:    {SkipIfEmpty, SkipIfStatusOK},
	StepRunCommand: {SkipIfEmpty, SkipIfExitZero},
}

// gitRevPattern admits revisions such as HEAD~1, main, v1.2, origin/main
// and commit ids, and nothing that git could read as an option.
var gitRevPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_./~^@{}-]{0,199}$`)

// Validate checks step i, naming the bad field.
func (s HookStep) Validate(i int) error {
	name := fmt.Sprintf("context_steps[%d]", i)
	for _, f := range []struct {
		key, v string
		max    int
	}{{"type", s.Type, MaxShortLen}, {"path", s.Path, MaxPathLen}, {"pattern", s.Pattern, MaxShortLen},
		{"since", s.Since, MaxShortLen}, {"query", s.Query, MaxShortLen}, {"status", s.Status, MaxShortLen},
		{"url", s.URL, MaxURLLen}, {"command", s.Command, MaxCommandLen}, {"skip_llm_if", s.SkipLLMIf, MaxShortLen}} {
		if err := CheckLine(name+"."+f.key, f.v, f.max); err != nil {
			return err
		}
	}
	fields, ok := stepFields[s.Type]
	if !ok {
		return Errorf(CodeInvalid, "%s.type: must be one of read_file, list_files, git_diff, git_log, db_query, http_get, run_command (got %s)", name, Quote(s.Type))
	}
	set := map[string]bool{"path": s.Path != "", "pattern": s.Pattern != "", "base": s.Base != "", "head": s.Head != "",
		"since": s.Since != "", "max_count": s.MaxCount != 0, "query": s.Query != "", "status": s.Status != "",
		"url": s.URL != "", "command": s.Command != "", "timeout_seconds": s.TimeoutSeconds != 0}
	for f, on := range set {
		if on && !slices.Contains(fields, f) {
			return Errorf(CodeInvalid, "%s.%s: not used by %s steps", name, f, s.Type)
		}
	}
	if s.SkipLLMIf != "" && !slices.Contains(skipConditions[s.Type], s.SkipLLMIf) {
		return Errorf(CodeInvalid, "%s.skip_llm_if: %s steps support %s (got %q)", name, s.Type,
			strings.Join(skipConditions[s.Type], ", "), s.SkipLLMIf)
	}
	if s.MaxCount < 0 || s.MaxCount > 1000 {
		return Errorf(CodeInvalid, "%s.max_count: must be between 1 and 1000", name)
	}
	if s.TimeoutSeconds < 0 || time.Duration(s.TimeoutSeconds)*time.Second > MaxHookStepTimeout {
		return Errorf(CodeInvalid, "%s.timeout_seconds: must be between 1 and %d", name, int(MaxHookStepTimeout/time.Second))
	}
	if s.Since != "" {
		if d, err := time.ParseDuration(s.Since); err != nil || d <= 0 {
			return Errorf(CodeInvalid, "%s.since: %s is not a positive duration such as 24h", name, Quote(s.Since))
		}
	}
	switch s.Type {
	case StepReadFile:
		if s.Path == "" {
			return Errorf(CodeInvalid, "%s.path: required", name)
		}
		if err := checkRelPath(name, s.Path); err != nil {
			return err
		}
	case StepListFiles:
		if err := checkRelPath(name, s.Path); err != nil {
			return err
		}
	case StepGitDiff:
		for _, r := range []struct{ f, v string }{{"base", s.Base}, {"head", s.Head}} {
			if r.v != "" && !gitRevPattern.MatchString(r.v) {
				return Errorf(CodeInvalid, "%s.%s: %s is not a git revision", name, r.f, Quote(r.v))
			}
		}
	case StepDBQuery:
		if !slices.Contains(HookQueries, s.Query) {
			return Errorf(CodeInvalid, "%s.query: must be one of %s (got %s)", name, strings.Join(HookQueries, ", "), Quote(s.Query))
		}
		if s.Status != "" {
			if s.Query != "tasks" {
				return Errorf(CodeInvalid, "%s.status: only for the tasks query", name)
			}
			if _, err := ResolveStatusSet(s.Status); err != nil {
				return Errorf(CodeInvalid, "%s.status: %s", name, ErrorMessageOf(err))
			}
		}
	case StepHTTPGet:
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil {
			return Errorf(CodeInvalid, "%s.url: %s is not an http(s) URL without credentials", name, Quote(s.URL))
		}
	case StepRunCommand:
		if len(strings.Fields(s.Command)) == 0 {
			return Errorf(CodeInvalid, "%s.command: required", name)
		}
	}
	return nil
}

func checkRelPath(name, p string) error {
	if p == "" {
		return nil
	}
	if strings.HasPrefix(p, "/") || slices.Contains(strings.Split(strings.ReplaceAll(p, "\\", "/"), "/"), "..") {
		return Errorf(CodeInvalid, "%s.path: %s must be relative to the checkout, without ..", name, Quote(p))
	}
	return nil
}

// HookLLMConfig overrides the daemon's llm settings for one hook.
type HookLLMConfig struct {
	// Model overrides llm.model.
	Model string `json:"model,omitempty"`
	// BaseURL overrides llm.base_url. A hook that names its own endpoint
	// must name its own APIKey too: the daemon's key goes only to the
	// daemon's endpoint.
	BaseURL string `json:"base_url,omitempty"`
	// APIKey is the key for BaseURL; it is never shown back.
	APIKey string `json:"api_key,omitempty"`
	// Temperature, when set, is sent with every call.
	Temperature *float32 `json:"temperature,omitempty"`
}

// Validate checks the overrides, naming the bad field.
func (c HookLLMConfig) Validate() error {
	for _, f := range []struct {
		key, v string
		max    int
	}{{"model", c.Model, MaxShortLen}, {"base_url", c.BaseURL, MaxURLLen}, {"api_key", c.APIKey, MaxSecretLen}} {
		// The messages never show the value: one of them is a key.
		if err := CheckLine("llm_config."+f.key, f.v, f.max); err != nil {
			return err
		}
	}
	if c.BaseURL != "" && !strings.HasPrefix(c.BaseURL, "http://") && !strings.HasPrefix(c.BaseURL, "https://") {
		return Errorf(CodeInvalid, "llm_config.base_url: %s is not an http(s) URL", Quote(c.BaseURL))
	}
	if c.Temperature != nil && (*c.Temperature < 0 || *c.Temperature > 2) {
		return Errorf(CodeInvalid, "llm_config.temperature: must be between 0 and 2")
	}
	return nil
}

// Hook is an automation that fires on a schedule, a task event or by hand,
// gathers context and may call an LLM whose tools can create tasks, post
// messages and add feedback.
type Hook struct {
	ID        string      `json:"id"`
	ProjectID string      `json:"project_id"`
	Name      string      `json:"name"`
	Enabled   bool        `json:"enabled"`
	Trigger   HookTrigger `json:"trigger"`
	// ContextSteps run in order before the prompt is rendered.
	ContextSteps []HookStep `json:"context_steps"`
	// PromptTemplate is the prompt, with {{step_N}}, {{step_N.field}},
	// {{event}} and {{event.field}} placeholders. Empty: no LLM call.
	PromptTemplate string         `json:"prompt_template"`
	LLMConfig      *HookLLMConfig `json:"llm_config,omitempty"`
	// FileTask, instead of a model, files one task when the steps ran and
	// none short-circuited the run.
	FileTask *HookTask `json:"file_task,omitempty"`
	// CooldownSeconds is the least time between the starts of two runs.
	CooldownSeconds int `json:"cooldown_seconds"`
	// MaxTokensPerRun caps the tokens of one run's whole tool loop.
	MaxTokensPerRun *int `json:"max_tokens_per_run,omitempty"`
	// ScheduleFrom is where a schedule starts counting: the creation, the
	// last change of the trigger, or the last enabling.
	ScheduleFrom time.Time `json:"schedule_from"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// RedactedKey stands for a hook's API key in answers; sent back in a
// patch, it keeps the stored key while the base_url stays the same.
const RedactedKey = "[redacted]"

// Redacted returns h with secrets removed, for answers to people.
func (h Hook) Redacted() Hook {
	if h.LLMConfig != nil && h.LLMConfig.APIKey != "" {
		c := *h.LLMConfig
		c.APIKey = RedactedKey
		h.LLMConfig = &c
	}
	return h
}

// Validate checks the hook, naming the bad field.
func (h *Hook) Validate() error {
	if strings.TrimSpace(h.Name) == "" {
		return Errorf(CodeInvalid, "name: required")
	}
	if err := CheckLine("name", h.Name, MaxNameLen); err != nil {
		return err
	}
	if err := CheckText("prompt_template", h.PromptTemplate, MaxHookTemplate); err != nil {
		return err
	}
	switch {
	case h.ID == "":
		return Errorf(CodeInvalid, "id: the name %s has no letter or digit to make an id of; set id", Quote(h.Name))
	case !ValidID(h.ID):
		return Errorf(CodeInvalid, "id: %s is not a hook id: use 1-64 lower-case letters, digits, '-' or '_'", Quote(h.ID))
	case !ValidID(h.ProjectID):
		return Errorf(CodeInvalid, "project_id: %s is not a project id", Quote(h.ProjectID))
	case h.CooldownSeconds < 0 || h.CooldownSeconds > MaxHookCooldown:
		return Errorf(CodeInvalid, "cooldown_seconds: must be between 0 and %d (a year)", MaxHookCooldown)
	case h.MaxTokensPerRun != nil && *h.MaxTokensPerRun <= 0:
		return Errorf(CodeInvalid, "max_tokens_per_run: must be positive")
	case len(h.ContextSteps) > MaxHookSteps:
		return Errorf(CodeInvalid, "context_steps: at most %d steps", MaxHookSteps)
	}
	if err := h.Trigger.Validate(); err != nil {
		return err
	}
	for i, s := range h.ContextSteps {
		if err := s.Validate(i); err != nil {
			return err
		}
	}
	if h.LLMConfig != nil {
		if err := h.LLMConfig.Validate(); err != nil {
			return err
		}
	}
	withEvent := h.Trigger.Type == TriggerEvent || h.Trigger.Type == TriggerManual
	if h.FileTask != nil {
		if strings.TrimSpace(h.PromptTemplate) != "" {
			return Errorf(CodeInvalid, "file_task: a hook files a task itself or asks a model (prompt_template), not both")
		}
		if err := h.FileTask.Validate(h.ContextSteps, withEvent); err != nil {
			return err
		}
	}
	return CheckTemplate("prompt_template", h.PromptTemplate, h.ContextSteps, withEvent)
}

// HookTask is the task a hook files without a model. Title and
// Description are templates with the placeholders of a prompt template;
// Kind and Priority are the task's. An unfinished task the hook filed with
// the same title stands for it: nothing new is filed until that one ends.
type HookTask struct {
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	Kind        string `json:"kind,omitempty"`
	Priority    *int   `json:"priority,omitempty"`
}

// Validate checks the task's fields and the placeholders of its templates
// against the steps that will have run.
func (t HookTask) Validate(steps []HookStep, withEvent bool) error {
	if strings.TrimSpace(t.Title) == "" {
		return Errorf(CodeInvalid, "file_task.title: required")
	}
	if err := CheckLine("file_task.title", t.Title, MaxTitleLen); err != nil {
		return err
	}
	if err := CheckText("file_task.description", t.Description, MaxHookTemplate); err != nil {
		return err
	}
	if err := CheckLine("file_task.kind", t.Kind, MaxKindLen); err != nil {
		return err
	}
	if t.Priority != nil && *t.Priority < 0 {
		return Errorf(CodeInvalid, "file_task.priority: must not be negative (0 is the most urgent)")
	}
	if err := CheckTemplate("file_task.title", t.Title, steps, withEvent); err != nil {
		return err
	}
	return CheckTemplate("file_task.description", t.Description, steps, withEvent)
}

// HookSpec is the body that creates a hook. ID defaults to a slug of Name;
// Enabled defaults to true and CooldownSeconds to DefaultHookCooldown.
type HookSpec struct {
	ID              string         `json:"id,omitempty"`
	ProjectID       string         `json:"project_id"`
	Name            string         `json:"name"`
	Enabled         *bool          `json:"enabled,omitempty"`
	Trigger         HookTrigger    `json:"trigger"`
	ContextSteps    []HookStep     `json:"context_steps,omitempty"`
	PromptTemplate  string         `json:"prompt_template,omitempty"`
	LLMConfig       *HookLLMConfig `json:"llm_config,omitempty"`
	FileTask        *HookTask      `json:"file_task,omitempty"`
	CooldownSeconds *int           `json:"cooldown_seconds,omitempty"`
	MaxTokensPerRun *int           `json:"max_tokens_per_run,omitempty"`
}

var slugRun = regexp.MustCompile(`[^a-z0-9]+`)

// Hook returns the hook the spec describes, defaults applied.
func (s HookSpec) Hook() Hook {
	h := Hook{ID: s.ID, ProjectID: s.ProjectID, Name: strings.TrimSpace(s.Name), Enabled: true, Trigger: s.Trigger,
		ContextSteps: s.ContextSteps, PromptTemplate: s.PromptTemplate, LLMConfig: s.LLMConfig, FileTask: s.FileTask,
		CooldownSeconds: DefaultHookCooldown, MaxTokensPerRun: s.MaxTokensPerRun}
	if h.ID == "" {
		h.ID = strings.Trim(slugRun.ReplaceAllString(strings.ToLower(h.Name), "-"), "-")
		if len(h.ID) > 64 {
			h.ID = strings.TrimRight(h.ID[:64], "-")
		}
	}
	if s.Enabled != nil {
		h.Enabled = *s.Enabled
	}
	if s.CooldownSeconds != nil {
		h.CooldownSeconds = *s.CooldownSeconds
	}
	if h.ContextSteps == nil {
		h.ContextSteps = []HookStep{}
	}
	return h
}

// HookPatch changes a hook; nil fields are left alone. ClearLLMConfig,
// ClearFileTask and ClearMaxTokens remove those settings.
type HookPatch struct {
	Name            *string        `json:"name,omitempty"`
	Enabled         *bool          `json:"enabled,omitempty"`
	Trigger         *HookTrigger   `json:"trigger,omitempty"`
	ContextSteps    *[]HookStep    `json:"context_steps,omitempty"`
	PromptTemplate  *string        `json:"prompt_template,omitempty"`
	LLMConfig       *HookLLMConfig `json:"llm_config,omitempty"`
	ClearLLMConfig  bool           `json:"clear_llm_config,omitempty"`
	FileTask        *HookTask      `json:"file_task,omitempty"`
	ClearFileTask   bool           `json:"clear_file_task,omitempty"`
	CooldownSeconds *int           `json:"cooldown_seconds,omitempty"`
	MaxTokensPerRun *int           `json:"max_tokens_per_run,omitempty"`
	ClearMaxTokens  bool           `json:"clear_max_tokens_per_run,omitempty"`
}

// Apply returns h changed by the patch. A changed trigger, or enabling a
// disabled hook, restarts its schedule at now.
func (p HookPatch) Apply(h Hook, now time.Time) Hook {
	if p.Name != nil {
		h.Name = strings.TrimSpace(*p.Name)
	}
	if p.Enabled != nil {
		if *p.Enabled && !h.Enabled {
			h.ScheduleFrom = now
		}
		h.Enabled = *p.Enabled
	}
	if p.Trigger != nil {
		a, _ := json.Marshal(h.Trigger)
		b, _ := json.Marshal(*p.Trigger)
		if string(a) != string(b) {
			h.ScheduleFrom = now
		}
		h.Trigger = *p.Trigger
	}
	if p.ContextSteps != nil {
		h.ContextSteps = *p.ContextSteps
		if h.ContextSteps == nil {
			h.ContextSteps = []HookStep{}
		}
	}
	if p.PromptTemplate != nil {
		h.PromptTemplate = *p.PromptTemplate
	}
	if p.ClearLLMConfig {
		h.LLMConfig = nil
	}
	if p.LLMConfig != nil {
		c := *p.LLMConfig
		if c.APIKey == RedactedKey {
			// An edited copy of a redacted answer keeps the key, for the
			// endpoint it was given for only.
			c.APIKey = ""
			if h.LLMConfig != nil && h.LLMConfig.BaseURL == c.BaseURL {
				c.APIKey = h.LLMConfig.APIKey
			}
		}
		h.LLMConfig = &c
	}
	if p.ClearFileTask {
		h.FileTask = nil
	}
	if p.FileTask != nil {
		t := *p.FileTask
		h.FileTask = &t
	}
	if p.CooldownSeconds != nil {
		h.CooldownSeconds = *p.CooldownSeconds
	}
	if p.ClearMaxTokens {
		h.MaxTokensPerRun = nil
	}
	if p.MaxTokensPerRun != nil {
		h.MaxTokensPerRun = p.MaxTokensPerRun
	}
	h.UpdatedAt = now
	return h
}

// HookRunStatus is where a hook run stands: running, or ended as
// completed, failed or skipped.
type HookRunStatus string

// HookRun statuses.
const (
	HookRunRunning   HookRunStatus = "running"
	HookRunCompleted HookRunStatus = "completed"
	HookRunFailed    HookRunStatus = "failed"
	HookRunSkipped   HookRunStatus = "skipped"
)

// HookRunStatuses are the hook run statuses, in the order they are offered
// as filters.
var HookRunStatuses = []HookRunStatus{HookRunRunning, HookRunCompleted, HookRunFailed, HookRunSkipped}

// Final reports whether a run in status s has ended.
func (s HookRunStatus) Final() bool {
	return s == HookRunCompleted || s == HookRunFailed || s == HookRunSkipped
}

// HookTriggerReason says why a hook run fired, in the specification's
// values: "periodic" or "cron" (a scheduled time), "event:<event type>"
// (an event) or "manual" (fired by hand). The words a person reads are
// the run's TriggerDetail, written by the *Detail constructors below.
type HookTriggerReason string

// The trigger reasons other than an event's (see EventTrigger).
const (
	TriggerReasonPeriodic HookTriggerReason = "periodic"
	TriggerReasonCron     HookTriggerReason = "cron"
	TriggerReasonManual   HookTriggerReason = "manual"
)

// EventTrigger is the trigger reason of a firing for event eventType.
func EventTrigger(eventType string) HookTriggerReason { return HookTriggerReason("event:" + eventType) }

// ScheduleTrigger is the trigger reason of a scheduled firing of a hook
// whose trigger is of type t (periodic or cron).
func ScheduleTrigger(t HookTriggerType) HookTriggerReason {
	if t == TriggerCron {
		return TriggerReasonCron
	}
	return TriggerReasonPeriodic
}

// Beginnings of the trigger details.
const (
	reasonSchedule = "schedule "
	reasonEvent    = "event "
	reasonFiredBy  = "fired by "
)

// ScheduleDetail is the detail of a firing for the scheduled time at,
// after missed earlier scheduled times that were not caught up.
func ScheduleDetail(at time.Time, missed int) string {
	r := reasonSchedule + at.UTC().Format(time.RFC3339)
	if missed > 0 {
		r += fmt.Sprintf(" (catch-up after downtime: %d earlier scheduled times missed)", missed)
	}
	return r
}

// EventDetail is the detail of a firing for event eventType of task taskID.
func EventDetail(eventType, taskID string) string {
	return fmt.Sprintf("%s%s of task %s", reasonEvent, eventType, taskID)
}

// FiredByDetail is the detail of a manual firing by actor by.
func FiredByDetail(by string) string { return reasonFiredBy + by }

// FiredBy returns the actor who fired a manual run; ok is false for a run
// that was not fired by hand.
func (r HookRun) FiredBy() (by string, ok bool) {
	if r.TriggerReason != TriggerReasonManual {
		return "", false
	}
	return strings.CutPrefix(r.TriggerDetail, reasonFiredBy)
}

// HookRun records one execution of a hook: why it fired, what it gathered,
// what it sent and received, what it did and what it cost.
type HookRun struct {
	ID        string `json:"id"`
	HookID    string `json:"hook_id"`
	ProjectID string `json:"project_id"`
	// TriggerReason says why the hook fired: periodic, cron,
	// event:<type> or manual; TriggerDetail says it in words
	// ("schedule 2026-11-24T09:00:00Z", "event task.completed of task
	// brave-otter", "fired by @alice").
	TriggerReason HookTriggerReason `json:"trigger_reason"`
	TriggerDetail string            `json:"trigger_detail"`
	Status        HookRunStatus     `json:"status"`
	// FireKey identifies the firing: a scheduled time, an event or a manual
	// fire; a hook fires once per key.
	FireKey string `json:"fire_key"`
	// ScheduledAt is the scheduled time of a schedule's firing.
	ScheduledAt *time.Time `json:"scheduled_at,omitempty"`
	// EventData is the event's JSON (HookEvent).
	EventData *string `json:"event_data,omitempty"`
	// ContextResults is the JSON array of step results (StepResult).
	ContextResults *string `json:"context_results,omitempty"`
	PromptSent     *string `json:"prompt_sent,omitempty"`
	// LLMResponse is the model's final answer text.
	LLMResponse *string `json:"llm_response,omitempty"`
	// ActionsTaken is the JSON array of tool calls and their outcomes (HookAction).
	ActionsTaken  *string `json:"actions_taken,omitempty"`
	SkippedReason *string `json:"skipped_reason,omitempty"`
	// Error says why a failed run failed.
	Error       string     `json:"error,omitempty"`
	TokensUsed  int64      `json:"tokens_used"`
	StartedAt   time.Time  `json:"started_at"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
}

// HookEvent is a task lifecycle event as hooks see it.
type HookEvent struct {
	// ID is the event's sequence number (its outbox row), 0 for an event
	// given by hand.
	ID        int64    `json:"id,omitempty"`
	Type      string   `json:"type"`
	TaskID    string   `json:"task_id,omitempty"`
	ProjectID string   `json:"project_id,omitempty"`
	Title     string   `json:"title,omitempty"`
	Kind      string   `json:"kind,omitempty"`
	From      string   `json:"from,omitempty"`
	To        string   `json:"to,omitempty"`
	Event     string   `json:"event,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	Actor     string   `json:"actor,omitempty"`
	Blocked   []string `json:"blocked,omitempty"`
}

// Field returns the event's field name as text (HookEventFields).
func (e HookEvent) Field(name string) (string, bool) {
	switch name {
	case "type":
		return e.Type, true
	case "task_id":
		return e.TaskID, true
	case "project_id":
		return e.ProjectID, true
	case "title":
		return e.Title, true
	case "kind":
		return e.Kind, true
	case "from":
		return e.From, true
	case "to":
		return e.To, true
	case "event":
		return e.Event, true
	case "reason":
		return e.Reason, true
	case "actor":
		return e.Actor, true
	case "blocked":
		return strings.Join(e.Blocked, ", "), true
	}
	return "", false
}

// Matches reports whether the event fires trigger t for a hook of projectID.
func (e HookEvent) Matches(t HookTrigger, projectID string) bool {
	if t.Type != TriggerEvent || t.EventType != e.Type || e.ProjectID != projectID {
		return false
	}
	for k, want := range t.Filters {
		if got, ok := e.Field(k); !ok || got != want {
			return false
		}
	}
	return true
}

// StepResult is what one context step gathered.
type StepResult struct {
	Type   string `json:"type"`
	Output string `json:"output"`
	// Truncated is set when Output was cut at the step's cap.
	Truncated bool `json:"truncated,omitempty"`
	// ExitCode is run_command's exit status; Status is http_get's HTTP status.
	ExitCode *int `json:"exit_code,omitempty"`
	Status   int  `json:"status,omitempty"`
	// Count is the entries of list_files, git_log and db_query.
	Count *int `json:"count,omitempty"`
}

// Field returns the result's field name as text (StepResultFields).
func (r StepResult) Field(name string) (string, bool) {
	switch name {
	case "", "output":
		return r.Output, true
	case "truncated":
		return fmt.Sprint(r.Truncated), true
	case "exit_code":
		if r.ExitCode != nil {
			return fmt.Sprint(*r.ExitCode), true
		}
	case "status":
		if r.Status != 0 {
			return fmt.Sprint(r.Status), true
		}
	case "count":
		if r.Count != nil {
			return fmt.Sprint(*r.Count), true
		}
	}
	return "", false
}

// HookAction is one tool call of a run's LLM and what came of it.
type HookAction struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	// Result is the tool's answer to the model; Error, when set, says why
	// the call did nothing.
	Result string `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
}

// HookFire is the body of a manual fire: an optional event, to try an
// event hook by hand.
type HookFire struct {
	Event *HookEvent `json:"event,omitempty"`
}

// HookRunFilter narrows a list of hook runs.
type HookRunFilter struct {
	HookID    string
	ProjectID string
	Status    HookRunStatus
	Limit     int
}

// HookClaim asks to start a run of a hook for one firing.
type HookClaim struct {
	HookID string
	// FireKey identifies the firing; a hook fires once per key.
	FireKey string
	// ScheduledAt is the scheduled time of a schedule's firing.
	ScheduledAt   *time.Time
	TriggerReason HookTriggerReason
	TriggerDetail string
	Event         *HookEvent
	// Manual firings ignore the cooldown and a disabled hook.
	Manual bool
	// MaxRunning caps the hook runs running at once (all hooks); 0 is no cap.
	MaxRunning int
	// GlobalBudget, when set, caps the tokens of all projects since
	// WindowStart: a firing past it is skipped.
	GlobalBudget *int64
	WindowStart  time.Time
}

// HookClaimResult says what came of a claim.
type HookClaimResult struct {
	// Run is the run recorded: running, or skipped with its reason.
	Run HookRun
	// Duplicate is set when the firing was claimed before: nothing was recorded.
	Duplicate bool
	// Busy is set when MaxRunning runs are running: nothing was recorded,
	// and the firing may be claimed again later.
	Busy bool
}
