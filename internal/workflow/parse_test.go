package workflow_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

func intp(v int) *int    { return &v }
func boolp(v bool) *bool { return &v }

func TestParseFullDocument(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := workflow.Parse("full.yaml", src)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := models.Workflow{
		Name:            "nightly-deps",
		ProjectID:       "web",
		Description:     "Keep the web project's Go modules up to date.",
		Schedule:        "0 2 * * *",
		Timezone:        "Europe/Paris",
		ScheduleEnabled: false,
		Source:          string(src),
		Steps: []models.WorkflowStep{
			{
				Name:  "discover",
				Title: "List outdated modules of {{run.workflow}}",
				Description: "Run `go list -m -u all` and report the outdated modules as outputs:\n" +
					`{"modules": ["golang.org/x/net", ...], "shard_count": 3, "owner": "web-team"}` + "\n" +
					"(run {{ run.id }})\n",
				Profile:          "cheap",
				Kind:             "deps",
				Priority:         intp(50),
				MaxRetries:       intp(2),
				TestCommands:     []string{"go test ./..."},
				Verification:     models.VerifyAutoTest,
				RequiresApproval: false,
			},
			{
				Name:             "upgrade",
				Title:            "Upgrade {{item}} ({{index}}/{{count}}) for {{discover.outputs.owner}}",
				DependsOn:        []models.StepDependency{{Step: "discover"}},
				Foreach:          "discover.outputs.modules",
				Concurrency:      2,
				RequiresApproval: true,
				Verification:     models.VerifyHuman,
			},
			{
				Name:      "shards",
				Title:     "Shard {{index}} of {{count}}",
				DependsOn: []models.StepDependency{{Step: "discover"}},
				Parallel:  &models.FanOut{From: "discover.outputs.shard_count"},
			},
			{
				Name:         "lint",
				Title:        "Lint shard {{ index }}",
				Parallel:     &models.FanOut{Count: 4},
				Verification: models.VerifyQAAgent,
			},
			{
				Name:  "summary",
				Title: "Summarise",
				DependsOn: []models.StepDependency{
					{Step: "upgrade", RequiresSuccess: boolp(false)},
					{Step: "shards"},
					{Step: "lint"},
				},
			},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse:\n got %+v\nwant %+v", got, want)
	}
	if err := workflow.Validate(got); err != nil {
		t.Errorf("Validate of a parsed workflow: %v", err)
	}
}

func TestParseDefaultsAndForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		want models.Workflow
	}{
		{
			name: "json",
			src: `{"name": "j", "project": "web", "schedule": "@daily",
			  "steps": [{"name": "a", "title": "A", "verification": "qa_agent"},
			            {"name": "b", "title": "B {{index}}", "parallel": "3",
			             "depends_on": ["a", {"step": "a2", "requires_success": true}]},
			            {"name": "a2", "title": "A2"}]}`,
			want: models.Workflow{Name: "j", ProjectID: "web", Schedule: "@daily", ScheduleEnabled: true, Steps: []models.WorkflowStep{
				{Name: "a", Title: "A", Verification: models.VerifyQAAgent},
				{Name: "b", Title: "B {{index}}", Parallel: &models.FanOut{Count: 3},
					DependsOn: []models.StepDependency{{Step: "a"}, {Step: "a2", RequiresSuccess: boolp(true)}}},
				{Name: "a2", Title: "A2"},
			}},
		},
		{
			name: "merge keys and nulls",
			src: `name: m
project: web
description:
steps:
  - &base
    name: a
    title: A
    profile: cheap
    test_commands: [make test]
  - <<: *base
    name: b
    depends_on: [a]
    parallel: ~
`,
			want: models.Workflow{Name: "m", ProjectID: "web", ScheduleEnabled: true, Steps: []models.WorkflowStep{
				{Name: "a", Title: "A", Profile: "cheap", TestCommands: []string{"make test"}},
				{Name: "b", Title: "A", Profile: "cheap", TestCommands: []string{"make test"},
					DependsOn: []models.StepDependency{{Step: "a"}}},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := workflow.Parse("w.yaml", []byte(tt.src))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tt.want.Source = tt.src
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{
			name: "unknown keys",
			src: `name: x
project: web
steps:
  - name: a
    title: A
    dependson: [b]
    foo: 1
  - name: b
    title: B
colour: red
project_id: web
`,
			want: []string{
				"w.yaml:6:5: steps[0].dependson: unknown key; did you mean depends_on?",
				"w.yaml:7:5: steps[0].foo: unknown key; known keys: name, title, description, depends_on, profile, agent_type, kind, priority, max_retries, test_commands, verification, requires_approval, parallel, foreach, concurrency, timeout, expected_count, runner_labels",
				"w.yaml:10:1: colour: unknown key; known keys: name, project, description, schedule, timezone, schedule_enabled, inputs, steps, tasks",
				"w.yaml:11:1: project_id: unknown key; did you mean project?",
			},
		},
		{
			name: "syntax error",
			src: `name: x
project: web
steps:
  - name: a
    title: "A
  - name: b
`,
			want: []string{"w.yaml:5: not valid YAML: found unexpected end of stream"},
		},
		{
			name: "unknown step",
			src: `name: nightly
project: web
steps:
  - name: discover
    title: D
  - name: upgrade
    title: U
    depends_on: [discover]
  - name: summary
    title: S
    depends_on: [upgrade, tets]
`,
			want: []string{`w.yaml:11:27: steps[2].depends_on[1]: unknown step "tets" (steps: discover, upgrade, summary)`},
		},
		{
			name: "cycle",
			src: `name: x
project: web
steps:
  - name: a
    title: A
    depends_on: [c]
  - name: b
    title: B
    depends_on: [a]
  - name: c
    title: C
    depends_on:
      - step: b
`,
			want: []string{"w.yaml:9:18: steps[1]: dependency cycle: b -> a -> c -> b"},
		},
		{
			name: "bad parallel",
			src: `name: x
project: web
steps:
  - name: a
    title: A
  - name: b
    title: B
    depends_on: [a]
    parallel: a.output.n
  - name: c
    title: C
    parallel: 0
  - name: d
    title: D
    parallel: 2.5
  - name: e
    title: E
    depends_on: [a]
    parallel: a.outputs.my-count
`,
			want: []string{
				`w.yaml:9:15: steps[1].parallel: "a.output.n" is not a count (1-1000) or <step>.outputs.<field>`,
				`w.yaml:12:15: steps[2].parallel: must be between 1 and 1000 (got 0)`,
				`w.yaml:15:15: steps[3].parallel: must be a count (1-1000) or <step>.outputs.<field>`,
				`w.yaml:19:15: steps[4].parallel: "my-count" is not a field name (letters, digits and '_', not starting with a digit)`,
			},
		},
		{
			name: "foreach of a step not upstream, or of itself",
			src: `name: x
project: web
steps:
  - name: a
    title: A
  - name: b
    title: "B {{item}}"
    foreach: a.outputs.list
  - name: c
    title: C
    depends_on: [b]
    foreach: c.outputs.list
`,
			want: []string{
				"w.yaml:8:14: steps[1].foreach: a is not upstream of b (add it to depends_on)",
				"w.yaml:12:14: steps[2].foreach: a step cannot read its own outputs",
			},
		},
		{
			name: "foreach of a step that fans out",
			src: `name: x
project: web
steps:
  - name: a
    title: A
    parallel: 3
  - name: b
    title: "B {{item}}"
    depends_on: [a]
    foreach: a.outputs.list
`,
			want: []string{"w.yaml:10:14: steps[1].foreach: a makes several tasks (it has parallel or foreach); only the outputs of a step that makes one task can be read"},
		},
		{
			name: "parallel and foreach",
			src: `name: x
project: web
steps:
  - name: a
    title: A
  - name: b
    title: B
    depends_on: [a]
    parallel: 3
    foreach: a.outputs.list
`,
			want: []string{"w.yaml:10:14: steps[1].foreach: use either parallel or foreach, not both"},
		},
		{
			name: "bad cron and time zone",
			src: `name: x
project: web
schedule: "61 * * * *"
timezone: Mars/Olympus
steps:
  - name: a
    title: A
`,
			want: []string{
				`w.yaml:3:11: schedule: "61 * * * *" is not a cron expression (minute hour day-of-month month day-of-week): end of range (61) above maximum (59): 61`,
				`w.yaml:4:11: timezone: "Mars/Olympus" is not a known time zone`,
			},
		},
		{
			name: "duplicate step",
			src: `name: x
project: web
steps:
  - name: a
    title: A
  - name: a
    title: A again
`,
			want: []string{`w.yaml:6:11: steps[1].name: duplicate step "a" (also steps[0])`},
		},
		{
			name: "placeholders",
			src: `name: x
project: web
steps:
  - name: a
    title: "A {{ run.id }} {{foo}}"
  - name: b
    title: "B {{item}} {{index}}"
    description: "{{a.outputs.x}} {{c.outputs.y}} {{a.outputs.x}} {{zz.outputs.y}}"
    depends_on: [a]
  - name: c
    title: "C {{b.outputs.y}} {{ bogus }}"
    depends_on: [b]
    parallel: 2
`,
			want: []string{
				"w.yaml:5:12: steps[0].title: {{foo}}: unknown placeholder; allowed here: {{run.id}}, {{run.workflow}}",
				"w.yaml:7:12: steps[1].title: {{item}}: only in steps with foreach",
				"w.yaml:7:12: steps[1].title: {{index}}: only in steps with parallel or foreach",
				"w.yaml:8:18: steps[1].description: {{c.outputs.y}}: c is not upstream of b (add it to depends_on)",
				`w.yaml:8:18: steps[1].description: {{zz.outputs.y}}: unknown step "zz" (steps: a, b, c)`,
				"w.yaml:11:12: steps[2].title: {{bogus}}: unknown placeholder; allowed here: {{run.id}}, {{run.workflow}}, {{index}}, {{count}}, {{a.outputs.<field>}}, {{b.outputs.<field>}}",
			},
		},
		{
			name: "several problems at once",
			src: `name: Bad Name
steps:
  - name: a
    title: ""
    priority: -1
    max_retries: 101
    verification: maybe
    concurrency: 2000
    profile: Cheap
    agent_type: gpt
    test_commands: ["", "ok"]
    requires_approval: perhaps
    depends_on: [a, {step: zz, requires_success: maybe}, [1]]
    runner_labels: [gpu, GPU, gpu]
`,
			want: []string{
				"w.yaml:1:1: project: required",
				`w.yaml:1:7: name: "Bad Name" is not a workflow name (1-64 lower-case letters, digits, '-' or '_')`,
				"w.yaml:4:12: steps[0].title: required",
				"w.yaml:5:15: steps[0].priority: must not be negative (0 is the most urgent)",
				"w.yaml:6:18: steps[0].max_retries: must be between 0 and 100 (got 101)",
				`w.yaml:7:19: steps[0].verification: must be AUTO_TEST, QA_AGENT or HUMAN (got "maybe")`,
				"w.yaml:8:18: steps[0].concurrency: must be between 0 and 1000 (got 2000)",
				`w.yaml:9:14: steps[0].profile: "Cheap" is not a profile name (1-64 lower-case letters, digits, '-' or '_')`,
				`w.yaml:10:17: steps[0].agent_type: "gpt" is not an agent type (claude, codex, cursor, aider, command)`,
				"w.yaml:11:21: steps[0].test_commands[0]: empty command",
				"w.yaml:12:24: steps[0].requires_approval: must be true or false",
				"w.yaml:13:18: steps[0].depends_on[0]: a step cannot depend on itself",
				`w.yaml:13:21: steps[0].depends_on[1]: unknown step "zz" (steps: a)`,
				"w.yaml:13:50: steps[0].depends_on[1].requires_success: must be true or false",
				"w.yaml:13:58: steps[0].depends_on[2]: must be a step name or {step: <name>, requires_success: false}",
				`w.yaml:14:26: steps[0].runner_labels[1]: "GPU" is not a label (1-64 lower-case letters, digits, '-' or '_')`,
				`w.yaml:14:31: steps[0].runner_labels[2]: "gpu" is listed twice`,
			},
		},
		{
			name: "wrong types",
			src: `name: [x]
project: web
schedule_enabled: "no"
steps:
  - title: A
    priority: high
  - 42
`,
			want: []string{
				"w.yaml:1:7: name: must be text",
				`w.yaml:3:19: schedule_enabled: must be true or false`,
				"w.yaml:5:5: steps[0].name: required",
				"w.yaml:6:15: steps[0].priority: must be a whole number",
				"w.yaml:7:5: steps[1]: a step is a mapping with name and title",
			},
		},
		{
			name: "merge keys: problems at the key given",
			src: `name: a
project: p
steps:
  - &base
    name: Base
    title: t
  - <<: *base
    name: B
`,
			want: []string{
				`w.yaml:5:11: steps[0].name: "Base" is not a step name (1-64 lower-case letters, digits, '-' or '_')`,
				`w.yaml:8:11: steps[1].name: "B" is not a step name (1-64 lower-case letters, digits, '-' or '_')`,
			},
		},
		{
			name: "merge of its own mapping",
			src:  "name: a\nproject: p\nsteps:\n  - &x\n    name: s\n    title: t\n    <<: *x\n",
			want: []string{"w.yaml:4:5: steps[0]: a merge key (<<) brings in the mapping it is part of"},
		},
		{
			name: "merges that double at each level",
			src:  mergeBomb(40),
			want: []string{"w.yaml:9:9: steps[8]: more than 1000 merges (<<)"},
		},
		{
			name: "duplicate key",
			src:  "name: a\nname: b\nproject: p\nsteps: [{name: s, title: t}]\n",
			want: []string{"w.yaml:2:1: name: key given twice"},
		},
		{
			name: "no steps",
			src:  "name: a\nproject: p\nsteps: []\n",
			want: []string{"w.yaml:3:8: steps: required (at least one step)"},
		},
		{
			name: "not a mapping",
			src:  "- a\n- b\n",
			want: []string{"w.yaml:1:1: a workflow is a mapping with name, project and steps"},
		},
		{
			name: "empty",
			src:  "",
			want: []string{"w.yaml:1:1: empty document; a workflow has name, project and steps"},
		},
		{
			name: "two documents",
			src:  "name: a\n---\nname: b\n",
			want: []string{"w.yaml:2:1: one workflow per document; a second document starts here"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, err := workflow.Parse("w.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("Parse returned no error; workflow %+v", w)
			}
			if code := models.ErrorCodeOf(err); code != models.CodeInvalid {
				t.Errorf("code %q, want %q", code, models.CodeInvalid)
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("message lines:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	ok := models.Workflow{Name: "w", ProjectID: "web", Steps: []models.WorkflowStep{
		{Name: "discover", Title: "D"},
		{Name: "upgrade", Title: "U {{item.name}}", Foreach: "discover.outputs.modules",
			DependsOn: []models.StepDependency{{Step: "discover"}}},
		{Name: "summary", Title: "S", DependsOn: []models.StepDependency{{Step: "upgrade", RequiresSuccess: boolp(false)}}},
	}}
	tests := []struct {
		name string
		edit func(w *models.Workflow)
		want []string
	}{
		{name: "valid", edit: func(*models.Workflow) {}},
		{
			name: "unknown step",
			edit: func(w *models.Workflow) { w.Steps[2].DependsOn = []models.StepDependency{{Step: "tets"}} },
			want: []string{`steps[2].depends_on[0]: unknown step "tets" (steps: discover, upgrade, summary)`},
		},
		{
			name: "cycle",
			edit: func(w *models.Workflow) { w.Steps[0].DependsOn = []models.StepDependency{{Step: "summary"}} },
			want: []string{"steps[1]: dependency cycle: upgrade -> discover -> summary -> upgrade"},
		},
		{
			name: "fan-out fields",
			edit: func(w *models.Workflow) {
				w.Steps[0].Parallel = &models.FanOut{Count: 2, From: "x.outputs.y"}
				w.Steps[2].Parallel = &models.FanOut{Count: 1001}
				w.Steps[1].Concurrency = -1
			},
			want: []string{
				"steps[0].parallel: a count or <step>.outputs.<field>, not both",
				"steps[1].concurrency: must be between 0 and 1000 (got -1)",
				"steps[1].foreach: discover makes several tasks (it has parallel or foreach); only the outputs of a step that makes one task can be read",
				"steps[2].parallel: must be between 1 and 1000 (got 1001)",
			},
		},
		{
			name: "workflow fields",
			edit: func(w *models.Workflow) {
				w.Name, w.ProjectID, w.Schedule, w.Timezone = "", "Web", "@every 1h", "Nowhere/Else"
			},
			want: []string{
				"name: required",
				`project: "Web" is not a project id (1-64 lower-case letters, digits, '-' or '_')`,
				`timezone: "Nowhere/Else" is not a known time zone`,
				"schedule: use a periodic schedule for a fixed interval, not @every",
			},
		},
		{
			name: "templates",
			edit: func(w *models.Workflow) {
				w.Steps[1].Title = "{{item.my-name}} {{discover.outputs.1x}}"
				w.Steps[2].Description = "{{count}} {{upgrade.outputs.x}}"
			},
			want: []string{
				`steps[1].title: {{item.my-name}}: "my-name" is not a field name (letters, digits and '_', not starting with a digit)`,
				`steps[1].title: {{discover.outputs.1x}}: "1x" is not a field name (letters, digits and '_', not starting with a digit)`,
				"steps[2].description: {{count}}: only in steps with parallel or foreach",
				"steps[2].description: {{upgrade.outputs.x}}: upgrade makes several tasks (it has parallel or foreach); only the outputs of a step that makes one task can be read",
			},
		},
		{
			name: "too long title",
			edit: func(w *models.Workflow) { w.Steps[0].Title = strings.Repeat("é", models.MaxTitleLen+1) },
			want: []string{"steps[0].title: at most 300 characters (got 301)"},
		},
		{
			name: "too many steps",
			edit: func(w *models.Workflow) {
				w.Steps = make([]models.WorkflowStep, workflow.MaxSteps+1)
			},
			want: []string{"steps: at most 500 steps (got 501)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := ok
			w.Steps = append([]models.WorkflowStep(nil), ok.Steps...)
			tt.edit(&w)
			err := workflow.Validate(w)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate returned no error")
			}
			if code := models.ErrorCodeOf(err); code != models.CodeInvalid {
				t.Errorf("code %q, want %q", code, models.CodeInvalid)
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("message lines:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestExampleWorkflows(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../configs/workflows/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no example workflows in ../../configs/workflows")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if w, err := workflow.Parse(filepath.Base(f), src); err == nil {
				t.Errorf("parsed without a project (%q): the examples leave it to --project", w.ProjectID)
			}
			src, err = workflow.SetProject(src, "p")
			if err != nil {
				t.Fatal(err)
			}
			w, err := workflow.Parse(filepath.Base(f), src)
			if err != nil {
				t.Fatalf("Parse with project p:\n%v", err)
			}
			if want := strings.TrimSuffix(filepath.Base(f), ".yaml"); w.Name != want {
				t.Errorf("name %q, want the file's name %q", w.Name, want)
			}
		})
	}
}

// mergeBomb returns a workflow whose step i merges a mapping that merges
// the mapping of step i-1 twice: 2^i merges.
func mergeBomb(levels int) string {
	var b strings.Builder
	b.WriteString("name: a\nproject: p\nsteps:\n  - name: s0\n    title: t\n    <<: &m0 {kind: k}\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "  - name: s%d\n    title: t\n    <<: &m%d {<<: [*m%d, *m%d]}\n", i, i, i-1, i-1)
	}
	return b.String()
}
