package models

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Known agent types.
var AgentTypes = []string{"claude", "codex", "cursor", "aider", "command"}

// Agent is a registered worker that executes tasks.
type Agent struct {
	ID                string     `json:"id"`
	Name              string     `json:"name"`
	AgentType         string     `json:"agent_type"`
	State             AgentState `json:"state"`
	CurrentTaskID     *string    `json:"current_task_id,omitempty"`
	CheckoutPath      *string    `json:"checkout_path,omitempty"`
	RepoID            *string    `json:"repo_id,omitempty"`
	PID               *int       `json:"pid,omitempty"`
	LastHeartbeat     *time.Time `json:"last_heartbeat,omitempty"`
	TotalTokensUsed   int64      `json:"total_tokens_used"`
	SessionTokensUsed int64      `json:"session_tokens_used"`
	CreatedAt         time.Time  `json:"created_at"`
	// Paused is set by a person: the agent takes no new task.
	Paused bool `json:"paused"`
	// RestUntil and RestReason are the agent's rest after its provider
	// refused work (a rate limit, a usage cap): it takes no task before
	// RestUntil. Reads show them only while the rest lasts, with State
	// PAUSED when the agent is otherwise IDLE.
	RestUntil  *time.Time `json:"rest_until,omitempty"`
	RestReason string     `json:"rest_reason,omitempty"`
	// CLIVersion is the version of the agent's CLI its latest run
	// reported; CLIWarning says why it is not known to be good (derived).
	CLIVersion string `json:"cli_version,omitempty"`
	CLIWarning string `json:"cli_warning,omitempty"`
	// RunnerID names the runner the agent is on (docs/runners.md); empty
	// for the daemon's own agents.
	RunnerID string `json:"runner_id,omitempty"`
	AgentSettings
}

// Resting reports whether the agent rests at now.
func (a Agent) Resting(now time.Time) bool { return a.RestUntil != nil && a.RestUntil.After(now) }

// ShowRest prepares an agent read at now for showing: a rest that is over
// is left out, and an IDLE agent that rests is PAUSED (the state of the
// specification for an agent waiting out a limit).
func (a *Agent) ShowRest(now time.Time) {
	if !a.Resting(now) {
		a.RestUntil, a.RestReason = nil, ""
		return
	}
	if a.State == AgentIdle {
		a.State = AgentPaused
	}
}

// AgentSettings is how an agent is run: set at registration, from config or
// the API.
type AgentSettings struct {
	// Command is the executable (the command type) or a path to the CLI.
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Env is added to the scrubbed environment of every run. Its values
	// are secrets to every answer, message and log: Redacted masks them.
	Env map[string]string `json:"env,omitempty"`
	// PassEnv names variables of the daemon's own environment copied into
	// every run's environment (a provider's API key the daemon was started
	// with), so that no key has to be written into the configuration or
	// the database. A name the daemon's environment lacks is skipped.
	PassEnv []string `json:"pass_env,omitempty"`
	// MaxRuntime caps a run's wall-clock time; 0 means the daemon's default.
	MaxRuntime Duration `json:"max_runtime,omitempty"`
	// IdleTimeout ends a run with no output and no RPC for this long; 0
	// means the daemon's default.
	IdleTimeout Duration `json:"idle_timeout,omitempty"`
	// HeartbeatTimeout ends a run whose agent made no report over the
	// agent RPC (heartbeat, progress, a question, usage, complete, …) for
	// this long; 0 (the default) holds the agent to no heartbeat.
	HeartbeatTimeout Duration `json:"heartbeat_timeout,omitempty"`
	// Projects limits the agent to these projects; empty means any.
	Projects []string `json:"projects,omitempty"`
	// Profile is the agent's own way of running its CLI; a task's or
	// project's named profile overrides its non-empty fields.
	Profile Profile `json:"profile,omitempty"`
}

// Validate checks the settings, naming the bad field.
func (s *AgentSettings) Validate() error {
	switch {
	case s.MaxRuntime < 0:
		return Errorf(CodeInvalid, "max_runtime: must not be negative")
	case s.IdleTimeout < 0:
		return Errorf(CodeInvalid, "idle_timeout: must not be negative")
	case s.HeartbeatTimeout < 0:
		return Errorf(CodeInvalid, "heartbeat_timeout: must not be negative")
	}
	if err := CheckLine("command", s.Command, MaxPathLen); err != nil {
		return err
	}
	if err := checkArgs("args", s.Args); err != nil {
		return err
	}
	if err := checkEnv("env", s.Env); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		if strings.HasPrefix(k, "AQ_") {
			return Errorf(CodeInvalid, "env: %s is set by the daemon for each run", k)
		}
	}
	if err := checkNotMask("env", s.Env); err != nil {
		return err
	}
	if err := checkPassEnv("pass_env", s.PassEnv, s.Env); err != nil {
		return err
	}
	if err := s.Profile.Validate(); err != nil {
		return Errorf(CodeInvalid, "profile.%s", ErrorMessageOf(err))
	}
	return checkList("projects", s.Projects, MaxListEntries, func(name, p string) error {
		if !ValidID(p) {
			return Errorf(CodeInvalid, "%s: %q is not a project id", name, cutRunes(p, 80))
		}
		return nil
	})
}

// checkArgs checks a command's arguments: at most MaxListEntries, each of
// at most MaxCommandLen characters (line breaks and tabs allowed).
func checkArgs(field string, args []string) error {
	return checkList(field, args, MaxListEntries, func(name, v string) error { return CheckText(name, v, MaxCommandLen) })
}

