package service

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds the service's agent operations: registering checks that
// the program an agent runs resolves; pausing goes through the
// orchestrator, which ends an agent's rest after a rate limit. Every agent
// answered is redacted (models.Agent.Redacted: env values masked), so that
// no client shows one.

// agentExecutables are the executables agent types run when an agent
// names no command of its own.
var agentExecutables = map[string]string{
	"claude": "claude",
	"codex":  "codex",
	"cursor": "cursor-agent",
	"aider":  "aider",
}

// TypeExecutable is the executable an agent type runs when the agent
// names no command of its own; empty for an unknown type.
func TypeExecutable(agentType string) string { return agentExecutables[agentType] }

// AgentExecutable is the program an agent runs: its command, else its
// type's executable.
func AgentExecutable(a models.Agent) string {
	if c := strings.TrimSpace(a.Command); c != "" {
		return c
	}
	return agentExecutables[a.AgentType]
}

// resolveAgentCommand finds the program an agent runs as its process
// will: a name without a slash on the daemon's PATH, an absolute path as
// it is. A relative path with a slash is relative to the agent's checkout
// and cannot be checked before a run: it is accepted as it is. The error
// is CodeInvalid and names the field and the program.
func resolveAgentCommand(a models.Agent) (string, error) {
	name := AgentExecutable(a)
	field := "command"
	if strings.TrimSpace(a.Command) == "" {
		field = "agent_type"
	}
	switch {
	case name == "":
		return "", nil
	case strings.Contains(name, "/") && !filepath.IsAbs(name):
		return name, nil
	}
	path, err := exec.LookPath(name)
	if err == nil {
		return path, nil
	}
	if filepath.IsAbs(name) {
		why := "is not an executable file"
		if errors.Is(err, os.ErrNotExist) {
			why = "does not exist"
		}
		return "", models.WrapError(models.CodeInvalid, err, "%s: %s %s", field, name, why)
	}
	if field == "agent_type" {
		return "", models.WrapError(models.CodeInvalid, err, "agent_type: %s runs %q, which is not on the daemon's PATH: "+
			"install it, or give its path as command", a.AgentType, name)
	}
	return "", models.WrapError(models.CodeInvalid, err, "command: %q is not on the daemon's PATH: give an absolute "+
		"path, or add its directory to the PATH the daemon starts with", name)
}

// RegisterAgent registers an agent after checking that the program it runs
// resolves.
func (s *Service) RegisterAgent(ctx context.Context, a models.Agent) (models.Agent, error) {
	if _, err := resolveAgentCommand(a); err != nil {
		return models.Agent{}, err
	}
	return redactedAgent(s.store.RegisterAgent(ctx, a))
}

// ListAgents lists the agents, redacted (the store's).
func (s *Service) ListAgents(ctx context.Context) ([]models.Agent, error) {
	as, err := s.store.ListAgents(ctx)
	redactAgents(as)
	return as, err
}

// GetAgent returns one agent, redacted, its rest shown as of now (the
// store's).
func (s *Service) GetAgent(ctx context.Context, id string) (models.Agent, error) {
	return redactedAgent(s.store.GetAgent(ctx, id))
}

// redactedAgent passes on an agent's answer with the agent redacted.
func redactedAgent(a models.Agent, err error) (models.Agent, error) {
	return a.Redacted(), err
}

// redactAgents redacts agents in place.
func redactAgents(as []models.Agent) {
	for i := range as {
		as[i] = as[i].Redacted()
	}
}

// SetAgentPaused pauses or resumes an agent; a resume also ends its rest
// after a rate limit in the running scheduler (the orchestrator's; the
// store's when there is none).
func (s *Service) SetAgentPaused(ctx context.Context, id string, paused bool) (models.Agent, error) {
	if s.orch == nil {
		return redactedAgent(s.store.SetAgentPaused(ctx, id, paused))
	}
	return redactedAgent(s.orch.SetAgentPaused(ctx, id, paused))
}

// RemoveAgent deletes an agent that runs nothing (the store's); then its
// worktrees of the projects' linked repositories, unless one has changes
// (Traces: what is kept is logged, with why).
func (s *Service) RemoveAgent(ctx context.Context, id string) error {
	if err := s.store.RemoveAgent(ctx, id); err != nil {
		return err
	}
	if s.traces == nil {
		return nil
	}
	projects, err := s.store.ListProjects(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "the removed agent's checkouts were not looked for", "agent", id, "err", err)
		return nil
	}
	for _, p := range projects {
		if p.Repo == nil {
			continue
		}
		// The agent is gone whatever happens here: a checkout that stays is said.
		kept, err := s.traces.RemoveCheckout(ctx, models.Agent{ID: id}, p)
		switch {
		case err != nil:
			s.log.WarnContext(ctx, "the removed agent's checkout could not be removed", "agent", id, "project_id", p.ID, "err", err)
		case kept != "":
			s.log.WarnContext(ctx, "the removed agent's checkout was kept", "agent", id, "project_id", p.ID, "reason", kept)
		}
	}
	return nil
}
