package workflow_test

import (
	"reflect"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

func TestGraph(t *testing.T) {
	t.Parallel()
	dep := func(names ...string) []models.StepDependency {
		var out []models.StepDependency
		for _, n := range names {
			out = append(out, models.StepDependency{Step: n})
		}
		return out
	}
	w := models.Workflow{Name: "g", ProjectID: "p", Steps: []models.WorkflowStep{
		{Name: "summary", Title: "S", DependsOn: dep("upgrade", "shards")},
		{Name: "discover", Title: "D"},
		{Name: "upgrade", Title: "U", DependsOn: dep("discover"), Foreach: "discover.outputs.modules"},
		{Name: "shards", Title: "Sh", DependsOn: dep("discover"), Parallel: &models.FanOut{From: "discover.outputs.n"}},
		{Name: "lint", Title: "L", Parallel: &models.FanOut{Count: 2}},
	}}
	if err := workflow.Validate(w); err != nil {
		t.Fatalf("Validate: %v", err)
	}

	t.Run("order", func(t *testing.T) {
		t.Parallel()
		want := []string{"discover", "upgrade", "shards", "summary", "lint"}
		if got := workflow.Order(w); !reflect.DeepEqual(got, want) {
			t.Errorf("Order = %q, want %q", got, want)
		}
		cyclic := models.Workflow{Steps: []models.WorkflowStep{
			{Name: "a", DependsOn: dep("b")}, {Name: "b", DependsOn: dep("a")}, {Name: "c", DependsOn: dep("zz")},
		}}
		if got, want := workflow.Order(cyclic), []string{"c", "a", "b"}; !reflect.DeepEqual(got, want) {
			t.Errorf("Order with a cycle = %q, want %q", got, want)
		}
	})

	t.Run("step by name", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			step  string
			found bool
		}{
			{step: "upgrade", found: true},
			{step: "lint", found: true},
			{step: "nope"},
		}
		for _, tt := range tests {
			s, ok := workflow.StepByName(w, tt.step)
			if ok != tt.found || (ok && s.Name != tt.step) {
				t.Errorf("StepByName(%s) = %q, %v; want found %v", tt.step, s.Name, ok, tt.found)
			}
		}
	})
}

func TestDeferredSteps(t *testing.T) {
	t.Parallel()
	two := 2
	for _, c := range []struct {
		step models.WorkflowStep
		want bool
	}{
		{models.WorkflowStep{Name: "a", Title: "A"}, false},
		{models.WorkflowStep{Name: "a", Title: "A {{index}}", Parallel: &models.FanOut{Count: two}}, false},
		{models.WorkflowStep{Name: "a", Title: "A", Parallel: &models.FanOut{From: "d.outputs.n"}}, true},
		{models.WorkflowStep{Name: "a", Title: "{{item}}", Foreach: "d.outputs.items"}, true},
		{models.WorkflowStep{Name: "a", Title: "A", Description: "uses {{ d.outputs.list }}"}, true},
		{models.WorkflowStep{Name: "a", Title: "{{run.id}}"}, false},
	} {
		if got := workflow.Deferred(c.step); got != c.want {
			t.Errorf("%+v: Deferred = %v, want %v", c.step, got, c.want)
		}
	}
}
