package models

import (
	"maps"
	"slices"
	"strings"
)

// TaskPatch is a person's edit of a task's content and routing: nil fields
// are left alone. The edited task is validated as a new one would be (see
// Apply).
type TaskPatch struct {
	Title       *string `json:"title,omitempty"`
	Description *string `json:"description,omitempty"`
	Priority    *int    `json:"priority,omitempty"`
	// AcceptanceCriteria and TestCommands replace the lists as a whole; an
	// empty list clears them.
	AcceptanceCriteria *[]string         `json:"acceptance_criteria,omitempty"`
	TestCommands       *[]string         `json:"test_commands,omitempty"`
	VerificationType   *VerificationType `json:"verification_type,omitempty"`
	RequiresApproval   *bool             `json:"requires_approval,omitempty"`
	// Profile names a configured profile; an empty string clears it.
	Profile *string `json:"profile,omitempty"`
	// Kind groups the task for dedupe and rules; an empty string clears it.
	Kind *string `json:"kind,omitempty"`
	// Metadata replaces the task's metadata as a whole; an empty object
	// clears it.
	Metadata *map[string]string `json:"metadata,omitempty"`
	// ExpectedCount is how many items the task will process; 0 says none.
	ExpectedCount *int `json:"expected_count,omitempty"`
	// Timeout caps each run of the task; 0 removes the task's own cap.
	Timeout *Duration `json:"timeout,omitempty"`
	// AgentType routes the task to agents of that type; an empty string
	// lets any agent take it.
	AgentType *string `json:"agent_type,omitempty"`
	// RunnerLabels replaces the runner labels the task needs; an empty
	// list clears them.
	RunnerLabels *[]string `json:"runner_labels,omitempty"`
}

// taskPatchFields names every field a patch may set, in Fields' order.
const taskPatchFields = "title, description, priority, acceptance_criteria, test_commands, verification_type, " +
	"requires_approval, profile, kind, metadata, expected_count, timeout, agent_type, runner_labels"

// Fields names the fields the patch sets, in a fixed order.
func (p TaskPatch) Fields() []string {
	var out []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"title", p.Title != nil}, {"description", p.Description != nil}, {"priority", p.Priority != nil},
		{"acceptance_criteria", p.AcceptanceCriteria != nil}, {"test_commands", p.TestCommands != nil},
		{"verification_type", p.VerificationType != nil}, {"requires_approval", p.RequiresApproval != nil},
		{"profile", p.Profile != nil}, {"kind", p.Kind != nil}, {"metadata", p.Metadata != nil},
		{"expected_count", p.ExpectedCount != nil}, {"timeout", p.Timeout != nil}, {"agent_type", p.AgentType != nil},
		{"runner_labels", p.RunnerLabels != nil},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// Routing reports whether the patch sets a field that decides which agent
// may take the task or which rules count it: kind, metadata,
// expected_count, agent_type or runner_labels.
func (p TaskPatch) Routing() bool {
	return p.Kind != nil || p.Metadata != nil || p.ExpectedCount != nil || p.AgentType != nil || p.RunnerLabels != nil
}

