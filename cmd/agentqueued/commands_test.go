package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func TestCtlTaskEditDepsAndDelete(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir())
	addr := d.m.Addr()
	// A repository: the edit below makes a task require approval.
	mustCtl(t, addr, "project", "create", "web", "--repo-url", bareRepo(t))
	a := taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "web", "--title", "A"))[0]
	b := taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "web", "--title", "B", "--depends-on", a))[0]
	// Completing a makes no progress here: no agent works on this project.
	out := mustCtl(t, addr, "task", "edit", b, "--title", "B, edited", "--priority", "3", "--test-command", "make test",
		"--criterion", "it works", "--verification", "qa_agent", "--requires-approval")
	for _, re := range []string{`(?m)^Title:\s+B, edited$`, `(?m)^Priority:\s+3$`, `(?m)^Test commands:\s+make test$`,
		`(?m)^Criteria:\s+it works$`, `(?m)^Verification:\s+QA_AGENT$`, `(?m)^Requires approval:\s+true$`, `(?m)^Status:\s+DEFINED$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("task edit output lacks %s:\n%s", re, out)
		}
	}
	out = mustCtl(t, addr, "task", "edit", b, "--clear-test-commands", "--requires-approval=false")
	if !regexp.MustCompile(`(?m)^Test commands:\s+-$`).MatchString(out) || !regexp.MustCompile(`(?m)^Requires approval:\s+false$`).MatchString(out) {
		t.Errorf("clearing:\n%s", out)
	}
	// The fields a task is created with that route it.
	out = mustCtl(t, addr, "task", "edit", b, "--agent-type", "codex", "--timeout", "90s", "--expected-count", "4",
		"--kind", "ingest", "--meta", "source=web", "--meta", "lang=go")
	for _, re := range []string{`(?m)^Agent type:\s+codex$`, `(?m)^Timeout:\s+1m30s$`, `(?m)^Items:\s+0 succeeded, 0 failed of 4 expected$`,
		`(?m)^Kind:\s+ingest$`, `(?m)^Metadata:\s+lang=go, source=web$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("task edit of the routing fields lacks %s:\n%s", re, out)
		}
	}
	var edited models.Task
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "task", "edit", b, "--agent-type", "", "--timeout", "0",
		"--expected-count", "0", "--kind", "", "--clear-meta")), &edited); err != nil || edited.AgentType != "" || edited.Timeout != 0 ||
		edited.ExpectedCount != 0 || edited.Kind != "" || len(edited.Metadata) != 0 {
		t.Errorf("clearing the routing fields: %+v %v", edited, err)
	}

	out = mustCtl(t, addr, "task", "deps", b, "--remove", a)
	if !strings.HasPrefix(out, b+": READY\n") || !strings.Contains(out, "removed: "+a) || !strings.Contains(out, "promoted to READY: "+b) ||
		!strings.Contains(out, "Depends on (0):") {
		t.Errorf("task deps --remove:\n%s", out)
	}
	c := taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "web", "--title", "C", "--depends-on", b))[0]
	out = mustCtl(t, addr, "task", "deps", c, "--add", a+":soft")
	if !regexp.MustCompile(`(?m)^\s+`+a+`\s+false\s+PENDING`).MatchString(out) || !strings.HasPrefix(out, c+": DEFINED\n") {
		t.Errorf("task deps --add ID:soft:\n%s", out)
	}
	var dr models.DependencyResult
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "task", "deps", c, "--remove", a)), &dr); err != nil ||
		len(dr.Dependencies) != 1 || dr.Dependencies[0].Upstream != b {
		t.Errorf("task deps --json: %+v %v", dr, err)
	}

	out = mustCtl(t, addr, "task", "delete", c)
	if out != "task "+c+" deleted\n" {
		t.Errorf("task delete output %q", out)
	}
	if out := mustCtl(t, addr, "--json", "task", "delete", b); !strings.Contains(out, `"deleted": "`+b+`"`) {
		t.Errorf("task delete --json output %q", out)
	}
	mustCtl(t, addr, "agent", "add", "a1", "--type", "command", "--command", "/bin/true", "--project", "elsewhere")
	if out := mustCtl(t, addr, "agent", "remove", "a1"); !strings.HasPrefix(out, "agent a1 removed") {
		t.Errorf("agent remove output %q", out)
	}
	if out := mustCtl(t, addr, "agent", "list"); strings.Contains(out, "a1") {
		t.Errorf("agent list after removal:\n%s", out)
	}

	d2 := taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "web", "--title", "D", "--depends-on", a))[0]
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"edit nothing", []string{"task", "edit", a}, 2, "nothing to change"},
		{"edit two ways", []string{"task", "edit", a, "--criterion", "x", "--clear-criteria"}, 2, "cannot be combined"},
		{"edit an unknown profile", []string{"task", "edit", a, "--profile", "ghost"}, 1, `no profile "ghost" is configured`},
		{"edit a missing task", []string{"task", "edit", "no-such-task", "--title", "x"}, 1, `task "no-such-task" not found`},
		{"edit metadata two ways", []string{"task", "edit", a, "--meta", "k=v", "--clear-meta"}, 2, "cannot be combined"},
		{"edit to an unknown agent type", []string{"task", "edit", a, "--agent-type", "gpt"}, 1, `agent_type: "gpt" is not an agent type`},
		{"edit to a timeout too long", []string{"task", "edit", a, "--timeout", "200h"}, 1, "timeout: must be 0 (none) or between"},
		{"deps nothing", []string{"task", "deps", a}, 2, "nothing to change"},
		{"deps bad suffix", []string{"task", "deps", a, "--add", d2 + ":hard"}, 2, "the only suffix is :soft"},
		{"deps that close a cycle", []string{"task", "deps", a, "--add", d2}, 1, "dependency cycle"},
		{"deps on itself", []string{"task", "deps", d2, "--add", d2}, 1, "cannot depend on itself"},
		{"delete with dependents", []string{"task", "delete", a}, 1, "has dependents (" + d2 + ")"},
		{"delete a deleted task", []string{"task", "delete", c}, 1, "not found"},
		{"remove a missing agent", []string{"agent", "remove", "a1"}, 1, `agent "a1" not found`},
		{"remove without id", []string{"agent", "remove"}, 2, "want ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runCtl(t, addr, nil, tt.args...)
			if r.code != tt.code || !strings.HasPrefix(r.stderr, "error: ") || !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("ctl %v: exit %d, stderr %q; want exit %d and %q", tt.args, r.code, r.stderr, tt.code, tt.stderr)
			}
		})
	}
}

