package config

import (
	"fmt"
	"slices"

	"github.com/agentqueued/agentqueued/internal/models"
)

// claudeRootRefusal is what Claude Code prints when it is asked to skip
// its permission checks as root; it then exits 1.
const claudeRootRefusal = "--dangerously-skip-permissions cannot be used with root/sudo privileges"

// checkProfileModes checks each named profile's permission mode against
// every agent type of the configured agents: a task or project may give
// any of them the profile. A mode an agent type neither accepts nor
// translates is an error naming the key, the agent and the accepted
// values. (An agent's own profile is checked with the agent.)
func (c Config) checkProfileModes() error {
	names := make([]string, 0, len(c.Profiles))
	for name := range c.Profiles {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		mode := c.Profiles[name].PermissionMode
		if mode == "" {
			continue
		}
		for i, a := range c.Agents {
			if _, err := models.PermissionModeFor(a.AgentType, mode); err != nil {
				return fmt.Errorf("config: profiles.%s.permission_mode: %q is not a permission mode of %s agents, and agents[%d] (%s) is one "+
					"(accepted: %s)", name, mode, a.AgentType, i, a.ID, models.AcceptedPermissionModes(a.AgentType))
			}
		}
	}
	return nil
}

// CheckPrivileges refuses what cannot run under the daemon's effective
// user id euid: Claude Code exits 1 when told to skip every permission
// check (bypassPermissions, or a translated name of it) as root, so a
// claude agent whose own profile, or a named profile it may be given, asks
// for that is an error naming the key and the agent. Call it at start-up
// with os.Geteuid().
func (c Config) CheckPrivileges(euid int) error {
	if euid != 0 {
		return nil
	}
	bypass := func(mode string) bool {
		m, err := models.PermissionModeFor("claude", mode)
		return err == nil && models.BypassPermissionMode("claude", m)
	}
	names := make([]string, 0, len(c.Profiles))
	for name := range c.Profiles {
		names = append(names, name)
	}
	slices.Sort(names)
	for i, a := range c.Agents {
		if a.AgentType != "claude" {
			continue
		}
		key := fmt.Sprintf("agents[%d].profile.permission_mode", i)
		mode := a.Profile.PermissionMode
		if !bypass(mode) {
			key, mode = "", ""
			for _, name := range names {
				if m := c.Profiles[name].PermissionMode; bypass(m) {
					key, mode = "profiles."+name+".permission_mode", m
					break
				}
			}
		}
		if key != "" {
			return fmt.Errorf("config: %s: %q skips every permission check of the claude agent %s, and the daemon runs as root, "+
				"where Claude Code refuses it (%q): run the daemon as an unprivileged user, or choose another mode "+
				"(acceptEdits with allowed_tools)", key, mode, a.ID, claudeRootRefusal)
		}
	}
	return nil
}
