package models_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestTaskPatchApply(t *testing.T) {
	t.Parallel()
	base := validTask()
	base.TestCommands = []string{"go test ./..."}
	base.AcceptanceCriteria = []string{"it works"}
	tests := []struct {
		name    string
		patch   models.TaskPatch
		fields  []string
		check   func(models.Task) bool
		wantErr string
	}{
		{"title", models.TaskPatch{Title: ptr("new")}, []string{"title"},
			func(t models.Task) bool { return t.Title == "new" && t.Priority == 100 }, ""},
		{"every field", models.TaskPatch{Title: ptr("t"), Description: ptr("d"), Priority: ptr(0),
			AcceptanceCriteria: &[]string{"a"}, TestCommands: &[]string{"make"}, VerificationType: ptr(models.VerifyQAAgent),
			RequiresApproval: ptr(true), Profile: ptr("careful")},
			[]string{"title", "description", "priority", "acceptance_criteria", "test_commands", "verification_type",
				"requires_approval", "profile"},
			func(t models.Task) bool {
				return t.Title == "t" && t.Description == "d" && t.Priority == 0 && slices.Equal(t.AcceptanceCriteria, []string{"a"}) &&
					slices.Equal(t.TestCommands, []string{"make"}) && t.VerificationType == models.VerifyQAAgent && t.RequiresApproval &&
					t.Profile == "careful"
			}, ""},
		{"empty lists clear", models.TaskPatch{AcceptanceCriteria: &[]string{}, TestCommands: &[]string{}},
			[]string{"acceptance_criteria", "test_commands"},
			func(t models.Task) bool { return len(t.AcceptanceCriteria) == 0 && len(t.TestCommands) == 0 }, ""},
		{"nothing", models.TaskPatch{}, nil, nil, "nothing to change"},
		{"blank title", models.TaskPatch{Title: ptr(" ")}, []string{"title"}, nil, "title: required"},
		{"long title", models.TaskPatch{Title: ptr(strings.Repeat("x", models.MaxTitleLen+1))}, []string{"title"}, nil, "title: at most"},
		{"negative priority", models.TaskPatch{Priority: ptr(-3)}, []string{"priority"}, nil, "priority: must not be negative"},
		{"lower-case verification", models.TaskPatch{VerificationType: ptr(models.VerificationType("human"))},
			[]string{"verification_type"}, nil, "verification_type"},
		{"blank test command", models.TaskPatch{TestCommands: &[]string{""}}, []string{"test_commands"}, nil, "test_commands[0]"},
		{"too many criteria", models.TaskPatch{AcceptanceCriteria: ptr(make([]string, models.MaxListEntries+1))},
			[]string{"acceptance_criteria"}, nil, "acceptance_criteria: at most"},
		{"bad profile", models.TaskPatch{Profile: ptr("../etc")}, []string{"profile"}, nil, "profile"},
		{"routing fields", models.TaskPatch{Kind: ptr("ingest"), Metadata: &map[string]string{"a": "b"}, ExpectedCount: ptr(5),
			Timeout: ptr(models.Duration(time.Minute)), AgentType: ptr("codex")},
			[]string{"kind", "metadata", "expected_count", "timeout", "agent_type"},
			func(t models.Task) bool {
				return t.Kind == "ingest" && t.Metadata["a"] == "b" && t.ExpectedCount == 5 && t.Timeout == models.Duration(time.Minute) &&
					t.AgentType == "codex"
			}, ""},
		{"an empty map clears the metadata", models.TaskPatch{Metadata: &map[string]string{}}, []string{"metadata"},
			func(t models.Task) bool { return t.Metadata == nil }, ""},
		{"unknown agent type", models.TaskPatch{AgentType: ptr("gpt")}, []string{"agent_type"}, nil, `agent_type: "gpt" is not an agent type`},
		{"timeout too long", models.TaskPatch{Timeout: ptr(models.Duration(models.MaxTaskTimeout + time.Second))}, []string{"timeout"}, nil,
			"timeout: must be 0 (none) or between"},
		{"expected_count too large", models.TaskPatch{ExpectedCount: ptr(models.MaxExpectedCount + 1)}, []string{"expected_count"}, nil,
			"expected_count: at most"},
		{"metadata key of two lines", models.TaskPatch{Metadata: &map[string]string{"a\nb": "v"}}, []string{"metadata"}, nil, "metadata key"},
		{"kind too long", models.TaskPatch{Kind: ptr(strings.Repeat("k", models.MaxKindLen+1))}, []string{"kind"}, nil, "kind: at most"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.patch.Fields(); !slices.Equal(got, tc.fields) {
				t.Errorf("Fields() = %v, want %v", got, tc.fields)
			}
			got, err := tc.patch.Apply(base)
			if tc.wantErr != "" {
				if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Apply: %v, want invalid %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(got) {
				t.Fatalf("Apply = %+v, %v", got, err)
			}
		})
	}
	// expected_count is checked against the task's own Capacity rules, as
	// at creation.
	capped := base
	capped.Rules = []models.Rule{{Type: models.RuleCapacity, MaxCapacity: 10}}
	capped.ExpectedCount = 5
	if _, err := (models.TaskPatch{ExpectedCount: ptr(11)}).Apply(capped); models.ErrorCodeOf(err) != models.CodeInvalid ||
		!strings.Contains(err.Error(), "expected_count: 11 exceeds max_capacity 10") {
		t.Errorf("expected_count over the task's own Capacity rule: %v", err)
	}
	if got, err := (models.TaskPatch{ExpectedCount: ptr(10)}).Apply(capped); err != nil || got.ExpectedCount != 10 {
		t.Errorf("expected_count within the task's own Capacity rule: %+v, %v", got, err)
	}
	// The patch's lists are copied, never shared with the caller's.
	list := []string{"a"}
	got, _ := models.TaskPatch{TestCommands: &list}.Apply(base)
	list[0] = "changed"
	if got.TestCommands[0] != "a" || base.TestCommands[0] != "go test ./..." {
		t.Errorf("lists shared: %v, base %v", got.TestCommands, base.TestCommands)
	}
}