// checkEnv checks environment variables: at most MaxEnvEntries, names of
// one line without '=', values of at most MaxEnvValueLen characters (line
// breaks and tabs allowed). The first bad name in sorted order is named.
func checkEnv(field string, env map[string]string) error {
	if len(env) > MaxEnvEntries {
		return Errorf(CodeInvalid, "%s: at most %d variables (got %d)", field, MaxEnvEntries, len(env))
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if k == "" || strings.Contains(k, "=") {
			return Errorf(CodeInvalid, "%s: %q is not a variable name", field, cutRunes(k, 80))
		}
		if err := CheckLine(field+" name "+strconv.Quote(cutRunes(k, 40)), k, MaxEnvKeyLen); err != nil {
			return err
		}
		if err := CheckText(field+"."+cutRunes(k, 40), env[k], MaxEnvValueLen); err != nil {
			return err
		}
	}
	return nil
}

// envName is a portable environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkPassEnv checks the names of pass_env: portable variable names, each
// once, none of the daemon's AQ_ variables and none also set in env.
func checkPassEnv(field string, names []string, env map[string]string) error {
	if len(names) > MaxEnvEntries {
		return Errorf(CodeInvalid, "%s: at most %d names (got %d)", field, MaxEnvEntries, len(names))
	}
	seen := map[string]bool{}
	for i, n := range names {
		at := field + "[" + strconv.Itoa(i) + "]"
		switch {
		case len(n) > MaxEnvKeyLen || !envName.MatchString(n):
			return Errorf(CodeInvalid, "%s: %s is not an environment variable name (letters, digits and '_', "+
				"not starting with a digit)", at, Quote(n))
		case strings.HasPrefix(n, "AQ_"):
			return Errorf(CodeInvalid, "%s: %s cannot be passed: the daemon sets the AQ_ variables of each run "+
				"itself (socket, task, run token)", at, n)
		case seen[n]:
			return Errorf(CodeInvalid, "%s: %s is named twice", at, n)
		}
		if _, ok := env[n]; ok {
			return Errorf(CodeInvalid, "%s: %s is also set in env; keep one of the two", at, n)
		}
		seen[n] = true
	}
	return nil
}

// RedactedValue stands in for a secret value (an agent's env values, an
// MCP server's env values) in answers, messages and logs.
const RedactedValue = "********"

// checkNotMask refuses env values that are the mask answers show: an
// answer fed back as a registration would store the mask as the value.
func checkNotMask(field string, env map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if env[k] == RedactedValue {
			return Errorf(CodeInvalid, "%s.%s: %q is the mask answers show in place of a value; give the real "+
				"value, or name the variable in pass_env", field, cutRunes(k, 40), RedactedValue)
		}
	}
	return nil
}

// redactEnv returns env with every value masked, names kept.
func redactEnv(env map[string]string) map[string]string {
	if env == nil {
		return nil
	}
	out := make(map[string]string, len(env))
	for k := range env {
		out[k] = RedactedValue
	}
	return out
}

// Redacted returns the agent as it may be shown in answers, messages and
// logs: its env values and those of its profile's MCP servers masked
// (RedactedValue, the names kept) and the credentials of its MCP server
// URLs removed. The agent itself is not changed: the store and the runs
// need the values.
func (a Agent) Redacted() Agent {
	a.AgentSettings = a.AgentSettings.Redacted()
	return a
}

// Redacted returns the settings as they may be shown (see Agent.Redacted).
func (s AgentSettings) Redacted() AgentSettings {
	s.Env = redactEnv(s.Env)
	s.PassEnv = slices.Clone(s.PassEnv)
	s.Profile = s.Profile.Redacted()
	return s
}

// ApplyDefaults fills unset fields.
func (a *Agent) ApplyDefaults() {
	if a.State == "" {
		a.State = AgentIdle
	}
	if a.Name == "" {
		a.Name = a.ID
	}
}

// Validate checks an agent registration.
func (a *Agent) Validate() error {
	switch {
	case !ValidID(a.ID):
		return Errorf(CodeInvalid, "agent id %s: use 1-64 lower-case letters, digits, '-' or '_'", Quote(a.ID))
	case strings.TrimSpace(a.Name) == "":
		return Errorf(CodeInvalid, "name: required")
	}
	if err := CheckLine("name", a.Name, MaxNameLen); err != nil {
		return err
	}
	switch {
	case !validAgentType(a.AgentType):
		return Errorf(CodeInvalid, "agent_type: must be one of %s (got %s)", strings.Join(AgentTypes, ", "), Quote(a.AgentType))
	case !a.State.Valid():
		return Errorf(CodeInvalid, "state: unknown agent state %s", Quote(string(a.State)))
	case a.AgentType == "command" && strings.TrimSpace(a.Command) == "":
		return Errorf(CodeInvalid, "command: required for agent_type command")
	}
	if err := a.AgentSettings.Validate(); err != nil {
		return err
	}
	if _, err := PermissionModeFor(a.AgentType, a.Profile.PermissionMode); err != nil {
		return Errorf(CodeInvalid, "profile.%s", ErrorMessageOf(err))
	}
	return nil
}

func validAgentType(t string) bool {
	for _, k := range AgentTypes {
		if k == t {
			return true
		}
	}
	return false
}

// AgentRegistration is what a person supplies to register an agent; the
// rest of Agent is the daemon's to set.
type AgentRegistration struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	AgentType string `json:"agent_type"`
	AgentSettings
}

// Agent returns the new, IDLE agent the registration describes.
func (r AgentRegistration) Agent() Agent {
	a := Agent{ID: r.ID, Name: r.Name, AgentType: r.AgentType, AgentSettings: r.AgentSettings}
	a.ApplyDefaults()
	return a
}
