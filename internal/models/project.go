package models

import (
	"bytes"
	"encoding/json"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Defaults of the specification for projects and repos.
const (
	DefaultCreditWeight        = 1.0
	DefaultMaxConcurrentAgents = 2
	DefaultBranch              = "main"
)

// Project is the top-level unit: tasks, repos and agents belong to one.
type Project struct {
	ID                  string        `json:"id"`
	Name                string        `json:"name"`
	CreditWeight        float64       `json:"credit_weight"`
	MaxConcurrentAgents int           `json:"max_concurrent_agents"`
	Status              ProjectStatus `json:"status"`
	TotalTokensUsed     int64         `json:"total_tokens_used"`
	// BudgetLimit caps total tokens; nil means unlimited.
	BudgetLimit *int64 `json:"budget_limit,omitempty"`
	// DiscordChannelID routes the project's notices; nil means the control channel.
	DiscordChannelID *string     `json:"discord_channel_id,omitempty"`
	Repo             *RepoConfig `json:"repo,omitempty"`
	// Settings are the project's choices for how its tasks run and land.
	Settings  ProjectSettings `json:"settings"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// ProjectSettings are a project's choices for how its tasks run and land.
type ProjectSettings struct {
	// DefaultProfile is the agent profile of tasks that name none.
	DefaultProfile string `json:"default_profile,omitempty"`
	// RunnerLabels limits the project's tasks to agents on runners that
	// have every one of these labels (docs/runners.md); the daemon's own
	// agents have none.
	RunnerLabels []string `json:"runner_labels,omitempty"`
	// RequirePlanApproval keeps a task whose agent proposed a plan in
	// AWAITING_APPROVAL until a person approves; the subtasks are created then.
	RequirePlanApproval bool `json:"require_plan_approval,omitempty"`
	// QAAgent is the agent that reviews QA_AGENT tasks (default: the
	// daemon's verification.qa_agent); QAProfile the profile it reviews with.
	QAAgent   string `json:"qa_agent,omitempty"`
	QAProfile string `json:"qa_profile,omitempty"`

	// PRMode says which verified tasks land through a pull request:
	// "never", "when_required" (tasks with requires_approval; the default)
	// or "always". A task that requires approval and gets no pull request
	// waits for a person in AWAITING_APPROVAL all the same.
	PRMode string `json:"pr_mode,omitempty"`
	// PRDraft opens pull requests as drafts.
	PRDraft bool `json:"pr_draft,omitempty"`
	// PRReviewers and PRLabels are requested on and added to each pull request.
	PRReviewers []string `json:"pr_reviewers,omitempty"`
	PRLabels    []string `json:"pr_labels,omitempty"`
	// ReopenOnChangesRequested runs a task again, with the review's
	// comments as feedback, when its pull request gets "changes requested".
	ReopenOnChangesRequested bool `json:"reopen_on_changes_requested,omitempty"`
	// MergeFromChat lets an approval from chat or the API merge the pull
	// request through GitHub's API.
	MergeFromChat bool `json:"merge_from_chat,omitempty"`
	// TestCommands verify the project's tasks that have none of their own
	// (TestCommandsFor): shell commands run in the merged checkout, each of
	// which must exit 0. `agentqueued init` detects one from the
	// repository (go.mod: go test ./...).
	TestCommands []string `json:"test_commands,omitempty"`
	// HookCommands are the command lines the project's hooks may run in
	// run_command steps: a step runs only a command equal to one of them
	// (compared word by word; no shell).
	HookCommands []string `json:"hook_commands,omitempty"`

	// InputTimeout is how long an agent's question waits for an answer
	// before it expires; 0 is the daemon's orchestrator.input_timeout.
	InputTimeout Duration `json:"input_timeout,omitempty"`
	// OnExpiry is what an expired question does to its task: OnExpiryPause
	// (the default), OnExpiryFail or OnExpiryDefault. Every expiry uses one
	// of the task's retries; one that finds none left blocks the task.
	OnExpiry string `json:"on_expiry,omitempty"`

	// EscalateAfter re-posts a desk item of the project that has waited
	// this long to the escalation (once per item); 0 is never.
	EscalateAfter Duration `json:"escalate_after,omitempty"`
	// EscalateChannel is the Discord channel escalations go to (default:
	// the project's channel); EscalateRole the Discord role they mention.
	EscalateChannel string `json:"escalate_channel,omitempty"`
	EscalateRole    string `json:"escalate_role,omitempty"`
	// EscalateWebhook names one of the daemon's desk.webhooks each
	// escalation is also POSTed to (the URL, a secret, stays in the
	// daemon's configuration).
	EscalateWebhook string `json:"escalate_webhook,omitempty"`
	// DigestEvery posts a digest of what waits on a person ("4 things
	// wait on you, oldest 3h") to the project's channel at most this often
	// while something waits; 0 is never.
	DigestEvery Duration `json:"digest_every,omitempty"`
	// DiscordRoles, when set, are the Discord roles whose members may act
	// on the project from Discord (answer, approve, reject); an admin user
	// always may. Empty: any authorized user.
	DiscordRoles []string `json:"discord_roles,omitempty"`
}

// What an expired question does to its task (ProjectSettings.OnExpiry).
const (
	// OnExpiryPause pauses the task (INPUT_TIMEOUT) for the input timeout
	// again; it then runs again without the answer.
	OnExpiryPause = "pause"
	// OnExpiryFail fails the task (TIMEOUT_FAILED): it is retried after the
	// backoff like any failure.
	OnExpiryFail = "fail"
	// OnExpiryDefault answers with the agent's proposed default answer
	// (`ask --default`); a question without one pauses the task.
	OnExpiryDefault = "default"
)

// QuestionTimeout returns how long a question of this project waits: its
// InputTimeout, else def (the daemon's).
func (s ProjectSettings) QuestionTimeout(def time.Duration) time.Duration {
	if s.InputTimeout > 0 {
		return s.InputTimeout.Std()
	}
	return def
}

// AllowsHookCommand reports whether command is one of the hook commands.
func (s ProjectSettings) AllowsHookCommand(command string) bool {
	want := strings.Join(strings.Fields(command), " ")
	for _, c := range s.HookCommands {
		if strings.Join(strings.Fields(c), " ") == want {
			return true
		}
	}
	return false
}

// TestCommandsFor returns the test commands that verify t, a task of a
// project with these settings: the task's own, else the project's.
func (s ProjectSettings) TestCommandsFor(t Task) []string {
	if len(t.TestCommands) > 0 {
		return t.TestCommands
	}
	return s.TestCommands
}

// PR modes.
const (
	PRNever        = "never"
	PRWhenRequired = "when_required"
	PRAlways       = "always"
)

// NeedsPR reports whether a task of a project with these settings lands
// through a pull request.
func (s ProjectSettings) NeedsPR(t Task) bool {
	switch s.PRMode {
	case PRNever:
		return false
	case PRAlways:
		return true
	}
	return t.RequiresApproval
}

// Validate checks the settings, naming the bad field.
func (s *ProjectSettings) Validate() error {
	if err := checkRunnerLabels("settings.runner_labels", s.RunnerLabels); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"default_profile", s.DefaultProfile}, {"qa_agent", s.QAAgent},
		{"qa_profile", s.QAProfile}} {
		if f.v != "" && !ValidID(f.v) {
			return Errorf(CodeInvalid, "settings.%s: %s is not a valid name", f.name, Quote(f.v))
		}
	}
	switch s.OnExpiry {
	case "", OnExpiryPause, OnExpiryFail, OnExpiryDefault:
	default:
		return Errorf(CodeInvalid, "settings.on_expiry: must be pause, fail or default (got %s)", Quote(s.OnExpiry))
	}
	if s.InputTimeout < 0 || (s.InputTimeout > 0 && s.InputTimeout.Std() < time.Second) {
		return Errorf(CodeInvalid, "settings.input_timeout: must be at least 1s (got %s)", s.InputTimeout)
	}
	if s.InputTimeout.Std() > MaxInputTimeout {
		return Errorf(CodeInvalid, "settings.input_timeout: at most %s (got %s)", MaxInputTimeout, s.InputTimeout)
	}
	for _, d := range []struct {
		name string
		v    Duration
		min  time.Duration
	}{{"escalate_after", s.EscalateAfter, time.Minute}, {"digest_every", s.DigestEvery, time.Minute}} {
		if d.v < 0 || (d.v > 0 && d.v.Std() < d.min) {
			return Errorf(CodeInvalid, "settings.%s: must be at least %s (got %s)", d.name, d.min, d.v)
		}
	}
	for _, f := range []struct{ name, v string }{{"escalate_channel", s.EscalateChannel}, {"escalate_role", s.EscalateRole}} {
		if f.v != "" && !ValidSnowflake(f.v) {
			return Errorf(CodeInvalid, "settings.%s: %s is not a Discord id (1-20 digits)", f.name, Quote(cutRunes(f.v, 40)))
		}
	}
	if s.EscalateWebhook != "" && !ValidID(s.EscalateWebhook) {
		return Errorf(CodeInvalid, "settings.escalate_webhook: %s is not a webhook name", Quote(cutRunes(s.EscalateWebhook, 40)))
	}
	if err := checkList("settings.discord_roles", s.DiscordRoles, MaxListEntries, func(name, v string) error {
		if !ValidSnowflake(v) {
			return Errorf(CodeInvalid, "%s: %s is not a Discord role id (1-20 digits)", name, Quote(cutRunes(v, 40)))
		}
		return nil
	}); err != nil {
		return err
	}
	switch s.PRMode {
	case "", PRNever, PRWhenRequired, PRAlways:
	default:
		return Errorf(CodeInvalid, "settings.pr_mode: must be never, when_required or always (got %s)", Quote(s.PRMode))
	}
	for _, l := range []struct {
		name string
		vs   []string
		max  int
	}{{"pr_reviewers", s.PRReviewers, MaxReviewerLen}, {"pr_labels", s.PRLabels, MaxLabelLen}} {
		if err := checkList("settings."+l.name, l.vs, MaxPRNames, func(name, v string) error {
			if err := CheckLine(name, v, l.max); err != nil {
				return err
			}
			if strings.TrimSpace(v) == "" || strings.Contains(v, ",") {
				return Errorf(CodeInvalid, "%s: %s is not a valid name", name, Quote(v))
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if err := checkList("settings.test_commands", s.TestCommands, MaxListEntries, func(name, c string) error {
		if strings.TrimSpace(c) == "" {
			return Errorf(CodeInvalid, "%s: empty command", name)
		}
		return CheckText(name, c, MaxTestCommandLen)
	}); err != nil {
		return err
	}
	return checkList("settings.hook_commands", s.HookCommands, MaxListEntries, func(name, c string) error {
		if len(strings.Fields(c)) == 0 {
			return Errorf(CodeInvalid, "%s: empty command", name)
		}
		return CheckLine(name, c, MaxCommandLen)
	})
}

// MaxInputTimeout bounds a project's input_timeout: a question waits at
// most a month.
const MaxInputTimeout = 31 * 24 * time.Hour

// Limits of pull request settings: GitHub's longest user name and label,
// and how many of each a project may name.
const (
	MaxReviewerLen = 39
	MaxLabelLen    = 50
	MaxPRNames     = 20
)

// RepoConfig describes the source repository attached to a project.
type RepoConfig struct {
	ID               string         `json:"id"`
	ProjectID        string         `json:"project_id"`
	SourceType       RepoSourceType `json:"source_type"`
	URL              string         `json:"url,omitempty"`
	SourcePath       string         `json:"source_path,omitempty"`
	DefaultBranch    string         `json:"default_branch"`
	CheckoutBasePath string         `json:"checkout_base_path,omitempty"`
	// InPlace lets agents work in a LINK repo's own checkout instead of worktrees.
	InPlace bool `json:"in_place,omitempty"`
}

var (
	idPattern     = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	branchPattern = regexp.MustCompile(`^[A-Za-z0-9._/-]{1,200}$`)
)

// ValidID reports whether id is usable as a project, agent or hook id:
// lower-case letters, digits, '-' and '_', at most 64 characters.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// ApplyDefaults fills the specification's defaults into unset fields.
func (p *Project) ApplyDefaults() {
	if p.CreditWeight == 0 {
		p.CreditWeight = DefaultCreditWeight
	}
	if p.MaxConcurrentAgents == 0 {
		p.MaxConcurrentAgents = DefaultMaxConcurrentAgents
	}
	if p.Status == "" {
		p.Status = ProjectActive
	}
	if p.Name == "" {
		p.Name = p.ID
	}
	if p.Repo != nil {
		p.Repo.ApplyDefaults(p.ID)
	}
}

// Validate checks a project and its repo, naming the first bad field.
func (p *Project) Validate() error {
	switch {
	case !ValidID(p.ID):
		return Errorf(CodeInvalid, "project id %s: use 1-64 lower-case letters, digits, '-' or '_'", Quote(p.ID))
	case strings.TrimSpace(p.Name) == "":
		return Errorf(CodeInvalid, "name: required")
	}
	if err := CheckLine("name", p.Name, MaxNameLen); err != nil {
		return err
	}
	switch {
	case p.DiscordChannelID != nil && !ValidSnowflake(*p.DiscordChannelID):
		return Errorf(CodeInvalid, "discord_channel_id: %q is not a Discord channel id (1-20 digits)", cutRunes(*p.DiscordChannelID, 40))
	case !(p.CreditWeight > 0) || p.CreditWeight > 1e6:
		return Errorf(CodeInvalid, "credit_weight: must be greater than 0 (got %v)", p.CreditWeight)
	case p.MaxConcurrentAgents < 1 || p.MaxConcurrentAgents > 1000:
		return Errorf(CodeInvalid, "max_concurrent_agents: must be between 1 and 1000 (got %d)", p.MaxConcurrentAgents)
	case !p.Status.Valid():
		return Errorf(CodeInvalid, "status: unknown project status %s", Quote(string(p.Status)))
	case p.BudgetLimit != nil && *p.BudgetLimit < 0:
		return Errorf(CodeInvalid, "budget_limit: must not be negative")
	case p.TotalTokensUsed < 0:
		return Errorf(CodeInvalid, "total_tokens_used: must not be negative")
	}
	if err := p.Settings.Validate(); err != nil {
		return err
	}
	if p.Repo != nil {
		if err := p.Repo.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// ApplyDefaults fills the repo's defaults; the repo id defaults to the project id.
func (r *RepoConfig) ApplyDefaults(projectID string) {
	r.ProjectID = projectID
	if r.ID == "" {
		r.ID = projectID
	}
	if r.DefaultBranch == "" {
		r.DefaultBranch = DefaultBranch
	}
}

// Validate checks that the fields fit the source type.
func (r *RepoConfig) Validate() error {
	for _, f := range []struct {
		name, v string
		max     int
	}{{"repo.url", r.URL, MaxURLLen}, {"repo.source_path", r.SourcePath, MaxPathLen},
		{"repo.checkout_base_path", r.CheckoutBasePath, MaxPathLen}} {
		if err := CheckLine(f.name, f.v, f.max); err != nil {
			return err
		}
	}
	switch r.SourceType {
	case RepoClone:
		if strings.TrimSpace(r.URL) == "" {
			return Errorf(CodeInvalid, "repo.url: required for source_type CLONE")
		}
		if r.SourcePath != "" {
			return Errorf(CodeInvalid, "repo.source_path: not used with source_type CLONE")
		}
		if strings.HasPrefix(r.URL, "-") || strings.ContainsAny(r.URL, " \n\t") {
			return Errorf(CodeInvalid, "repo.url: %s is not a repository URL or path", Quote(RedactURL(r.URL)))
		}
		if err := CheckRepoURL("repo.url", r.URL); err != nil {
			return err
		}
	case RepoLink:
		if r.SourcePath == "" || !filepath.IsAbs(r.SourcePath) {
			return Errorf(CodeInvalid, "repo.source_path: an absolute path is required for source_type LINK")
		}
		if r.URL != "" {
			return Errorf(CodeInvalid, "repo.url: not used with source_type LINK")
		}
	case RepoInit:
		if r.URL != "" {
			return Errorf(CodeInvalid, "repo.url: not used with source_type INIT")
		}
		if r.SourcePath != "" && !filepath.IsAbs(r.SourcePath) {
			return Errorf(CodeInvalid, "repo.source_path: must be an absolute path")
		}
	default:
		return Errorf(CodeInvalid, "repo.source_type: must be CLONE, LINK or INIT (got %s)", Quote(string(r.SourceType)))
	}
	if !ValidID(r.ID) {
		return Errorf(CodeInvalid, "repo.id %s: use 1-64 lower-case letters, digits, '-' or '_'", Quote(r.ID))
	}
	if !branchPattern.MatchString(r.DefaultBranch) || strings.Contains(r.DefaultBranch, "..") ||
		strings.HasPrefix(r.DefaultBranch, "-") || strings.HasPrefix(r.DefaultBranch, "/") {
		return Errorf(CodeInvalid, "repo.default_branch: %s is not a valid branch name", Quote(r.DefaultBranch))
	}
	if r.CheckoutBasePath != "" && !filepath.IsAbs(r.CheckoutBasePath) {
		return Errorf(CodeInvalid, "repo.checkout_base_path: must be an absolute path")
	}
	if r.InPlace && r.SourceType != RepoLink {
		return Errorf(CodeInvalid, "repo.in_place: only for source_type LINK")
	}
	return nil
}

// ProjectSpec is what a person supplies to create a project; usage and
// timestamps are the daemon's to set.
type ProjectSpec struct {
	ID                  string          `json:"id"`
	Name                string          `json:"name,omitempty"`
	CreditWeight        float64         `json:"credit_weight,omitempty"`
	MaxConcurrentAgents int             `json:"max_concurrent_agents,omitempty"`
	Status              ProjectStatus   `json:"status,omitempty"`
	BudgetLimit         *int64          `json:"budget_limit,omitempty"`
	DiscordChannelID    *string         `json:"discord_channel_id,omitempty"`
	Repo                *RepoConfig     `json:"repo,omitempty"`
	Settings            ProjectSettings `json:"settings"`
}

// Project returns the project the spec describes, defaults not yet applied.
func (s ProjectSpec) Project() Project {
	return Project{ID: s.ID, Name: s.Name, CreditWeight: s.CreditWeight, MaxConcurrentAgents: s.MaxConcurrentAgents,
		Status: s.Status, BudgetLimit: s.BudgetLimit, DiscordChannelID: s.DiscordChannelID, Repo: s.Repo,
		Settings: s.Settings}
}

// ProjectPatch is a partial update of a project: nil fields are left alone.
type ProjectPatch struct {
	Name                *string        `json:"name,omitempty"`
	CreditWeight        *float64       `json:"credit_weight,omitempty"`
	MaxConcurrentAgents *int           `json:"max_concurrent_agents,omitempty"`
	Status              *ProjectStatus `json:"status,omitempty"`
	// BudgetLimit sets the budget; a negative value is refused, as on
	// create.
	BudgetLimit *int64 `json:"budget_limit,omitempty"`
	// ClearBudgetLimit removes the budget (unlimited). In JSON it is
	// "budget_limit": null.
	ClearBudgetLimit bool `json:"-"`
	// DiscordChannelID sets the channel; an empty string clears it.
	DiscordChannelID *string     `json:"discord_channel_id,omitempty"`
	Repo             *RepoConfig `json:"repo,omitempty"`
	// Settings replaces the project's settings as a whole. It travels as
	// the merge patch ReplaceSettings makes of it.
	Settings *ProjectSettings `json:"-"`
	// SettingsMerge is merged into the project's settings (after
	// Settings, when both are set): JSON merge patch semantics, as
	// "settings" of PATCH /api/v1/projects/{id} has them.
	SettingsMerge *SettingsPatch `json:"settings,omitempty"`
}

// MarshalJSON encodes the patch as the API takes it: Settings becomes the
// merge patch that sets every setting (SettingsMerge's keys win).
func (pp ProjectPatch) MarshalJSON() ([]byte, error) {
	type plain ProjectPatch
	out := plain(pp)
	if pp.Settings != nil {
		merged := ReplaceSettings(*pp.Settings)
		if pp.SettingsMerge != nil {
			for k, v := range *pp.SettingsMerge {
				merged[k] = v
			}
		}
		out.SettingsMerge = &merged
	}
	if !pp.ClearBudgetLimit {
		return json.Marshal(out)
	}
	if pp.BudgetLimit != nil {
		return nil, Errorf(CodeInvalid, "budget_limit: both set and cleared")
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	sep := ","
	if string(b) == "{}" {
		sep = ""
	}
	return []byte(string(b[:len(b)-1]) + sep + `"budget_limit":null}`), nil
}

// UnmarshalJSON decodes the patch as the API takes it: "budget_limit":
// null sets ClearBudgetLimit. Unknown keys are refused.
func (pp *ProjectPatch) UnmarshalJSON(b []byte) error {
	type plain ProjectPatch
	var out plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return err
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	if v, ok := keys["budget_limit"]; ok && string(bytes.TrimSpace(v)) == "null" {
		out.ClearBudgetLimit = true
	}
	*pp = ProjectPatch(out)
	return nil
}

// Fields names the fields the patch sets, in a fixed order.
func (pp ProjectPatch) Fields() []string {
	var out []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"name", pp.Name != nil}, {"credit_weight", pp.CreditWeight != nil},
		{"max_concurrent_agents", pp.MaxConcurrentAgents != nil}, {"status", pp.Status != nil},
		{"budget_limit", pp.BudgetLimit != nil || pp.ClearBudgetLimit}, {"discord_channel_id", pp.DiscordChannelID != nil},
		{"repo", pp.Repo != nil}, {"settings", pp.Settings != nil || pp.SettingsMerge != nil},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// Apply returns p with the patch applied and validated. A patch that sets
// no field is refused.
func (pp ProjectPatch) Apply(p Project) (Project, error) {
	if len(pp.Fields()) == 0 {
		return p, Errorf(CodeInvalid, "nothing to change: set one of name, credit_weight, max_concurrent_agents, "+
			"status, budget_limit, discord_channel_id, repo, settings")
	}
	if pp.Name != nil {
		p.Name = *pp.Name
	}
	if pp.CreditWeight != nil {
		p.CreditWeight = *pp.CreditWeight
	}
	if pp.MaxConcurrentAgents != nil {
		p.MaxConcurrentAgents = *pp.MaxConcurrentAgents
	}
	if pp.Status != nil {
		p.Status = *pp.Status
	}
	switch {
	case pp.ClearBudgetLimit && pp.BudgetLimit != nil:
		return p, Errorf(CodeInvalid, "budget_limit: both set and cleared")
	case pp.ClearBudgetLimit:
		p.BudgetLimit = nil
	case pp.BudgetLimit != nil && *pp.BudgetLimit < 0:
		return p, Errorf(CodeInvalid, "budget_limit: must not be negative (got %d); send null to remove the budget", *pp.BudgetLimit)
	case pp.BudgetLimit != nil:
		v := *pp.BudgetLimit
		p.BudgetLimit = &v
	}
	if pp.DiscordChannelID != nil {
		if *pp.DiscordChannelID == "" {
			p.DiscordChannelID = nil
		} else {
			v := *pp.DiscordChannelID
			p.DiscordChannelID = &v
		}
	}
	if pp.Settings != nil {
		p.Settings = *pp.Settings
	}
	if pp.SettingsMerge != nil {
		merged, err := pp.SettingsMerge.Apply(p.Settings)
		if err != nil {
			return p, err
		}
		p.Settings = merged
	}
	if pp.Repo != nil {
		r := *pp.Repo
		if p.Repo != nil {
			if r.ID == "" {
				r.ID = p.Repo.ID
			}
			if r.ID != p.Repo.ID {
				return p, Errorf(CodeInvalid, "repo.id: the project's repo is %s; it cannot be replaced by %s", Quote(p.Repo.ID), Quote(r.ID))
			}
		}
		r.ApplyDefaults(p.ID)
		p.Repo = &r
	}
	return p, p.Validate()
}

// Redacted returns the project as it may be shown in answers, messages and
// logs: a repository URL's credentials (left by an older daemon, which
// accepted them) replaced by "***".
func (p Project) Redacted() Project {
	if p.Repo != nil {
		r := *p.Repo
		r.URL = RedactURL(r.URL)
		p.Repo = &r
	}
	return p
}

// CheckRepoURL refuses a repository URL that carries credentials: an
// http(s) URL with any user information (https://user:token@host/… or
// https://token@host/…), any URL with a password, or any URL with a
// credential in its query string (?access_token=…, ?token=…,
// ?private_token=… and the like: see credentialParams). Credentials in a URL
// would show in answers, logs, error messages and on git's command line,
// where every local user can read them. SSH URLs with a user name and no
// password (git@host:owner/repo.git, ssh://git@host/owner/repo.git) are
// fine. The error names field and shows the URL redacted.
func CheckRepoURL(field, raw string) error {
	if !urlHasCredentials(raw) {
		return nil
	}
	return Errorf(CodeInvalid, "%s: credentials in the URL are refused (%s): they would show in answers, logs "+
		"and git's command line; give the URL without them — for GitHub set github.token, which the daemon "+
		"sends itself; for other hosts use an SSH URL (git@host:owner/repo.git) with an SSH key, or a git "+
		"credential helper", field, RedactURL(raw))
}

// urlHasCredentials reports whether raw has a credential in its query
// string (see credentialParams), is an http(s) URL with user information, a URL of another scheme with a password, an scp-like
// address ([user@]host:path) with a password, or a URL too malformed to
// tell (one with an '@' that does not parse).
func urlHasCredentials(raw string) bool {
	if queryHasCredentials(raw) {
		return true
	}
	if scheme, rest, ok := strings.Cut(raw, "://"); ok {
		auth := rest
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			auth = rest[:i]
		}
		web := strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https")
		if at := strings.LastIndexByte(auth, '@'); at >= 0 {
			return web || strings.Contains(auth[:at], ":")
		}
		if strings.Contains(rest, "@") {
			_, err := url.Parse(raw)
			return err != nil
		}
		return false
	}
	if strings.HasPrefix(raw, "/") || strings.HasPrefix(raw, ".") {
		return false // a local path
	}
	head := raw
	if i := strings.IndexByte(raw, '/'); i >= 0 {
		head = raw[:i]
	}
	at := strings.LastIndexByte(head, '@')
	return at >= 0 && strings.Contains(head[:at], ":")
}

// urlInText finds URLs with a scheme in a text (an error message, git's
// output); scpPassword an scp-like address with a password
// (user:password@host:path).
var (
	urlInText   = regexp.MustCompile("(?i)[a-z][a-z0-9+.-]*://[^\\s'\"<>`]+")
	scpPassword = regexp.MustCompile("[^\\s'\"<>`/:@]+:[^\\s'\"<>`/@]*@([^\\s'\"<>`/:@]+):")
)

