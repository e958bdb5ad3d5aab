package models

import (
	"slices"
	"strings"
)

// What a runner and the daemon say to each other over /runner/v1
// (docs/runners.md, "The connection").

// RunnerAgent is one agent of a runner as the runner announces it: what
// the daemon needs to schedule it and to write its prompts. How the runner
// starts it (its command, arguments and environment) stays on the runner.
type RunnerAgent struct {
	// Name is the agent's name in the runner's configuration (ValidID);
	// the daemon knows it as RUNNER/NAME.
	Name string `json:"name"`
	// AgentType is claude, codex, cursor, aider or command.
	AgentType        string   `json:"agent_type"`
	MaxRuntime       Duration `json:"max_runtime,omitempty"`
	IdleTimeout      Duration `json:"idle_timeout,omitempty"`
	HeartbeatTimeout Duration `json:"heartbeat_timeout,omitempty"`
	// Projects limits the agent to these projects; empty means any.
	Projects []string `json:"projects,omitempty"`
	// Profile is the agent's own way of running its CLI.
	Profile Profile `json:"profile,omitzero"`
}

// RunnerHello is what a runner says when it connects: POST /runner/v1/hello.
type RunnerHello struct {
	// Name, when set, is the name the runner believes it has: the daemon
	// refuses the hello when the token names another runner.
	Name    string        `json:"name,omitempty"`
	Version string        `json:"version"`
	Agents  []RunnerAgent `json:"agents"`
}

// MaxRunnerAgents caps the agents one runner announces.
const MaxRunnerAgents = 256

// RunnerWelcome is the daemon's answer to a hello.
type RunnerWelcome struct {
	// Runner is the runner's name (its token's).
	Runner string `json:"runner"`
	// Agents are the runner's agents as the daemon knows them (RUNNER/NAME).
	Agents []string `json:"agents"`
	// PollHold is the longest the daemon holds a poll; the runner waits
	// longer than that for an answer before it takes the connection for
	// lost.
	PollHold Duration `json:"poll_hold"`
}

// RunnerPoll is the daemon's answer to a poll: GET /runner/v1/poll. An
// empty answer means "nothing yet: poll again".
type RunnerPoll struct {
	// Draining is set while the runner is drained: it takes no new run.
	Draining bool `json:"draining,omitempty"`
}

// Validate checks a hello, naming the bad field: a version of one short
// line, at most MaxRunnerAgents agents, each named by an id given once, of
// a known type, with valid limits and profile.
func (h RunnerHello) Validate() error {
	if h.Name != "" && !ValidID(h.Name) {
		return Errorf(CodeInvalid, "name: %s is not a runner name", Quote(cutRunes(h.Name, 80)))
	}
	if err := CheckLine("version", h.Version, MaxShortLen); err != nil {
		return err
	}
	if len(h.Agents) > MaxRunnerAgents {
		return Errorf(CodeInvalid, "agents: at most %d (got %d)", MaxRunnerAgents, len(h.Agents))
	}
	seen := make(map[string]bool, len(h.Agents))
	for i, a := range h.Agents {
		switch {
		case !ValidID(a.Name):
			return Errorf(CodeInvalid, "agents[%d].name: %s is not an agent name (1-64 lower-case letters, digits, '-' or '_')",
				i, Quote(cutRunes(a.Name, 80)))
		case seen[a.Name]:
			return Errorf(CodeInvalid, "agents[%d].name: %s is listed twice", i, Quote(a.Name))
		case !slices.Contains(AgentTypes, a.AgentType):
			return Errorf(CodeInvalid, "agents[%d].agent_type: %s is not an agent type (%s)", i, Quote(cutRunes(a.AgentType, 40)),
				strings.Join(AgentTypes, ", "))
		case a.MaxRuntime < 0 || a.IdleTimeout < 0 || a.HeartbeatTimeout < 0:
			return Errorf(CodeInvalid, "agents[%d]: time limits must not be negative", i)
		}
		seen[a.Name] = true
		prof := a.Profile
		if err := prof.Validate(); err != nil {
			return WrapError(CodeInvalid, err, "agents[%d].profile: %s", i, ErrorMessageOf(err))
		}
		for j, p := range a.Projects {
			if !ValidID(p) {
				return Errorf(CodeInvalid, "agents[%d].projects[%d]: %s is not a project id", i, j, Quote(cutRunes(p, 80)))
			}
		}
	}
	return nil
}
