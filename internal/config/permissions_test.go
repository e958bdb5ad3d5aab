package config_test

import (
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/config"
)

// TestPermissionModesAtLoad checks permission modes per agent type at
// load: an agent's own profile and every named profile against each
// configured agent type, with errors naming the key, the agent and the
// accepted values, and other CLIs' names accepted where they translate.
func TestPermissionModesAtLoad(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		doc  string
		want []string // parts of the error; none: loads
	}{
		{"claude's own modes", `
agents:
  - {name: c1, type: claude, profile: {permission_mode: dontAsk}}
profiles:
  careful: {permission_mode: acceptEdits}
`, nil},
		{"a codex sandbox on a claude agent", `
agents:
  - {name: c1, type: claude, profile: {permission_mode: workspace-write}}
`, []string{"agents[0] (c1): profile.permission_mode", `"workspace-write" is not a permission mode of claude agents`,
			"accepted: acceptEdits, auto, bypassPermissions, default, dontAsk, plan", "read-only (as plan)"}},
		{"manual on claude is default", `
agents:
  - {name: c1, type: claude, profile: {permission_mode: manual}}
`, nil},
		{"a named profile a codex agent cannot run", `
agents:
  - {name: c1, type: claude}
  - {name: x1, type: codex}
profiles:
  careful: {permission_mode: dontAsk}
`, []string{"profiles.careful.permission_mode", `"dontAsk" is not a permission mode of codex agents`, "agents[1] (x1)",
			"accepted: read-only, workspace-write, danger-full-access", "acceptEdits (as workspace-write)"}},
		{"a profile shared by claude and codex in claude's names", `
agents:
  - {name: c1, type: claude}
  - {name: x1, type: codex}
  - {name: r1, type: cursor}
profiles:
  careful: {permission_mode: plan}
  edits: {permission_mode: acceptEdits}
`, []string{"profiles.edits.permission_mode", "cursor agents", "agents[2] (r1)"}},
		{"aider and command ignore the mode", `
agents:
  - {name: a1, type: aider, profile: {permission_mode: anything}}
  - {name: w1, type: command, command: /bin/true, profile: {permission_mode: anything}}
profiles:
  odd: {permission_mode: whatever}
`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Parse([]byte(c.doc), func(string) (string, bool) { return "", false })
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Parse accepted it")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestClaudeBypassAsRoot checks that a claude agent that would skip every
// permission check is refused when the daemon runs as root, where Claude
// Code exits at once, and allowed otherwise.
func TestClaudeBypassAsRoot(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		doc  string
		euid int
		want string // the key named; "" when allowed
	}{
		{"own profile as root", "agents:\n  - {name: c1, type: claude, profile: {permission_mode: bypassPermissions}}\n", 0,
			"agents[0].profile.permission_mode"},
		{"translated name as root", "agents:\n  - {name: c1, type: claude, profile: {permission_mode: danger-full-access}}\n", 0,
			"agents[0].profile.permission_mode"},
		{"named profile as root", "agents:\n  - {name: c1, type: claude}\nprofiles:\n  free: {permission_mode: bypassPermissions}\n", 0,
			"profiles.free.permission_mode"},
		{"own profile as a user", "agents:\n  - {name: c1, type: claude, profile: {permission_mode: bypassPermissions}}\n", 1000, ""},
		{"codex without a sandbox as root", "agents:\n  - {name: x1, type: codex, profile: {permission_mode: danger-full-access}}\n", 0, ""},
		{"claude with edits as root", "agents:\n  - {name: c1, type: claude, profile: {permission_mode: acceptEdits}}\n", 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.Parse([]byte(c.doc), func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.CheckPrivileges(c.euid)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("CheckPrivileges: %v", err)
			case c.want != "" && err == nil:
				t.Error("CheckPrivileges allowed it")
			case c.want != "" && (!strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "c1") ||
				!strings.Contains(err.Error(), "root")):
				t.Errorf("error %q does not name %s, the agent and root", err, c.want)
			}
		})
	}
}
