package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/config"
)

func TestAgentsRulesAndOrchestrator(t *testing.T) {
	t.Parallel()
	doc := `
agents:
  - name: worker-1
    type: command
    command: ./agent.sh
    args: ["--fast"]
    env: {MODEL: "${MODEL:-small}"}
    max_runtime: 1h
    idle_timeout: 5m
    heartbeat_timeout: 60s
    projects: [web]
orchestrator:
  safety_tick: 5s
  retry_backoff: 1m
  prepare_timeout: 20m
  global_token_budget: "1000000"
rules:
  - type: Concurency
    matcher: {kind: ingest, status: Running, fields: [source]}
    max_concurency: 2
`
	cfg, err := config.Parse([]byte(doc), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Agents[0]
	if a.ID != "worker-1" || a.Command != "./agent.sh" || a.Env["MODEL"] != "small" || a.MaxRuntime.Std() != time.Hour ||
		a.IdleTimeout.Std() != 5*time.Minute || a.HeartbeatTimeout.Std() != time.Minute || a.Projects[0] != "web" || a.Args[0] != "--fast" {
		t.Fatalf("agent %+v", a)
	}
	if cfg.Orchestrator.SafetyTick != 5*time.Second || cfg.Orchestrator.RetryBackoff != time.Minute ||
		cfg.Orchestrator.PrepareTimeout != 20*time.Minute || *cfg.Orchestrator.GlobalTokenBudget != 1_000_000 {
		t.Fatalf("orchestrator %+v", cfg.Orchestrator)
	}
	if len(cfg.Rules) != 1 || cfg.Rules[0].MaxConcurrency != 2 {
		t.Fatalf("rules %+v", cfg.Rules)
	}
}

func TestAgentAndRuleErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	tests := []struct{ doc, want string }{
		{"agents:\n  - name: a\n    type: command\n", "agents[0] (a): command: required"},
		{"agents:\n  - name: a\n    type: robot\n    command: x\n", "agents[0] (a): agent_type"},
		{"agents:\n  - type: command\n    command: x\n", "agents[0].name: required"},
		{"agents:\n  - {name: a, type: command, command: x}\n  - {name: a, type: command, command: y}\n", "agents[1].name: \"a\" is listed twice"},
		{"agents:\n  - {name: a, type: command, command: x, idle_timeout: soon}\n", "agents[0].idle_timeout"},
		{"agents:\n  - {name: a, type: command, command: x, heartbeat_timeout: 0s}\n", "agents[0].heartbeat_timeout"},
		{"orchestrator:\n  window: forever\n", "orchestrator.window"},
		{"orchestrator:\n  prepare_timeout: 0s\n", "orchestrator.prepare_timeout"},
		{"orchestrator:\n  prepare_timeout: -1m\n", "orchestrator.prepare_timeout"},
		{"orchestrator:\n  global_token_budget: lots\n", "orchestrator.global_token_budget"},
		{"rules:\n  - {type: Concurrency, matcher: {kind: k}}\n", "rules[0]"},
		{"rules:\n  - {type: Magic, matcher: {kind: k}, max_concurrency: 1}\n", "rules[0]"},
		{"rules:\n  - {id: r, type: Capacity, matcher: {kind: k}, max_capacity: 1}\n  - {id: r, type: Capacity, matcher: {kind: j}, max_capacity: 1}\n",
			"rules[1] (r): id \"r\" is already used by rules[0]"},
		{"agents:\n  - {name: a, type: command, command: x, colour: red}\n", "colour"},
	}
	for _, tc := range tests {
		_, err := config.Parse([]byte(tc.doc), func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one naming %q", tc.doc, err, tc.want)
		}
	}
}
