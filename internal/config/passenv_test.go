package config_test

import (
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/config"
)

func TestAgentPassEnv(t *testing.T) {
	t.Parallel()
	vars := env(map[string]string{"GITHUB_TOKEN": "ghp-s3cret", "ANTHROPIC_API_KEY": "sk-s3cret",
		"ONCALL_URL": "https://hooks.example.com/s3cret"})
	cfg, err := config.Parse([]byte(`
github:
  token: ${GITHUB_TOKEN}
agents:
  - name: claude-1
    type: claude
    pass_env: [ANTHROPIC_API_KEY, OPENAI_API_KEY]
`), vars)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Agents[0].PassEnv, ","); got != "ANTHROPIC_API_KEY,OPENAI_API_KEY" {
		t.Errorf("pass_env = %q", got)
	}
	if cfg.Agents[0].Env != nil {
		t.Errorf("pass_env wrote values into env: %v", cfg.Agents[0].Env)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"daemon variable", "agents:\n  - name: a\n    type: claude\n    pass_env: [AQ_RUN_TOKEN]\n",
			"config: agents[0] (a): pass_env[0]: AQ_RUN_TOKEN cannot be passed: the daemon sets the AQ_ variables"},
		{"not a name", "agents:\n  - name: a\n    type: claude\n    pass_env: [\"A-B\"]\n",
			`config: agents[0] (a): pass_env[0]: "A-B" is not an environment variable name`},
		{"also in env", "agents:\n  - name: a\n    type: claude\n    env: {K: v}\n    pass_env: [K]\n",
			"config: agents[0] (a): pass_env[0]: K is also set in env"},
		{"the daemon's secret passed", "github:\n  token: ${GITHUB_TOKEN}\nagents:\n  - name: a\n    type: claude\n    pass_env: [GITHUB_TOKEN]\n",
			"config: agents[0].pass_env[0]: GITHUB_TOKEN holds github.token, a secret of the daemon"},
		{"the daemon's secret in env", "api:\n  token: ${GITHUB_TOKEN:-}\nagents:\n  - name: a\n    type: claude\n    env: {GH: \"x${GITHUB_TOKEN}\"}\n",
			"config: agents[0].env.GH: ${GITHUB_TOKEN} holds api.token, a secret of the daemon"},
		{"a desk webhook passed", "desk:\n  webhooks:\n    oncall: ${ONCALL_URL}\nagents:\n  - name: a\n    type: claude\n    pass_env: [ONCALL_URL]\n",
			"config: agents[0].pass_env[0]: ONCALL_URL holds desk.webhooks.oncall, a secret of the daemon"},
		{"a desk webhook over http", "desk:\n  webhooks:\n    oncall: http://hooks.example.com/x\n",
			"desk.webhooks.oncall: must be https"},
		{"the mask as a value", "agents:\n  - name: a\n    type: claude\n    env: {K: \"********\"}\n",
			`config: agents[0] (a): env.K: "********" is the mask answers show`},
	} {
		_, err := config.Parse([]byte(tc.doc), vars)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows a secret: %v", tc.name, err)
		}
	}
}
