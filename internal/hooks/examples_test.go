package hooks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/llm/llmtest"
	"github.com/agentqueued/agentqueued/internal/models"
)

// The example hooks of configs/hooks are what users copy: each must decode
// strictly as a hook and, given a project (`ctl hook create --project`; the
// files name none), be valid.
func TestExampleHooksAreValid(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../configs/hooks/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("%d example hooks", len(files))
	}
	seen := map[models.HookTriggerType]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s models.HookSpec
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		if err := d.Decode(&s); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if s.ProjectID != "" {
			t.Errorf("%s names project %q: the examples leave it to --project", f, s.ProjectID)
		}
		s.ProjectID = "p"
		h := s.Hook()
		if err := h.Validate(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		seen[h.Trigger.Type] = true
	}
	for _, tt := range []models.HookTriggerType{models.TriggerPeriodic, models.TriggerCron, models.TriggerEvent} {
		if !seen[tt] {
			t.Errorf("no example of a %s trigger", tt)
		}
	}
}

// The hourly summary example skips a quiet hour at no cost: its first step
// (the last hour's status changes) finds no rows, and output_empty holds.
// An hour with changes calls the model.
func TestHourlySummaryExampleSkipsAQuietHour(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../configs/hooks/hourly-summary.json")
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	spec["project_id"] = "web"
	b, err = json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	h.project("web")
	hk := h.hook(string(b))
	// Queued before the quiet hour so that a wrong call fails at once.
	h.llm.Enqueue(llmtest.Reply{Content: "one task added", Usage: llmtest.Usage{PromptTokens: 1, CompletionTokens: 1}})
	r := h.fire(hk.ID, models.HookFire{})
	want := "context_steps[0] (db_query): the query returned no rows, so the LLM was not called"
	if r.Status != models.HookRunSkipped || deref(r.SkippedReason) != want || len(h.llm.Requests()) != 0 {
		t.Fatalf("quiet hour: %s %q (%s), %d LLM calls", r.Status, deref(r.SkippedReason), r.Error, len(h.llm.Requests()))
	}
	h.task("web", "something happened")
	r = h.fire(hk.ID, models.HookFire{})
	if r.Status != models.HookRunCompleted || len(h.llm.Requests()) != 1 {
		t.Fatalf("busy hour: %s (%s), %d LLM calls", r.Status, r.Error, len(h.llm.Requests()))
	}
}

// TestMorningTestsExampleFilesATaskWhenTheTestsFail: the model-free
// example runs the project's real `go test ./...`, files one task with the
// failing output when it fails, and nothing when it passes.
func TestMorningTestsExampleFilesATaskWhenTheTestsFail(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	b, err := os.ReadFile("../../configs/hooks/morning-tests.json")
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	spec["project_id"] = "web"
	if b, err = json.Marshal(spec); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	h.commit(map[string]string{"go.mod": "module demo\n\ngo 1.21\n", "src/b.go": "package a\n",
		"src/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestSum(t *testing.T) { t.Fatal(\"sum is 3, want 4\") }\n"}, "a failing test")
	h.project("web", func(p *models.Project) { p.Settings.HookCommands = []string{"go test ./..."} })
	hk := h.hook(string(b))
	r := h.fire(hk.ID, models.HookFire{})
	if r.Status != models.HookRunCompleted {
		t.Fatalf("failing tests: %s (%s%s)", r.Status, r.Error, deref(r.SkippedReason))
	}
	tasks, err := h.st.ListTasks(context.Background(), models.TaskFilter{ProjectID: "web"})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("%d tasks, %v", len(tasks), err)
	}
	if got := tasks[0]; got.Title != "The test suite fails on the default branch" || !strings.Contains(got.Description, "sum is 3, want 4") ||
		!strings.Contains(got.Description, "a failing test") {
		t.Errorf("task %q:\n%s", got.Title, got.Description)
	}
	if len(h.llm.Requests()) != 0 {
		t.Errorf("%d model calls", len(h.llm.Requests()))
	}

	h.commit(map[string]string{"src/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestSum(t *testing.T) {}\n"}, "fixed")
	r = h.fire(hk.ID, models.HookFire{})
	if r.Status != models.HookRunSkipped {
		t.Errorf("passing tests: %s (%s): %s", r.Status, r.Error, deref(r.ContextResults))
	}
}
