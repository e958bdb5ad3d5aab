package workflow_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// expectedDoc is a workflow whose steps declare expected_count each way.
const expectedDoc = `name: ingest
project: web
inputs:
  - name: batch
    default: "50"
steps:
  - name: discover
    title: Find feeds
    kind: ingest
    expected_count: 1
  - name: load
    title: "Load {{item.url}}"
    kind: ingest
    depends_on: [discover]
    foreach: discover.outputs.feeds
    expected_count: "{{item.rows}}"
  - name: index
    title: Index
    kind: ingest
    depends_on: [discover]
    expected_count: "{{ discover.outputs.total }}"
  - name: sample
    title: Sample
    kind: ingest
    expected_count: "{{inputs.batch}}"
  - name: quoted
    title: Quoted
    expected_count: "7"
`

// TestStepsDeclareExpectedCount: a step's expected_count is read as a
// number or a placeholder, kept through the stored JSON, makes a step
// that reads an upstream output wait for it, and is each task's
// expected_count once filled.
func TestStepsDeclareExpectedCount(t *testing.T) {
	t.Parallel()
	w, err := workflow.Parse("w.yaml", []byte(expectedDoc))
	if err != nil {
		t.Fatal(err)
	}
	want := []*models.StepCount{{Count: 1}, {Template: "{{item.rows}}"}, {Template: "{{ discover.outputs.total }}"},
		{Template: "{{inputs.batch}}"}, {Count: 7}}
	for i, st := range w.Steps {
		if !reflect.DeepEqual(st.ExpectedCount, want[i]) {
			t.Errorf("steps[%d].expected_count = %+v, want %+v", i, st.ExpectedCount, want[i])
		}
	}
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"expected_count":1}`) || !strings.Contains(string(b), `"expected_count":"{{item.rows}}"`) {
		t.Errorf("stored JSON: %s", b)
	}
	var back models.Workflow
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back.Steps, w.Steps) {
		t.Fatalf("JSON round trip: %v\n got %+v\nwant %+v", err, back.Steps, w.Steps)
	}
	if err := json.Unmarshal([]byte(`{"steps":[{"expected_count":true}]}`), &back); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Errorf("expected_count true decoded: %v", err)
	}
	for i, deferred := range []bool{false, true, true, false, false} {
		if got := workflow.Deferred(w.Steps[i]); got != deferred {
			t.Errorf("Deferred(%s) = %v, want %v", w.Steps[i].Name, got, deferred)
		}
	}

	outputs := map[string]json.RawMessage{"discover": json.RawMessage(`{"total": 30, "feeds": [{"url": "a", "rows": 12}]}`)}
	inputs := map[string]string{"batch": "50"}
	for _, tc := range []struct {
		step  int
		items []json.RawMessage
		want  int
	}{
		{0, nil, 1}, {1, raws(`{"url": "a", "rows": 12}`), 12}, {2, nil, 30}, {3, nil, 50}, {4, nil, 7},
	} {
		count := max(len(tc.items), 1)
		tasks, err := workflow.StepTasks(w, w.Steps[tc.step], "ingest-1", inputs, tc.items, count, outputs)
		if err != nil || len(tasks) != 1 || tasks[0].ExpectedCount != tc.want {
			t.Errorf("tasks of %s: %+v, %v; want expected_count %d", w.Steps[tc.step].Name, tasks, err, tc.want)
		}
	}
}

// TestExpectedCountThatCannotBeFilled: a placeholder whose value is not a
// whole number in range is an error naming the task and the value.
func TestExpectedCountThatCannotBeFilled(t *testing.T) {
	t.Parallel()
	w := models.Workflow{Name: "ingest", ProjectID: "web"}
	step := models.WorkflowStep{Name: "load", Title: "Load", Foreach: "discover.outputs.feeds",
		ExpectedCount: &models.StepCount{Template: "{{item.rows}}"}}
	for _, tc := range []struct{ item, want string }{
		{`{"rows": "many"}`, `load[0].expected_count: {{item.rows}} is not a whole number (it is "many")`},
		{`{"rows": 1.5}`, `load[0].expected_count: {{item.rows}} is not a whole number (it is "1.5")`},
		{`{"rows": -1}`, "load[0].expected_count: {{item.rows}} is -1 (must be between 0 and 1000000000)"},
		{`{"rows": 1e12}`, "load[0].expected_count: {{item.rows}} is 1000000000000 (must be between 0 and 1000000000)"},
		{`{"url": "a"}`, `load[0].expected_count: {{item.rows}}: the item has no field "rows"`},
	} {
		_, err := workflow.StepTasks(w, step, "ingest-1", nil, raws(tc.item), 1, nil)
		if err == nil || err.Error() != tc.want || models.ErrorCodeOf(err) != models.CodeInvalid {
			t.Errorf("item %s: %v, want %q", tc.item, err, tc.want)
		}
	}
}

// TestParseInvalidExpectedCount: a bad expected_count is a problem of the
// document, at its line, saying what is allowed.
func TestParseInvalidExpectedCount(t *testing.T) {
	t.Parallel()
	head := "name: x\nproject: web\nsteps:\n  - name: a\n    title: A\n  - name: b\n    title: B\n    depends_on: [a]\n    expected_count: "
	for _, tc := range []struct{ value, want string }{
		{"{{a.outputs.n}}", `w.yaml:9:21: steps[1].expected_count: a placeholder is written in quotes: "{{<step>.outputs.<field>}}"`},
		{"0", "w.yaml:9:21: steps[1].expected_count: must be between 1 and 1000000000 (got 0)"},
		{"-3", "w.yaml:9:21: steps[1].expected_count: must be between 1 and 1000000000 (got -3)"},
		{"[1]", `w.yaml:9:21: steps[1].expected_count: must be a whole number (1-1000000000) or one placeholder such as "{{<step>.outputs.<field>}}"`},
		{`"about {{a.outputs.n}}"`, `w.yaml:9:21: steps[1].expected_count: "about {{a.outputs.n}}" is neither a whole number nor one placeholder such as {{<step>.outputs.<field>}}`},
		{`"{{run.id}}"`, "w.yaml:9:21: steps[1].expected_count: {{run.id}}: not a number (allowed here: {{a.outputs.<field>}})"},
		{`"{{c.outputs.n}}"`, `w.yaml:9:21: steps[1].expected_count: {{c.outputs.n}}: unknown step "c" (steps: a, b)`},
		{`"{{item.n}}"`, "w.yaml:9:21: steps[1].expected_count: {{item.n}}: only in steps with foreach"},
		{`"{{size}}"`, "w.yaml:9:21: steps[1].expected_count: {{size}}: unknown placeholder; allowed here: {{a.outputs.<field>}}"},
	} {
		_, err := workflow.Parse("w.yaml", []byte(head+tc.value+"\n"))
		if err == nil || err.Error() != tc.want {
			t.Errorf("expected_count: %s: %v\nwant %s", tc.value, err, tc.want)
		}
	}
}

// TestCheckRules: a step whose tasks a Capacity rule applies to must
// declare an expected_count, and a fixed one within the rule's
// max_capacity; the problem names the step and the rule.
func TestCheckRules(t *testing.T) {
	t.Parallel()
	capRule := func(id, project, kind string, max int) models.Rule {
		return models.Rule{ID: id, ProjectID: project, Type: models.RuleCapacity,
			Matcher: models.RuleMatcher{Kind: kind, Status: "Running"}, MaxCapacity: max}
	}
	conc := models.Rule{ID: "two", Type: models.RuleConcurrency, Matcher: models.RuleMatcher{Kind: "ingest"}, MaxConcurrency: 2}
	step := func(name, kind string, ec *models.StepCount) models.WorkflowStep {
		return models.WorkflowStep{Name: name, Title: name, Kind: kind, ExpectedCount: ec}
	}
	w := models.Workflow{Name: "ingest", ProjectID: "web", Steps: []models.WorkflowStep{
		step("plain", "", nil), step("load", "ingest", nil), step("fixed", "ingest", &models.StepCount{Count: 500}),
		step("filled", "ingest", &models.StepCount{Template: "{{inputs.n}}"}),
	}}
	tests := []struct {
		name  string
		rules []models.Rule
		want  []string
	}{
		{name: "no rules"},
		{name: "a concurrency rule", rules: []models.Rule{conc}},
		{name: "another kind", rules: []models.Rule{capRule("cap", "", "build", 10)}},
		{name: "another project", rules: []models.Rule{capRule("cap", "api", "ingest", 1000)}},
		{name: "the kind, roomy", rules: []models.Rule{conc, capRule("cap", "web", "ingest", 1000)}, want: []string{
			`steps[1] (load).expected_count: required: the Capacity rule rules[1] (cap) (max_capacity 1000) applies to the step's tasks (project web, kind ingest), and counts each one's expected_count; give the step one (a number, or a placeholder such as "{{<step>.outputs.<field>}}")`,
		}},
		{name: "the kind, tight", rules: []models.Rule{capRule("cap", "", "ingest", 100)}, want: []string{
			`steps[1] (load).expected_count: required: the Capacity rule rules[0] (cap) (max_capacity 100) applies to the step's tasks (project web, kind ingest), and counts each one's expected_count; give the step one (a number, or a placeholder such as "{{<step>.outputs.<field>}}")`,
			"steps[2] (fixed).expected_count: 500 exceeds max_capacity 100 of the Capacity rule rules[0] (cap): the step's tasks could never start",
		}},
		{name: "every kind, by fields", rules: []models.Rule{{Type: models.RuleCapacity,
			Matcher: models.RuleMatcher{Fields: []string{"feed"}}, MaxCapacity: 1000}}, want: []string{
			`steps[0] (plain).expected_count: required: the Capacity rule rules[0] (max_capacity 1000) applies to the step's tasks (project web, no kind), and counts each one's expected_count; give the step one (a number, or a placeholder such as "{{<step>.outputs.<field>}}")`,
			`steps[1] (load).expected_count: required: the Capacity rule rules[0] (max_capacity 1000) applies to the step's tasks (project web, kind ingest), and counts each one's expected_count; give the step one (a number, or a placeholder such as "{{<step>.outputs.<field>}}")`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := workflow.CheckRules(w, tt.rules)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("CheckRules: %v", err)
				}
				return
			}
			if models.ErrorCodeOf(err) != models.CodeInvalid {
				t.Fatalf("CheckRules: %v, want invalid", err)
			}
			if got := strings.Split(models.ErrorMessageOf(err), "\n"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("CheckRules lines:\n got %q\nwant %q", got, tt.want)
			}
		})
	}

	tasks := []models.BatchTask{{LocalID: "load[0]", Kind: "ingest", ExpectedCount: 10}, {LocalID: "load[1]", Kind: "ingest", ExpectedCount: 200}}
	err := workflow.CheckTaskRules(tasks, "web", []models.Rule{capRule("cap", "", "ingest", 100)})
	if want := "load[1].expected_count: 200 exceeds max_capacity 100 of the Capacity rule rules[0] (cap): the task could never start"; err == nil || err.Error() != want {
		t.Errorf("CheckTaskRules: %v, want %q", err, want)
	}
	if err := workflow.CheckTaskRules(tasks[:1], "web", []models.Rule{capRule("cap", "", "ingest", 100)}); err != nil {
		t.Errorf("CheckTaskRules within the rule: %v", err)
	}
}
