package workflow_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestParseShapesAgree parses the same workflow written in the steps shape
// and in the tasks shape: both give the one internal form of
// testdata/shapes/workflow.golden.json.
func TestParseShapesAgree(t *testing.T) {
	t.Parallel()
	golden := filepath.Join("testdata", "shapes", "workflow.golden.json")
	var forms []string
	for _, name := range []string{"steps.yaml", "tasks.yaml"} {
		src, err := os.ReadFile(filepath.Join("testdata", "shapes", name))
		if err != nil {
			t.Fatal(err)
		}
		w, err := workflow.Parse(name, src)
		if err != nil {
			t.Fatalf("Parse %s: %v", name, err)
		}
		if w.Source != string(src) {
			t.Errorf("%s: Source is not the document", name)
		}
		w.Source = ""
		b, err := json.MarshalIndent(w, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		forms = append(forms, string(b)+"\n")
	}
	if forms[0] != forms[1] {
		t.Fatalf("the shapes parse differently:\nsteps: %s\ntasks: %s", forms[0], forms[1])
	}
	if *update {
		if err := os.WriteFile(golden, []byte(forms[0]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if forms[0] != string(want) {
		t.Errorf("internal form:\n%s\nwant (%s):\n%s", forms[0], golden, want)
	}
}

// TestParseTasksShape checks what the tasks shape reads that the steps
// shape writes otherwise: the order of the mapping, references without
// ".outputs.", on_failure and timeouts.
func TestParseTasksShape(t *testing.T) {
	t.Parallel()
	src := `name: x
project: web
tasks:
  zeta:
    title: Z
    timeout: 90s
  alpha:
    title: A
    depends_on: [zeta]
    foreach: zeta.outputs.items
  mid:
    title: M
    depends_on: [alpha, {step: zeta}]
    parallel: zeta.n
    on_failure: block
  last:
    title: L
    depends_on: [mid]
    on_failure: run
`
	w, err := workflow.Parse("w.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var names []string
	for _, s := range w.Steps {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "zeta,alpha,mid,last" {
		t.Errorf("steps in order %s, want the document's zeta,alpha,mid,last", got)
	}
	s := w.Steps
	switch {
	case s[0].Timeout.Std().String() != "1m30s":
		t.Errorf("zeta timeout %s, want 1m30s", s[0].Timeout)
	case s[1].Foreach != "zeta.outputs.items":
		t.Errorf("alpha foreach %q", s[1].Foreach)
	case s[2].Parallel == nil || s[2].Parallel.From != "zeta.outputs.n":
		t.Errorf("mid parallel %+v", s[2].Parallel)
	case !s[2].DependsOn[0].Required() || !s[2].DependsOn[1].Required():
		t.Errorf("mid (on_failure: block) has a soft dependency: %+v", s[2].DependsOn)
	case s[3].DependsOn[0].Required():
		t.Errorf("last (on_failure: run) has a required dependency: %+v", s[3].DependsOn)
	}
}

// TestParseShapeErrors checks the problems of the tasks shape: each names
// the key as the document wrote it, at its line and column.
func TestParseShapeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{
			name: "steps and tasks",
			src: `name: x
project: web
steps:
  - name: a
    title: A
tasks:
  b:
    title: B
`,
			want: []string{"w.yaml:7:3: tasks: a workflow has steps (a list) or tasks (a mapping by name), not both; steps is at line 4"},
		},
		{
			name: "unknown keys and bad values",
			src: `name: x
project: web
tasks:
  a:
    title: A
    name: a
    timeout: soon
  b:
    title: B
    depends_on: [a]
    on_failure: retry
`,
			want: []string{
				"w.yaml:6:5: tasks.a.name: unknown key; known keys: title, description, depends_on, profile, agent_type, kind, priority, max_retries, test_commands, verification, requires_approval, parallel, foreach, concurrency, timeout, expected_count, runner_labels, on_failure",
				"w.yaml:7:14: tasks.a.timeout: must be a duration such as 10m or 1h30m, or a whole number of seconds",
				`w.yaml:11:17: tasks.b.on_failure: must be run or block (got "retry")`,
			},
		},
		{
			name: "checks name the task",
			src: `name: x
project: web
tasks:
  discover:
    title: D
  Upgrade:
    title: U
    foreach: discover.files
  summary:
    depends_on: [tets]
    timeout: 200h
`,
			want: []string{
				`w.yaml:6:3: tasks.Upgrade.name: "Upgrade" is not a step name (1-64 lower-case letters, digits, '-' or '_')`,
				"w.yaml:8:14: tasks.Upgrade.foreach: discover is not upstream of Upgrade (add it to depends_on)",
				"w.yaml:9:3: tasks.summary.title: required",
				`w.yaml:10:18: tasks.summary.depends_on[0]: unknown step "tets" (steps: discover, Upgrade, summary)`,
				"w.yaml:11:14: tasks.summary.timeout: must be 0 (none) or between 1s and 168h0m0s (got 200h0m0s)",
			},
		},
		{
			name: "a cycle names the task",
			src: `name: x
project: web
tasks:
  a:
    title: A
    depends_on: [b]
  b:
    title: B
    depends_on: [a]
`,
			want: []string{"w.yaml:9:18: tasks.b: dependency cycle: b -> a -> b"},
		},
		{
			name: "on_failure run against requires_success true",
			src: `name: x
project: web
tasks:
  a:
    title: A
  b:
    title: B
    depends_on:
      - step: a
        requires_success: true
    on_failure: run
`,
			want: []string{"w.yaml:10:27: tasks.b.depends_on[0].requires_success: true contradicts the task's on_failure: run"},
		},
		{
			name: "tasks not a mapping",
			src: `name: x
project: web
tasks: [a, b]
`,
			want: []string{"w.yaml:3:8: tasks: must be a mapping of task name to task"},
		},
		{
			name: "empty tasks",
			src: `name: x
project: web
tasks:
`,
			want: []string{"w.yaml:3:7: tasks: required (at least one step)"},
		},
		{
			name: "a task not a mapping",
			src: `name: x
project: web
tasks:
  a: do it
`,
			want: []string{"w.yaml:4:6: tasks.a: a task is a mapping with title"},
		},
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
			got := strings.Split(models.ErrorMessageOf(err), "\n")
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
