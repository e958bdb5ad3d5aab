package agent

import "github.com/agentqueued/agentqueued/internal/models"

// This file says which agents get the run's MCP servers: only their
// prompts name the servers and offer agentqueued's MCP tools.

// MCPClient is implemented by adapters that give their CLI the run's MCP
// servers (RunContext.MCPServers). Other adapters ignore them.
type MCPClient interface {
	// PassesMCPServers reports whether a run with profile p is given the
	// run's MCP servers.
	PassesMCPServers(p models.Profile) bool
}

// PassesMCPServers reports whether a run of adapter a with profile p is
// given the run's MCP servers, agentqueued's own among them: the prompt
// names the servers and offers their tools only then. An adapter that is
// no MCPClient passes none (cursor, aider, command).
func PassesMCPServers(a Adapter, p models.Profile) bool {
	if c, ok := a.(MCPClient); ok {
		return c.PassesMCPServers(p)
	}
	return false
}

// PassesMCPServers reports true: the servers reach Claude as mcp.json in
// the run's state directory (--mcp-config), in every permission mode.
func (Claude) PassesMCPServers(models.Profile) bool { return true }

// PassesMCPServers reports true: the servers reach Codex as -c overrides,
// under every sandbox.
func (Codex) PassesMCPServers(models.Profile) bool { return true }
