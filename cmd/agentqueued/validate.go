package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// agentExecutables are the executables agent types run when an agent
// names no command of its own.
var agentExecutables = map[string]string{
	"claude": "claude",
	"codex":  "codex",
	"cursor": "cursor-agent",
	"aider":  "aider",
}

// agentExecutable is the program an agent runs: its command, else its
// type's executable.
func agentExecutable(a models.Agent) string {
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
	name := agentExecutable(a)
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

// sourceChecker checks a project's repository before it is stored
// (repo.Workspaces.CheckSource).
type sourceChecker interface {
	CheckSource(ctx context.Context, r models.RepoConfig, timeout time.Duration) error
}

// checkRepo checks a project's repository with c's checker, when it has one.
func (c commands) checkRepo(ctx context.Context, r *models.RepoConfig) error {
	if r == nil || c.repos == nil {
		return nil
	}
	return c.repos.CheckSource(ctx, *r, c.remoteTimeout)
}

// RegisterAgent registers an agent after checking that the program it runs
// resolves.
func (c commands) RegisterAgent(ctx context.Context, a models.Agent) (models.Agent, error) {
	if _, err := resolveAgentCommand(a); err != nil {
		return models.Agent{}, err
	}
	return c.Store.RegisterAgent(ctx, a)
}