// RedactURL returns s with the credentials of every URL in it replaced by
// "***": https://user:token@host/x.git and https://token@host/x.git become
// https://***@host/x.git. s may be a URL or any text that quotes URLs,
// such as git's error output. The user information of an http(s) URL is
// always replaced, that of other schemes when it has a password (a user
// name alone, as in ssh://git@host/…, stays); a URL too malformed to parse
// that holds an '@' loses everything before its last '@'.
func RedactURL(s string) string {
	if !strings.Contains(s, "@") && !strings.Contains(s, "?") {
		return s
	}
	s = urlInText.ReplaceAllStringFunc(s, func(u string) string { return redactQuery(redactUserinfo(u)) })
	return scpPassword.ReplaceAllString(s, "***@$1:")
}

// credentialParams are the query parameters, compared in lower case, whose
// values are credentials: GitHub's and GitLab's access tokens and the
// usual names of keys and passwords.
var credentialParams = map[string]bool{
	"access_token": true, "token": true, "private_token": true, "private-token": true, "job_token": true,
	"oauth_token": true, "auth_token": true, "api_key": true, "apikey": true, "key": true, "password": true,
	"passwd": true, "secret": true, "client_secret": true, "auth": true, "sig": true, "signature": true,
}

// isCredentialParam reports whether the query parameter named name (as it
// stands in the URL, maybe percent-encoded) carries a credential.
func isCredentialParam(name string) bool {
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	return credentialParams[strings.ToLower(name)]
}