func TestTaskPatchJSON(t *testing.T) {
	t.Parallel()
	var p models.TaskPatch
	if err := json.Unmarshal([]byte(`{"test_commands": [], "profile": "", "acceptance_criteria": null}`), &p); err != nil {
		t.Fatal(err)
	}
	// An empty list or string is a value to set; null is no change.
	if p.TestCommands == nil || len(*p.TestCommands) != 0 || p.Profile == nil || p.AcceptanceCriteria != nil {
		t.Fatalf("decoded %+v", p)
	}
}

func TestDependencyChangeValidate(t *testing.T) {
	t.Parallel()
	many := make([]string, models.MaxDependencyChanges+1)
	tests := []struct {
		name    string
		change  models.DependencyChange
		wantErr string
	}{
		{"add and remove", models.DependencyChange{Add: []models.BatchDependency{{ID: "bold-orbit"}}, Remove: []string{"calm-river"}}, ""},
		{"the same id in both lists", models.DependencyChange{Add: []models.BatchDependency{{ID: "bold-orbit"}}, Remove: []string{"bold-orbit"}}, ""},
		{"nothing", models.DependencyChange{}, "nothing to change"},
		{"empty id", models.DependencyChange{Add: []models.BatchDependency{{ID: ""}}}, "add[0]: id: required"},
		{"not a task id", models.DependencyChange{Remove: []string{"x", "Bad Id"}}, `remove[1]: "Bad Id" is not a task id`},
		{"twice", models.DependencyChange{Add: []models.BatchDependency{{ID: "a"}, {ID: "b"}, {ID: "a"}}}, `add[2]: "a" is already listed at add[0]`},
		{"too many", models.DependencyChange{Remove: many}, "at most"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.change.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate: %v, want invalid %q", err, tc.wantErr)
			}
		})
	}
}

func TestBudgetReportJSON(t *testing.T) {
	t.Parallel()
	r := models.BudgetReport{Window: models.Duration(90 * time.Minute), Projects: []models.ProjectBudget{{ProjectID: "web"}}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	// Unlimited budgets are null, not missing: a reader sees the field.
	for _, want := range []string{`"window":"1h30m0s"`, `"budget":null`, `"budget_limit":null`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	if got := r.Window.String(); got != "1h30m0s" {
		t.Errorf("Window.String() = %q", got)
	}
}
