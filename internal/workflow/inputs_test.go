package workflow_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

const withInputs = `name: release
project: web
inputs:
  - name: version
    description: the version to release
    required: true
  - name: channel
    default: stable
  - name: note
steps:
  - name: tag
    title: "Release {{inputs.version}} on {{ inputs.channel }}"
    description: "{{inputs.note}}"
`

func TestInputsAreDeclaredAndFillTemplates(t *testing.T) {
	t.Parallel()
	w, err := workflow.Parse("release.yaml", []byte(withInputs))
	if err != nil {
		t.Fatal(err)
	}
	stable := "stable"
	want := []models.WorkflowInput{{Name: "version", Description: "the version to release", Required: true},
		{Name: "channel", Default: &stable}, {Name: "note"}}
	if !reflect.DeepEqual(w.Inputs, want) {
		t.Fatalf("inputs %+v, want %+v", w.Inputs, want)
	}
	in, err := workflow.ResolveInputs(w, map[string]string{"version": "1.2.0"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, map[string]string{"version": "1.2.0", "channel": "stable", "note": ""}) {
		t.Fatalf("resolved %v", in)
	}
	tasks, err := workflow.StepTasks(w, w.Steps[0], "release-1", in, nil, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tasks[0].Title != "Release 1.2.0 on stable" {
		t.Fatalf("title %q", tasks[0].Title)
	}
}

func TestResolveInputsNamesEachProblem(t *testing.T) {
	t.Parallel()
	w, err := workflow.Parse("release.yaml", []byte(withInputs))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		given map[string]string
		want  []string // lines of the error
	}{
		{"missing required", nil,
			[]string{"inputs.version: required (the version to release); give it with --input version=VALUE"}},
		{"unknown key", map[string]string{"version": "1", "chanel": "beta"},
			[]string{"inputs.chanel: unknown input (inputs: version, channel, note)"}},
		{"both", map[string]string{"x": "1"}, []string{"inputs.version: required (the version to release); give it with --input version=VALUE",
			"inputs.x: unknown input (inputs: version, channel, note)"}},
		{"control character", map[string]string{"version": "1\x1b[2J"}, []string{"inputs.version:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := workflow.ResolveInputs(w, tc.given)
			if models.ErrorCodeOf(err) != models.CodeInvalid {
				t.Fatalf("%v; want invalid", err)
			}
			lines := strings.Split(models.ErrorMessageOf(err), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("lines %q, want %q", lines, tc.want)
			}
			for i := range lines {
				if !strings.HasPrefix(lines[i], tc.want[i]) {
					t.Errorf("line %d %q, want %q", i, lines[i], tc.want[i])
				}
			}
		})
	}
	plain := models.Workflow{Name: "plain"}
	if _, err := workflow.ResolveInputs(plain, map[string]string{"a": "1"}); err == nil ||
		!strings.Contains(err.Error(), "inputs.a: unknown input (workflow plain declares no inputs)") {
		t.Fatalf("input for a workflow without inputs: %v", err)
	}
}

func TestBadInputDeclarationsAreRefused(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, doc, want string }{
		{"unknown placeholder input", strings.Replace(withInputs, "{{inputs.note}}", "{{inputs.notes}}", 1),
			`steps[0].description: {{inputs.notes}}: no input "notes" is declared (inputs: version, channel, note)`},
		{"required with default", strings.Replace(withInputs, "required: true", "required: true\n    default: \"1.0\"", 1),
			"inputs[0].required: a required input has no default"},
		{"required with a schedule", strings.Replace(withInputs, "project: web", "project: web\nschedule: \"@daily\"", 1),
			"inputs[0].required: a workflow with a schedule cannot require an input"},
		{"twice", strings.Replace(withInputs, "name: note", "name: channel", 1), `inputs[2].name: input "channel" is declared twice`},
		{"bad name", strings.Replace(withInputs, "name: note", "name: the-note", 1), `inputs[2].name: "the-note" is not an input name`},
		{"unknown key", strings.Replace(withInputs, "default: stable", "defualt: stable", 1), `inputs[1].defualt`},
		{"no inputs declared", "name: plain\nproject: web\nsteps:\n  - name: a\n    title: \"{{inputs.x}}\"\n",
			`steps[0].title: {{inputs.x}}: no input "x" is declared (workflow plain declares no inputs)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := workflow.Parse("release.yaml", []byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v\nwant a line containing %q", err, tc.want)
			}
		})
	}
}
