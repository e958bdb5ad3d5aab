package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds ctl's agent commands: add, list, show, pause, resume
// and remove.

// agentPauseCommand pauses (no new task) or resumes an agent.
func agentPauseCommand(paused bool) func(*ctl, context.Context, []string) error {
	return func(c *ctl, ctx context.Context, args []string) error {
		name := "agent resume"
		if paused {
			name = "agent pause"
		}
		pos, err := c.parse(c.flagSet(name), args, "ID")
		if err != nil {
			return err
		}
		a, err := c.client.SetAgentPaused(ctx, pos[0], paused)
		if err != nil {
			return err
		}
		return c.emit(a, func(w io.Writer) { printAgents(w, []models.Agent{a}) })
	}
}

func (c *ctl) agentAdd(ctx context.Context, args []string) error {
	fs := c.flagSet("agent add")
	typ := fs.String("type", "", "agent `type`: "+strings.Join(models.AgentTypes, ", "))
	name := fs.String("name", "", "display `name` (default the id)")
	command := fs.String("command", "", "the `executable` to run (required for type command)")
	var projects listFlag
	var argv repeatFlag
	fs.Var(&argv, "arg", "an `argument` of the command (repeatable)")
	fs.Var(&projects, "project", "`ids` of the only projects it works on (comma-separated, repeatable)")
	env := mapFlag{}
	fs.Var(env, "env", "an environment variable `NAME=value` for its runs (repeatable; the value is on this "+
		"command line, where other users can read it: pass keys with --pass-env)")
	var passEnv listFlag
	fs.Var(&passEnv, "pass-env", "`names` of the daemon's environment variables its runs get, such as a "+
		"provider's API key (comma-separated, repeatable)")
	maxRuntime := fs.Duration("max-runtime", 0, "wall-clock cap of one run (`duration`; 0: the daemon's default)")
	idle := fs.Duration("idle-timeout", 0, "end a run quiet for this long (`duration`; 0: the daemon's default)")
	heartbeat := fs.Duration("heartbeat-timeout", 0, "end a run whose agent made no report over the agent RPC for this long "+
		"(`duration`; 0: no heartbeat required)")
	pos, err := c.parse(fs, args, "ID")
	if err != nil {
		return err
	}
	reg := models.AgentRegistration{ID: pos[0], Name: *name, AgentType: *typ, AgentSettings: models.AgentSettings{
		Command: *command, Args: argv, Projects: projects, PassEnv: passEnv, MaxRuntime: models.Duration(*maxRuntime),
		IdleTimeout: models.Duration(*idle), HeartbeatTimeout: models.Duration(*heartbeat)}}
	if len(env) > 0 {
		reg.Env = env
	}
	a, err := c.client.RegisterAgent(ctx, reg.Agent())
	if err != nil {
		return err
	}
	return c.emit(a, func(w io.Writer) { printAgents(w, []models.Agent{a}) })
}

func (c *ctl) agentList(ctx context.Context, args []string) error {
	if _, err := c.parse(c.flagSet("agent list"), args); err != nil {
		return err
	}
	as, err := c.client.ListAgents(ctx)
	if err != nil {
		return err
	}
	return c.emit(api.AgentList{Agents: as}, func(w io.Writer) { printAgents(w, as) })
}

// agentShow prints one agent with its settings: env names with masked
// values, the names pass_env gives, the profile.
func (c *ctl) agentShow(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("agent show"), args, "ID")
	if err != nil {
		return err
	}
	a, err := c.client.GetAgent(ctx, pos[0])
	if err != nil {
		return err
	}
	return c.emit(a, func(w io.Writer) { printAgent(w, a) })
}

func (c *ctl) agentRemove(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("agent remove"), args, "ID")
	if err != nil {
		return err
	}
	if err := c.client.RemoveAgent(ctx, pos[0]); err != nil {
		return err
	}
	return c.emit(map[string]string{"removed": pos[0]}, func(w io.Writer) {
		fmt.Fprintf(w, "agent %s removed (an agent of the configuration file is registered again when the daemon starts)\n", clean(pos[0]))
	})
}
