package models_test

import (
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestPermissionModeFor(t *testing.T) {
	t.Parallel()
	cases := []struct {
		typ, mode, want string
		wrong           bool
	}{
		{"claude", "", "", false},
		{"claude", "plan", "plan", false},
		{"claude", "manual", "default", false},
		{"claude", "read-only", "plan", false},
		{"claude", "danger-full-access", "bypassPermissions", false},
		{"claude", "workspace-write", "", true},
		{"claude", "Plan", "", true},
		{"codex", "acceptEdits", "workspace-write", false},
		{"codex", "plan", "read-only", false},
		{"codex", "default", "", true},
		{"cursor", "default", "default", false},
		{"cursor", "bypassPermissions", "force", false},
		{"cursor", "dontAsk", "", true},
		{"aider", "anything", "", false},
		{"command", "anything", "", false},
	}
	for _, c := range cases {
		got, err := models.PermissionModeFor(c.typ, c.mode)
		if c.wrong {
			if err == nil || models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), "permission_mode") ||
				!strings.Contains(err.Error(), c.typ+" agents") || !strings.Contains(err.Error(), models.PermissionModes[c.typ][0]) {
				t.Errorf("%s %q: error %v, want an invalid error naming the key, the type and the accepted modes", c.typ, c.mode, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s %q = %q, %v; want %q", c.typ, c.mode, got, err, c.want)
		}
	}
}

// TestAgentRegistrationChecksItsPermissionMode checks that an agent
// registered with a permission mode its CLI does not accept is refused.
func TestAgentRegistrationChecksItsPermissionMode(t *testing.T) {
	t.Parallel()
	a := models.Agent{ID: "c1", AgentType: "claude", AgentSettings: models.AgentSettings{
		Profile: models.Profile{PermissionMode: "workspace-write"}}}
	a.ApplyDefaults()
	if err := a.Validate(); err == nil || !strings.Contains(err.Error(), "profile.permission_mode") {
		t.Fatalf("Validate = %v, want a profile.permission_mode error", err)
	}
	a.Profile.PermissionMode = "acceptEdits"
	if err := a.Validate(); err != nil {
		t.Fatalf("Validate = %v", err)
	}
}
