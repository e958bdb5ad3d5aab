package hooks_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestFileTaskHookFilesATaskWithoutAModel: a hook with file_task and no
// prompt files one task from its steps' results when no step
// short-circuits it, calls no model, records the action, and files
// nothing new while its task is unfinished.
func TestFileTaskHookFilesATaskWithoutAModel(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// Commands run without a shell: the failing one is a script.
	h.commit(map[string]string{"check.sh": "printf 'FAIL: TestParse\\n\\tparse_test.go:12: got 2\\n\\033[0m'\nexit 1\n"}, "a failing check")
	const failing = "sh check.sh"
	h.project("web", func(p *models.Project) { p.Settings.HookCommands = []string{failing, "true"} })
	spec := func(name, command string) string {
		b, _ := json.Marshal(command)
		return `{"project_id":"web","name":"` + name + `","trigger":{"type":"manual"},
			"context_steps":[{"type":"run_command","command":` + string(b) + `,"skip_llm_if":"exit_code_zero"}],
			"file_task":{"title":"Tests fail (exit {{step_0.exit_code}})","description":"The morning run:\n{{step_0}}","kind":"bug","priority":2}}`
	}
	hk := h.hook(spec("morning", failing))
	before := len(h.llm.Requests())

	r := h.fire(hk.ID, models.HookFire{})
	if r.Status != models.HookRunCompleted || r.Error != "" {
		t.Fatalf("run %s (%s%s)", r.Status, r.Error, deref(r.SkippedReason))
	}
	var acts []models.HookAction
	if r.ActionsTaken == nil || json.Unmarshal([]byte(*r.ActionsTaken), &acts) != nil || len(acts) != 1 || acts[0].Tool != "file_task" || acts[0].Error != "" {
		t.Fatalf("actions %v", deref(r.ActionsTaken))
	}
	var out struct {
		TaskID  string `json:"task_id"`
		Created bool   `json:"created"`
	}
	if err := json.Unmarshal([]byte(acts[0].Result), &out); err != nil || !out.Created {
		t.Fatalf("result %q: %v", acts[0].Result, err)
	}
	task, err := h.st.GetTask(context.Background(), out.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if task.Title != "Tests fail (exit 1)" || task.Kind != "bug" || task.Priority != 2 || task.CreatedBy != "hook:"+hk.ID {
		t.Errorf("task %q kind %q priority %d by %q", task.Title, task.Kind, task.Priority, task.CreatedBy)
	}
	// The output is in the description, cleaned of its control characters.
	if !strings.Contains(task.Description, "FAIL: TestParse\n\tparse_test.go:12: got 2") || strings.Contains(task.Description, "\033") {
		t.Errorf("description %q", task.Description)
	}

	// Fired again while that task is unfinished: the same task stands.
	again := h.fire(hk.ID, models.HookFire{})
	if again.Status != models.HookRunCompleted || !strings.Contains(deref(again.ActionsTaken), `\"created\":false`) {
		t.Errorf("second run %s: %s", again.Status, deref(again.ActionsTaken))
	}
	if tasks, _ := h.st.ListTasks(context.Background(), models.TaskFilter{ProjectID: "web"}); len(tasks) != 1 {
		t.Errorf("%d tasks after two failing runs, want 1", len(tasks))
	}

	// A passing command short-circuits the run: no task.
	ok := h.hook(spec("passing", "true"))
	skipped := h.fire(ok.ID, models.HookFire{})
	if skipped.Status != models.HookRunSkipped || !strings.Contains(deref(skipped.SkippedReason), "so no task was filed") {
		t.Errorf("passing run %s %q", skipped.Status, deref(skipped.SkippedReason))
	}
	if calls := len(h.llm.Requests()) - before; calls != 0 {
		t.Errorf("%d model calls, want none", calls)
	}
}

// TestFileTaskIsValidated: a file_task's fields and placeholders are
// checked as a prompt's are, and a hook cannot both ask a model and file a
// task itself.
func TestFileTaskIsValidated(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, spec, want string }{
		{"no title", `"file_task":{"description":"x"}`, "file_task.title: required"},
		{"unknown step", `"file_task":{"title":"t {{step_3}}"}`, "file_task.title: {{step_3}}: the hook has 1 context steps"},
		{"unknown field", `"file_task":{"title":"t","description":"{{step_0.status}}"}`, `file_task.description: {{step_0.status}}: run_command steps have no field "status"`},
		{"no event", `"file_task":{"title":"{{event.task_id}}"}`, "file_task.title: {{event.task_id}}: only event-triggered and manual hooks have an event"},
		{"negative priority", `"file_task":{"title":"t","priority":-1}`, "file_task.priority: must not be negative"},
		{"both", `"file_task":{"title":"t"},"prompt_template":"look"`, "file_task: a hook files a task itself or asks a model (prompt_template), not both"},
	}
	for _, c := range cases {
		var s models.HookSpec
		body := `{"project_id":"web","name":"x","trigger":{"type":"periodic","interval_seconds":3600},
			"context_steps":[{"type":"run_command","command":"true"}],` + c.spec + `}`
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		hk := s.Hook()
		err := hk.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