// Apply returns t with the patch applied, validated like a new task (the
// same checks as creation: Task.Validate, and the task's own Capacity rules
// when expected_count changes). The rule set's Capacity rules are the
// store's to check. A patch that sets no field is refused.
func (p TaskPatch) Apply(t Task) (Task, error) {
	if len(p.Fields()) == 0 {
		return t, Errorf(CodeInvalid, "nothing to change: set one of %s", taskPatchFields)
	}
	if p.Title != nil {
		t.Title = *p.Title
	}
	if p.Description != nil {
		t.Description = *p.Description
	}
	if p.Priority != nil {
		t.Priority = *p.Priority
	}
	if p.AcceptanceCriteria != nil {
		t.AcceptanceCriteria = slices.Clone(*p.AcceptanceCriteria)
	}
	if p.TestCommands != nil {
		t.TestCommands = slices.Clone(*p.TestCommands)
	}
	if p.VerificationType != nil {
		t.VerificationType = *p.VerificationType
	}
	if p.RequiresApproval != nil {
		t.RequiresApproval = *p.RequiresApproval
	}
	if p.Profile != nil {
		t.Profile = *p.Profile
	}
	if p.Kind != nil {
		t.Kind = *p.Kind
	}
	if p.Metadata != nil {
		t.Metadata = maps.Clone(*p.Metadata)
		if len(t.Metadata) == 0 {
			t.Metadata = nil
		}
	}
	if p.ExpectedCount != nil {
		t.ExpectedCount = *p.ExpectedCount
	}
	if p.Timeout != nil {
		t.Timeout = *p.Timeout
	}
	if p.AgentType != nil {
		t.AgentType = *p.AgentType
	}
	if p.RunnerLabels != nil {
		t.RunnerLabels = slices.Clone(*p.RunnerLabels)
		if len(t.RunnerLabels) == 0 {
			t.RunnerLabels = nil
		}
	}
	if err := t.Validate(); err != nil {
		return t, err
	}
	if p.ExpectedCount != nil {
		return t, CheckOwnCapacityRules(t.Rules, t.ExpectedCount)
	}
	return t, nil
}

// MaxDependencyChanges caps the entries of each list of a DependencyChange.
const MaxDependencyChanges = MaxDependencies

// DependencyChange adds and removes a task's dependencies in one
// transaction. Removals apply first, so an id in both lists replaces its
// edge (to change requires_success).
type DependencyChange struct {
	// Add lists the upstreams to depend on; requires_success defaults to true.
	Add []BatchDependency `json:"add,omitempty"`
	// Remove lists the upstreams to stop depending on.
	Remove []string `json:"remove,omitempty"`
}

// Validate checks the change's shape, naming the bad entry: at least one
// entry, task ids only, none listed twice in the same list.
func (c DependencyChange) Validate() error {
	if len(c.Add) == 0 && len(c.Remove) == 0 {
		return Errorf(CodeInvalid, "nothing to change: list dependencies to add or remove")
	}
	if len(c.Add) > MaxDependencyChanges || len(c.Remove) > MaxDependencyChanges {
		return Errorf(CodeInvalid, "at most %d dependencies to add and %d to remove", MaxDependencyChanges, MaxDependencyChanges)
	}
	ids := make([]string, len(c.Add))
	for i, d := range c.Add {
		ids[i] = d.ID
	}
	if err := checkTaskIDs("add", ids); err != nil {
		return err
	}
	return checkTaskIDs("remove", c.Remove)
}

func checkTaskIDs(list string, ids []string) error {
	seen := make(map[string]int, len(ids))
	for i, id := range ids {
		switch {
		case strings.TrimSpace(id) == "":
			return Errorf(CodeInvalid, "%s[%d]: id: required", list, i)
		case !ValidTaskID(id):
			return Errorf(CodeInvalid, "%s[%d]: %q is not a task id", list, i, cutRunes(id, MaxTaskIDLen))
		}
		if j, dup := seen[id]; dup {
			return Errorf(CodeInvalid, "%s[%d]: %s is already listed at %s[%d]", list, i, Quote(id), list, j)
		}
		seen[id] = i
	}
	return nil
}

// DependencyResult says what a dependency change did.
type DependencyResult struct {
	// Task is the task after the change (its status may have moved).
	Task Task `json:"task"`
	// Dependencies are the task's edges after the change.
	Dependencies []Dependency `json:"dependencies"`
	// Added lists the upstreams whose edges were created or replaced;
	// Removed those whose edges were deleted (and not replaced).
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	// Promoted, Blocked and Reopened list the tasks the change moved
	// (DEPS_MET, UPSTREAM_FAILED, UPSTREAM_REOPENED), the task itself
	// included.
	Promoted []string `json:"promoted,omitempty"`
	Blocked  []string `json:"blocked,omitempty"`
	Reopened []string `json:"reopened,omitempty"`
}
