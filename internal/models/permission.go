package models

import (
	"slices"
	"strings"
)

// Permission modes differ per agent CLI: a profile's permission_mode is
// one of its agent type's own values, or another CLI's name for the same
// thing, which is translated (PermissionModeFor). Agent types whose CLI has
// no permission modes (aider, command) ignore the field.

// PermissionModes are the permission modes each agent type's CLI accepts,
// as the adapter passes them: Claude Code's --permission-mode values,
// Codex's sandboxes, and Cursor's modes ("default" passes no flag).
var PermissionModes = map[string][]string{
	"claude": {"acceptEdits", "auto", "bypassPermissions", "default", "dontAsk", "plan"},
	"codex":  {"read-only", "workspace-write", "danger-full-access"},
	"cursor": {"default", "force", "plan", "ask"},
}

// permissionTranslations map another CLI's name of a mode to the agent
// type's own, where both mean the same: nothing written (plan, read-only),
// edits in the checkout (acceptEdits, workspace-write for codex), no checks
// at all (bypassPermissions, danger-full-access, force). Claude's "manual"
// is its later name of "default".
var permissionTranslations = map[string]map[string]string{
	"claude": {"read-only": "plan", "danger-full-access": "bypassPermissions", "force": "bypassPermissions",
		"manual": "default"},
	"codex": {"plan": "read-only", "acceptEdits": "workspace-write", "bypassPermissions": "danger-full-access",
		"force": "danger-full-access"},
	"cursor": {"read-only": "plan", "bypassPermissions": "force", "danger-full-access": "force"},
}

// DefaultCodexSandbox is the sandbox of a codex run whose profile sets no
// permission mode: the agent edits its checkout.
const DefaultCodexSandbox = "workspace-write"

// BypassPermissionMode reports whether mode, as PermissionModeFor returned
// it, lifts every check: Claude refuses such a mode when run as root.
func BypassPermissionMode(agentType, mode string) bool {
	switch agentType {
	case "claude":
		return mode == "bypassPermissions"
	case "codex":
		return mode == "danger-full-access"
	case "cursor":
		return mode == "force"
	}
	return false
}

// PermissionModeFor returns the permission mode an agent of agentType runs
// with for a profile's mode: the mode itself when the CLI accepts it,
// another CLI's name translated, "" for an empty mode or an agent type
// without permission modes. Any other mode is an invalid error naming
// permission_mode, the agent type and the accepted values.
func PermissionModeFor(agentType, mode string) (string, error) {
	own, uses := PermissionModes[agentType]
	if mode == "" || !uses {
		return "", nil
	}
	if slices.Contains(own, mode) {
		return mode, nil
	}
	if to, ok := permissionTranslations[agentType][mode]; ok {
		return to, nil
	}
	return "", Errorf(CodeInvalid, "permission_mode: %s is not a permission mode of %s agents (accepted: %s)",
		Quote(mode), agentType, AcceptedPermissionModes(agentType))
}

// AcceptedPermissionModes describes the modes an agent type accepts: its
// own, then the translated names with what they become.
func AcceptedPermissionModes(agentType string) string {
	parts := slices.Clone(PermissionModes[agentType])
	tr := permissionTranslations[agentType]
	names := make([]string, 0, len(tr))
	for from := range tr {
		names = append(names, from)
	}
	slices.Sort(names)
	for _, from := range names {
		parts = append(parts, from+" (as "+tr[from]+")")
	}
	return strings.Join(parts, ", ")
}
