package models

import (
	"strings"
)

// Profile is how an agent CLI is run: model, permission mode, allowed tools,
// MCP servers and a suffix for the system prompt. Named profiles come from
// config and are chosen per task, else per project default, else the agent's
// own settings apply. Empty fields leave the agent's own values in place.
type Profile struct {
	Model              string      `json:"model,omitempty" yaml:"model"`
	PermissionMode     string      `json:"permission_mode,omitempty" yaml:"permission_mode"`
	AllowedTools       []string    `json:"allowed_tools,omitempty" yaml:"allowed_tools"`
	MCPServers         []MCPServer `json:"mcp_servers,omitempty" yaml:"mcp_servers"`
	SystemPromptSuffix string      `json:"system_prompt_suffix,omitempty" yaml:"system_prompt_suffix"`
}

// MCPServer is an MCP server handed to an agent CLI: a stdio command or an
// HTTP URL.
type MCPServer struct {
	Name    string            `json:"name" yaml:"name"`
	Command string            `json:"command,omitempty" yaml:"command"`
	Args    []string          `json:"args,omitempty" yaml:"args"`
	Env     map[string]string `json:"env,omitempty" yaml:"env"`
	URL     string            `json:"url,omitempty" yaml:"url"`
}

// Merge returns p with every non-empty field of over replacing its own.
func (p Profile) Merge(over Profile) Profile {
	if over.Model != "" {
		p.Model = over.Model
	}
	if over.PermissionMode != "" {
		p.PermissionMode = over.PermissionMode
	}
	if over.AllowedTools != nil {
		p.AllowedTools = over.AllowedTools
	}
	if over.MCPServers != nil {
		p.MCPServers = over.MCPServers
	}
	if over.SystemPromptSuffix != "" {
		p.SystemPromptSuffix = over.SystemPromptSuffix
	}
	return p
}

// Validate checks a profile, naming the bad field.
func (p *Profile) Validate() error {
	switch {
	case len(p.Model) > 200 || strings.ContainsAny(p.Model, "\x00\n"):
		return Errorf(CodeInvalid, "model: at most 200 characters on one line")
	case len(p.PermissionMode) > 100 || strings.ContainsAny(p.PermissionMode, "\x00\n "):
		return Errorf(CodeInvalid, "permission_mode: one word of at most 100 characters")
	case len(p.AllowedTools) > MaxListEntries:
		return Errorf(CodeInvalid, "allowed_tools: at most %d entries", MaxListEntries)
	case len(p.MCPServers) > 50:
		return Errorf(CodeInvalid, "mcp_servers: at most 50 entries")
	case len(p.SystemPromptSuffix) > MaxDescriptionLen:
		return Errorf(CodeInvalid, "system_prompt_suffix: at most %d bytes", MaxDescriptionLen)
	}
	for i, t := range p.AllowedTools {
		if strings.TrimSpace(t) == "" || strings.ContainsAny(t, "\x00\n") {
			return Errorf(CodeInvalid, "allowed_tools[%d]: must be a non-empty single line", i)
		}
	}
	seen := map[string]bool{}
	for i, s := range p.MCPServers {
		switch {
		case !ValidID(strings.ToLower(s.Name)):
			return Errorf(CodeInvalid, "mcp_servers[%d].name: use 1-64 letters, digits, '-' or '_'", i)
		case seen[s.Name]:
			return Errorf(CodeInvalid, "mcp_servers[%d].name: %q appears twice", i, s.Name)
		case (s.Command == "") == (s.URL == ""):
			return Errorf(CodeInvalid, "mcp_servers[%d]: give exactly one of command and url", i)
		case s.URL != "" && !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://"):
			return Errorf(CodeInvalid, "mcp_servers[%d].url: must be http:// or https://", i)
		}
		seen[s.Name] = true
		for k := range s.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return Errorf(CodeInvalid, "mcp_servers[%d].env: %q is not a variable name", i, k)
			}
		}
	}
	return nil
}