// queryHasCredentials reports whether raw has a query string with a
// credential parameter (see credentialParams) that has a value.
func queryHasCredentials(raw string) bool {
	_, query, ok := strings.Cut(raw, "?")
	if !ok {
		return false
	}
	query, _, _ = strings.Cut(query, "#")
	for _, kv := range strings.Split(query, "&") {
		if k, v, _ := strings.Cut(kv, "="); v != "" && isCredentialParam(k) {
			return true
		}
	}
	return false
}

// redactQuery replaces the value of every credential parameter (see
// credentialParams) in the query string of the URL u by "***".
func redactQuery(u string) string {
	head, query, ok := strings.Cut(u, "?")
	if !ok {
		return u
	}
	query, frag, hasFrag := strings.Cut(query, "#")
	parts := strings.Split(query, "&")
	for i, kv := range parts {
		if k, v, ok := strings.Cut(kv, "="); ok && v != "" && isCredentialParam(k) {
			parts[i] = k + "=***"
		}
	}
	out := head + "?" + strings.Join(parts, "&")
	if hasFrag {
		out += "#" + frag
	}
	return out
}

// redactUserinfo redacts the user information of one URL.
func redactUserinfo(u string) string {
	i := strings.Index(u, "://") + 3
	prefix, rest := u[:i], u[i:]
	auth := rest
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
		auth = rest[:j]
	}
	at := strings.LastIndexByte(auth, '@')
	if scheme := u[:i-3]; at >= 0 && !strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https") &&
		!strings.Contains(auth[:at], ":") {
		return u // a user name alone, as ssh://git@host/… has: no secret
	}
	if at < 0 {
		if !strings.Contains(rest, "@") {
			return u
		}
		if _, err := url.Parse(u); err == nil {
			return u // an '@' in the path, query or fragment
		}
		at = strings.LastIndexByte(rest, '@')
	}
	return prefix + "***" + rest[at:]
}

// checkRunnerLabels checks the runner labels of a project or a task, key
// naming them in an error: at most MaxRunnerLabels, each a label (an id)
// given once.
func checkRunnerLabels(key string, labels []string) error {
	if len(labels) > MaxRunnerLabels {
		return Errorf(CodeInvalid, "%s: at most %d labels (got %d)", key, MaxRunnerLabels, len(labels))
	}
	for i, l := range labels {
		if !ValidID(l) {
			return Errorf(CodeInvalid, "%s[%d]: %s is not a label (1-64 lower-case letters, digits, '-' or '_')",
				key, i, Quote(cutRunes(l, 80)))
		}
		if slices.Contains(labels[:i], l) {
			return Errorf(CodeInvalid, "%s[%d]: %s is listed twice", key, i, Quote(l))
		}
	}
	return nil
}
