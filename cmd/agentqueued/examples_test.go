package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Every example workflow and hook under configs/ goes into a daemon as
// shipped, the way the docs say: `ctl workflow add` and `ctl hook create`
// with --project, through the daemon's own parsing and checks (profiles,
// the project's hook commands, the LLM, the hosts). None names a project
// of its own, so without --project a hook is refused naming the flag.
func TestShippedExamplesLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.yaml", `
llm: {base_url: "http://127.0.0.1:1/v1", model: small}
hooks: {http_allow_hosts: [ci.example.com]}
`)
	d := startDaemon(t, filepath.Join(dir, "data"), "--config", cfg)
	addr := d.m.Addr()
	mustCtl(t, addr, "project", "create", "shop")
	mustCtl(t, addr, "project", "edit", "shop", "--set", "hook_commands=go test ./...")

	workflows, err := filepath.Glob(filepath.Join("..", "..", "configs", "workflows", "*.yaml"))
	if err != nil || len(workflows) < 4 {
		t.Fatalf("example workflows: %q, %v", workflows, err)
	}
	for _, f := range workflows {
		var wf models.Workflow
		out := mustCtl(t, addr, "--json", "workflow", "add", "--file", f, "--project", "shop")
		if err := json.Unmarshal([]byte(out), &wf); err != nil {
			t.Fatalf("workflow add %s: %v\n%s", f, err, out)
		}
		if want := strings.TrimSuffix(filepath.Base(f), ".yaml"); wf.Name != want || wf.ProjectID != "shop" {
			t.Errorf("%s: workflow %q of project %q; want %q of shop", f, wf.Name, wf.ProjectID, want)
		}
	}
	// The bug is fix-test-document's input: a run without it is refused.
	r := runCtl(t, addr, nil, "workflow", "run", "fix-test-document")
	if r.code == 0 || !strings.Contains(r.stderr, "inputs.bug: required") {
		t.Errorf("fix-test-document run without its bug: exit %d, stderr %q", r.code, r.stderr)
	}

	hooks, err := filepath.Glob(filepath.Join("..", "..", "configs", "hooks", "*.json"))
	if err != nil || len(hooks) < 5 {
		t.Fatalf("example hooks: %q, %v", hooks, err)
	}
	modelFree := 0
	for _, f := range hooks {
		r := runCtl(t, addr, nil, "hook", "create", "--file", f)
		if r.code == 0 || !strings.Contains(r.stderr, "names no project_id: give --project ID") {
			t.Errorf("hook create %s without --project: exit %d, stderr %q", f, r.code, r.stderr)
		}
		var h models.Hook
		out := mustCtl(t, addr, "--json", "hook", "create", "--file", f, "--project", "shop")
		if err := json.Unmarshal([]byte(out), &h); err != nil {
			t.Fatalf("hook create %s: %v\n%s", f, err, out)
		}
		if h.ProjectID != "shop" {
			t.Errorf("%s: hook of project %q, want shop", f, h.ProjectID)
		}
		if strings.TrimSpace(h.PromptTemplate) == "" {
			modelFree++
		}
	}
	if modelFree == 0 {
		t.Error("no example hook works without a model (an empty prompt_template)")
	}
}
