package workflow_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// doc returns a one-step workflow document whose step has the given
// extra lines (indented as step keys).
func doc(stepLines ...string) string {
	return "name: x\nproject: web\nsteps:\n  - name: a\n" + strings.Join(stepLines, "\n") + "\n"
}

// TestParseRefusesTextThatBreaksLater: a workflow file is an entry point
// of task text like the API; a NUL in a title used to reach git.
func TestParseRefusesTextThatBreaksLater(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"NUL in a title", doc(`    title: "Fix the build\0"`),
			[]string{`w.yaml:5:12: steps[0].title: control character U+0000 (NUL) at character 14 is not allowed (one line of printable text)`}},
		{"ESC in a title", doc(`    title: "\e[31mred"`), []string{`w.yaml:5:12: steps[0].title: control character U+001B (ESC) at character 1 is not allowed (one line of printable text)`}},
		{"tab in a title", doc(`    title: "a\tb"`), []string{`w.yaml:5:12: steps[0].title: control character U+0009 (tab) at character 2 is not allowed (one line of printable text)`}},
		{"line break in a title", doc(`    title: "a\nb"`), []string{`w.yaml:5:12: steps[0].title: control character U+000A (line feed) at character 2 is not allowed (one line of printable text)`}},
		{"C1 control in a title", doc(`    title: "a\N"`), []string{`w.yaml:5:12: steps[0].title: control character U+0085 at character 2 is not allowed (one line of printable text)`}},
		{"line separator in a title", doc(`    title: "a\Lb"`), []string{`w.yaml:5:12: steps[0].title: control character U+2028 (line separator) at character 2 is not allowed (one line of printable text)`}},
		{"bell in a description", doc(`    title: T`, `    description: "ring\a"`),
			[]string{`w.yaml:6:18: steps[0].description: control character U+0007 at character 5 is not allowed (text takes printable characters, line breaks and tabs)`}},
		{"NUL in a kind", doc(`    title: T`, `    kind: "bug\0"`), []string{`w.yaml:6:11: steps[0].kind: control character U+0000 (NUL) at character 4 is not allowed (one line of printable text)`}},
		{"NUL in a test command", doc(`    title: T`, `    test_commands: ["go test\0"]`),
			[]string{`w.yaml:6:21: steps[0].test_commands[0]: control character U+0000 (NUL) at character 8 is not allowed (text takes printable characters, line breaks and tabs)`}},
		{"NUL in the workflow's description", "name: x\nproject: web\ndescription: \"a\\0\"\nsteps:\n  - name: a\n    title: T\n",
			[]string{`w.yaml:3:14: description: control character U+0000 (NUL) at character 2 is not allowed (text takes printable characters, line breaks and tabs)`}},
		{"NUL in the schedule", "name: x\nproject: web\nschedule: \"@daily\\0\"\nsteps:\n  - name: a\n    title: T\n",
			[]string{`w.yaml:3:11: schedule: control character U+0000 (NUL) at character 7 is not allowed (one line of printable text)`}},
		{"title over the cap in characters", doc("    title: " + strings.Repeat("é", models.MaxTitleLen+1)),
			[]string{`w.yaml:5:12: steps[0].title: at most 300 characters (got 301)`}},
		{"raw control character", doc("    title: Fix\x01it"),
			[]string{`w.yaml:5:15: control character U+0001 is not allowed in a workflow document`}},
		{"raw DEL", doc("    title: Fix\x7f"), []string{`w.yaml:5:15: control character U+007F is not allowed in a workflow document`}},
		{"invalid UTF-8", doc("    title: caf\xc3 au lait"), []string{`w.yaml:5:15: not valid UTF-8 text`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := workflow.Parse("w.yaml", []byte(tt.src))
			if err == nil {
				t.Fatal("Parse accepted the document")
			}
			if models.ErrorCodeOf(err) != models.CodeInvalid {
				t.Errorf("code %s, want invalid", models.ErrorCodeOf(err))
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("message lines:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestParseAcceptsMultiLineTextAndUnicode(t *testing.T) {
	t.Parallel()
	src := "name: x\r\nproject: web\r\nsteps:\r\n  - name: a\r\n    title: \"Corriger l'été 🚀 — 修正\"\r\n" +
		"    description: |\r\n      Steps:\r\n      \t1. build\r\n    test_commands:\r\n      - \"set -e\\n\\tgo vet ./...\\ngo test ./...\"\r\n"
	w, err := workflow.Parse("w.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	st := w.Steps[0]
	if st.Title != "Corriger l'été 🚀 — 修正" || st.Description != "Steps:\n\t1. build\n" ||
		!reflect.DeepEqual(st.TestCommands, []string{"set -e\n\tgo vet ./...\ngo test ./..."}) {
		t.Fatalf("step %+v", st)
	}
}

// TestStepTasksCleanWhatUpstreamOutputsBring: titles and descriptions
// filled from agents' outputs are cleaned, so the run's tasks are created
// rather than refused.
func TestStepTasksCleanWhatUpstreamOutputsBring(t *testing.T) {
	t.Parallel()
	w := models.Workflow{Name: "nightly", ProjectID: "web"}
	step := models.WorkflowStep{Name: "fix", Title: "Fix {{item}}", Description: "Fix:\n\t{{item}}", Foreach: "lint.outputs.findings"}
	tasks, err := workflow.StepTasks(w, step, "run-1", nil, raws(`"the\u0000 build\u001b[31m\nnow\r\n"`), 1, nil)
	if err != nil {
		t.Fatalf("StepTasks: %v", err)
	}
	got := tasks[0]
	if got.Title != "Fix the build [31m now" {
		t.Errorf("title %q", got.Title)
	}
	if got.Description != "Fix:\n\tthe build[31m\nnow\n" {
		t.Errorf("description %q", got.Description)
	}
	if item := got.Metadata["item"]; item != "the build[31m\nnow\n" {
		t.Errorf("item metadata %q", item)
	}
	if err := (models.TaskBatch{ProjectID: "web", Tasks: tasks}).Validate(); err != nil {
		t.Errorf("the cleaned tasks are refused: %v", err)
	}
}

func TestRunActorsAreOneLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"nightly.yaml": nightly})
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"trigger": func() error { _, err := e.eng.Trigger(ctx, "nightly", "api\x00"); return err },
		"cancel":  func() error { _, err := e.eng.Cancel(ctx, "run-x", "a\nb"); return err },
		"retry": func() error {
			_, err := e.eng.Retry(ctx, "run-x", strings.Repeat("a", models.MaxActorLen+1))
			return err
		},
	} {
		err := call()
		if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.HasPrefix(err.Error(), "actor: ") {
			t.Errorf("%s: %v, want an invalid actor", name, err)
		}
	}
	if n := len(e.runs()); n != 0 {
		t.Fatalf("%d runs started", n)
	}
	run, err := e.eng.Trigger(ctx, "nightly", "discord:400000000000000001")
	if err != nil || run.TriggeredBy != "discord:400000000000000001" {
		t.Fatalf("Trigger: %+v, %v", run, err)
	}
}
