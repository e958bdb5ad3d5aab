package workflow

import (
	"fmt"

	"github.com/agentqueued/agentqueued/internal/models"
)

// CheckRules checks w's steps against rules, the rule set in force, as a
// task is checked at its creation: a step whose tasks a Capacity rule
// applies to (the rule is global or of w's project, and names no kind or
// the step's) must declare an expected_count, or its tasks would run
// uncounted; a fixed one must be no larger than the rule's max_capacity,
// or they could never start. A placeholder's value is known only when
// the task is made (see CheckTaskRules). Every problem is one line of
// the returned *models.Error (CodeInvalid), naming the step and the
// rule; nil when there is none.
func CheckRules(w models.Workflow, rules []models.Rule) error {
	var lines []string
	for i, st := range w.Steps {
		for j, r := range rules {
			if r.Type.Canonical() != models.RuleCapacity || !r.AppliesTo(w.ProjectID, st.Kind) {
				continue
			}
			path := fmt.Sprintf("steps[%d] (%s).expected_count", i, st.Name)
			rule := models.RuleName("rules", j, r)
			var problem string
			switch ec := st.ExpectedCount; {
			case ec == nil:
				problem = fmt.Sprintf("%s: required: the Capacity rule %s (max_capacity %d) applies to the "+
					"step's tasks (%s), and counts each one's expected_count; give the step one (a number, or a "+
					"placeholder such as \"{{<step>.outputs.<field>}}\")", path, rule, r.MaxCapacity, ruleScope(w.ProjectID, st.Kind))
			case ec.Template == "" && ec.Count > r.MaxCapacity:
				problem = fmt.Sprintf("%s: %d exceeds max_capacity %d of the Capacity rule %s: the step's "+
					"tasks could never start", path, ec.Count, r.MaxCapacity, rule)
			}
			if problem != "" {
				lines = append(lines, problem)
				break // one rule per step says what to do
			}
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return invalid(lines)
}

// ruleScope says which tasks a step makes, as rules see them.
func ruleScope(projectID, kind string) string {
	if kind == "" {
		return "project " + projectID + ", no kind"
	}
	return "project " + projectID + ", kind " + kind
}

// CheckTaskRules checks the tasks a step of a run makes, their
// expected_count known, against rules as CheckRules checks the step: it
// says what is wrong with the first that breaks one, naming the task and
// the rule, or returns nil.
func CheckTaskRules(tasks []models.BatchTask, projectID string, rules []models.Rule) error {
	for _, t := range tasks {
		if err := models.CheckCapacityRules("rules", rules, projectID, t.Kind, t.ExpectedCount); err != nil {
			return models.WrapError(models.CodeInvalid, err, "%s.%s", t.LocalID, models.ErrorMessageOf(err))
		}
	}
	return nil
}
