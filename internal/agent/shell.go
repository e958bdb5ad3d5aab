package agent

import (
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file says which agents can report from a shell: the prompt offers
// `<AQ_BIN> agent …` (the daemon's binary by its absolute path, since a
// login shell may reset PATH) only to runs that can use it.

// AgentCommand is the shell command an agent reports with: the daemon's
// binary as one shell word, then "agent". Claude's allowed-tools rule and
// the prompt use the same text, so that the rule matches the commands the
// prompt shows.
func AgentCommand(executable string) string { return shellWord(executable) + " agent" }

// shellWord quotes s for a POSIX shell unless it is made of characters no
// shell treats specially.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+@%:,=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ShellFallback reports whether a claude run can run the daemon's binary:
// it can, through Bash (allowed by Invocation), except in plan mode, which
// runs no commands.
func (Claude) ShellFallback(p models.Profile) bool {
	mode, err := models.PermissionModeFor("claude", p.PermissionMode)
	return err == nil && mode != "plan"
}

// ShellFallback reports whether a codex run can run the daemon's binary:
// only without a sandbox. The read-only and workspace-write sandboxes
// refuse to connect to the daemon's Unix socket ("connect: operation not
// permitted"); such runs report through agentqueued's MCP server.
func (Codex) ShellFallback(p models.Profile) bool {
	sandbox, err := codexSandbox(p.PermissionMode)
	return err == nil && sandbox == "danger-full-access"
}

// ShellFallback reports whether a cursor run can run the daemon's binary:
// not in Cursor's read-only modes (plan, ask). In its default mode a
// command outside Cursor's allowlist is rejected: allow the binary there
// (permissions.allow in Cursor's cli-config.json) or use force.
func (Cursor) ShellFallback(p models.Profile) bool {
	mode, err := models.PermissionModeFor("cursor", p.PermissionMode)
	return err == nil && mode != "plan" && mode != "ask"
}

// ShellFallback reports false: aider answers no to every shell command it
// would run (--yes-always excepts them), so an aider agent cannot report.
func (Aider) ShellFallback(models.Profile) bool { return false }