func TestCtlBudget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "aq.yaml", "orchestrator:\n  window: 2h\n  global_token_budget: \"1000\"\n")
	data := filepath.Join(dir, "data")
	d := startDaemon(t, data, "--config", cfg)
	addr := d.m.Addr()
	mustCtl(t, addr, "project", "create", "web", "--budget", "100")
	mustCtl(t, addr, "project", "create", "api")
	// Usage arrives from runs; here it is booked beside the daemon.
	st := storetest.OpenAt(t, filepath.Join(data, "agentqueued.db"))
	for _, u := range []models.TokenUsage{{ProjectID: "web", Input: 120}, {ProjectID: "api", Output: 30},
		{ProjectID: "api", Output: 500, CreatedAt: time.Now().Add(-3 * time.Hour)}} {
		if err := st.RecordTokenUsage(context.Background(), u); err != nil {
			t.Fatal(err)
		}
	}
	out := mustCtl(t, addr, "budget")
	for _, re := range []string{`(?m)^Window: 2h0m0s \(since \S+\)$`, `(?m)^All projects: 150 tokens in the window, global budget 1000$`,
		`(?m)^PROJECT\s+STATUS\s+WINDOW_TOKENS\s+TOTAL_TOKENS\s+BUDGET\s+EXHAUSTED$`, `(?m)^api\s+ACTIVE\s+30\s+530\s+-\s+false$`,
		`(?m)^web\s+ACTIVE\s+120\s+120\s+100\s+true$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("budget output lacks %s:\n%s", re, out)
		}
	}
	var b models.BudgetReport
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "budget", "--json")), &b); err != nil || b.Global.Budget == nil ||
		*b.Global.Budget != 1000 || b.Window.Std() != 2*time.Hour || len(b.Projects) != 2 {
		t.Fatalf("budget --json: %+v %v", b, err)
	}
	if r := runCtl(t, addr, nil, "budget", "extra"); r.code != 2 || !strings.Contains(r.stderr, "want no arguments") {
		t.Errorf("budget with an argument: %+v", r)
	}
}
