package models

import (
	"slices"
	"strings"
)

// TaskPatch is a person's edit of a task's content: nil fields are left
// alone. The edited task is validated as a new one would be.
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
}

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
		{"profile", p.Profile != nil},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// Apply returns t with the patch applied, validated like a new task. A patch
// that sets no field is refused.
func (p TaskPatch) Apply(t Task) (Task, error) {
	if len(p.Fields()) == 0 {
		return t, Errorf(CodeInvalid, "nothing to change: set one of title, description, priority, "+
			"acceptance_criteria, test_commands, verification_type, requires_approval, profile")
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
	return t, t.Validate()
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
