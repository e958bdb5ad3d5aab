package main

import (
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds ctl's printers of agents.

func printAgents(w io.Writer, as []models.Agent) {
	tw := table(w)
	row(tw, "ID", "NAME", "TYPE", "STATE", "PAUSED", "TASK", "TOKENS", "LAST_HEARTBEAT", "CLI")
	for _, a := range as {
		row(tw, a.ID, a.Name, a.AgentType, agentState(a, maxListRestReason), strconv.FormatBool(a.Paused), str(a.CurrentTaskID),
			strconv.FormatInt(a.TotalTokensUsed, 10), whenPtr(a.LastHeartbeat), cliCell(a))
	}
	tw.Flush()
}

// cliCell is the CLI version an agent's latest run reported, with a
// warning when it is older than the known-good one.
func cliCell(a models.Agent) string {
	switch {
	case a.CLIVersion == "":
		return "-"
	case a.CLIWarning != "":
		return a.CLIVersion + " (older than " + models.KnownGoodCLIVersion(a.AgentType) + ", the known-good version)"
	}
	return a.CLIVersion
}

// maxListRestReason bounds a rest's reason in an agent listing; the
// agent's own page shows it whole.
const maxListRestReason = 80

// agentState is an agent's state for a listing: its rest after a rate
// limit, with the reason cut to max characters (0: whole), while it lasts.
func agentState(a models.Agent, max int) string {
	if a.RestUntil == nil {
		return string(a.State)
	}
	return "resting until " + when(*a.RestUntil) + ": " + models.CleanLine(a.RestReason, max)
}

// printAgent prints one agent and its settings as the daemon answered
// them (env values masked by its service).
func printAgent(w io.Writer, a models.Agent) {
	tw := table(w)
	row(tw, "ID:", a.ID)
	row(tw, "Name:", a.Name)
	row(tw, "Type:", a.AgentType)
	row(tw, "State:", string(a.State))
	if a.RestUntil != nil {
		row(tw, "Resting until:", when(*a.RestUntil))
		row(tw, "Rest reason:", a.RestReason)
	}
	row(tw, "Paused:", strconv.FormatBool(a.Paused))
	row(tw, "Task:", str(a.CurrentTaskID))
	row(tw, "Command:", a.Command)
	row(tw, "Args:", strings.Join(a.Args, " "))
	var env []string
	for _, k := range slices.Sorted(maps.Keys(a.Env)) {
		env = append(env, k+"="+a.Env[k])
	}
	row(tw, "Env:", strings.Join(env, ", "))
	row(tw, "Pass env:", strings.Join(a.PassEnv, ", "))
	row(tw, "Projects:", strings.Join(a.Projects, ", "))
	row(tw, "Max runtime:", durationOrDefault(a.MaxRuntime))
	row(tw, "Idle timeout:", durationOrDefault(a.IdleTimeout))
	heartbeat := "none"
	if a.HeartbeatTimeout > 0 {
		heartbeat = a.HeartbeatTimeout.Std().String()
	}
	row(tw, "Heartbeat limit:", heartbeat)
	row(tw, "Model:", a.Profile.Model)
	row(tw, "Permission mode:", a.Profile.PermissionMode)
	var servers []string
	for _, s := range a.Profile.MCPServers {
		d := s.Name + " (" + s.Command + s.URL
		if len(s.Env) > 0 {
			d += "; env " + strings.Join(slices.Sorted(maps.Keys(s.Env)), ", ")
		}
		servers = append(servers, d+")")
	}
	row(tw, "MCP servers:", strings.Join(servers, ", "))
	row(tw, "Tokens used:", strconv.FormatInt(a.TotalTokensUsed, 10))
	row(tw, "CLI version:", cliCell(a))
	if a.CLIWarning != "" {
		row(tw, "CLI warning:", a.CLIWarning)
	}
	row(tw, "Last heartbeat:", whenPtr(a.LastHeartbeat))
	row(tw, "Created:", when(a.CreatedAt))
	tw.Flush()
}

// durationOrDefault shows an agent's limit, "daemon default" when unset.
func durationOrDefault(d models.Duration) string {
	if d == 0 {
		return "daemon default"
	}
	return d.Std().String()
}
