package models

import (
	"fmt"
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
	if err := CheckLine("model", p.Model, MaxShortLen); err != nil {
		return err
	}
	if err := CheckLine("permission_mode", p.PermissionMode, MaxPermissionModeLen); err != nil {
		return err
	}
	if strings.Contains(p.PermissionMode, " ") {
		return Errorf(CodeInvalid, "permission_mode: one word of at most %d characters", MaxPermissionModeLen)
	}
	if err := checkList("allowed_tools", p.AllowedTools, MaxListEntries, func(name, t string) error {
		if strings.TrimSpace(t) == "" {
			return Errorf(CodeInvalid, "%s: must be a non-empty single line", name)
		}
		return CheckLine(name, t, MaxCommandLen)
	}); err != nil {
		return err
	}
	if len(p.MCPServers) > MaxMCPServers {
		return Errorf(CodeInvalid, "mcp_servers: at most %d entries", MaxMCPServers)
	}
	if err := CheckText("system_prompt_suffix", p.SystemPromptSuffix, MaxDescriptionLen); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, s := range p.MCPServers {
		at := fmt.Sprintf("mcp_servers[%d]", i)
		switch {
		case !ValidID(strings.ToLower(s.Name)):
			return Errorf(CodeInvalid, "%s.name: use 1-64 letters, digits, '-' or '_'", at)
		case seen[s.Name]:
			return Errorf(CodeInvalid, "%s.name: %s appears twice", at, Quote(s.Name))
		case (s.Command == "") == (s.URL == ""):
			return Errorf(CodeInvalid, "%s: give exactly one of command and url", at)
		}
		if err := CheckLine(at+".command", s.Command, MaxPathLen); err != nil {
			return err
		}
		if err := CheckLine(at+".url", s.URL, MaxURLLen); err != nil {
			return err
		}
		if s.URL != "" && !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
			return Errorf(CodeInvalid, "%s.url: must be http:// or https://", at)
		}
		if urlHasCredentials(s.URL) {
			// Codex gets the URL on its command line, which every local user can read.
			return Errorf(CodeInvalid, "%s.url: credentials in the URL are refused (%s): they would show in "+
				"answers, logs and an agent's command line", at, RedactURL(s.URL))
		}
		if err := checkArgs(at+".args", s.Args); err != nil {
			return err
		}
		if err := checkEnv(at+".env", s.Env); err != nil {
			return err
		}
		if err := checkNotMask(at+".env", s.Env); err != nil {
			return err
		}
		seen[s.Name] = true
	}
	return nil
}

// Limits of profiles.
const (
	MaxPermissionModeLen = 100
	MaxMCPServers        = 50
)

// Redacted returns the profile as it may be shown in answers, messages and
// logs: its MCP servers' env values masked (RedactedValue, the names kept)
// and their URLs without credentials.
func (p Profile) Redacted() Profile {
	if p.MCPServers == nil {
		return p
	}
	servers := make([]MCPServer, len(p.MCPServers))
	for i, s := range p.MCPServers {
		s.Env = redactEnv(s.Env)
		s.URL = RedactURL(s.URL)
		servers[i] = s
	}
	p.MCPServers = servers
	return p
}
