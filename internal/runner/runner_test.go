package runner_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/runner"
)

// A runner's configuration is checked before it connects: a server it can
// reach, a runner token, plain http only to this machine, valid agents.
func TestNewChecksTheConfiguration(t *testing.T) {
	t.Parallel()
	agents := []models.RunnerAgent{{Name: "sh", AgentType: "command"}}
	for _, tc := range []struct {
		server, token string
		agents        []models.RunnerAgent
		err           string
	}{
		{"https://198.51.100.7:7700", "aqr_x", agents, ""},
		{"http://127.0.0.1:7700", "aqr_x", agents, ""},
		{"http://127.0.0.3:7700", "aqr_x", agents, ""},
		{"http://localhost:7700", "aqr_x", agents, ""},
		{"http://[::1]:7700", "aqr_x", agents, ""},
		{"http://198.51.100.7:7700", "aqr_x", agents, "plain http is allowed only to this machine"},
		{"http://box.internal:7700", "aqr_x", agents, "plain http is allowed only to this machine"},
		{"ftp://127.0.0.1", "aqr_x", agents, "an http or https URL"},
		{"https://127.0.0.1", "t0ken", agents, "not a runner token"},
		{"https://127.0.0.1", "aqr_x", []models.RunnerAgent{{Name: "sh", AgentType: "emacs"}}, "agents[0].agent_type"},
	} {
		u, err := url.Parse(tc.server)
		if err != nil {
			t.Fatal(err)
		}
		_, err = runner.New(runner.Config{Server: u, Token: tc.token, Agents: tc.agents})
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.server, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s %s: %v, want %q", tc.server, tc.token, err, tc.err)
		}
	}
}
