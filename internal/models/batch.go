package models

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// TaskBatch creates many tasks all-or-nothing. Entries refer to each other by
// their local ids and to existing tasks by task id (a local id wins).
type TaskBatch struct {
	// ProjectID applies to entries that name none.
	ProjectID string `json:"project_id,omitempty"`
	// CreatedBy applies to entries that name none.
	CreatedBy string      `json:"created_by,omitempty"`
	Tasks     []BatchTask `json:"tasks"`
}

// BatchTask is one entry of a batch.
type BatchTask struct {
	// LocalID names the entry inside the batch ("id" in JSON).
	LocalID   string `json:"id,omitempty"`
	ProjectID string `json:"project_id,omitempty"`
	Title     string `json:"title"`
	// Name is the specification's word for the title: an entry may give
	// either, or both when they are equal (see TaskTitle).
	Name               string            `json:"name,omitempty"`
	Description        string            `json:"description,omitempty"`
	Priority           *int              `json:"priority,omitempty"`
	VerificationType   VerificationType  `json:"verification_type,omitempty"`
	MaxRetries         *int              `json:"max_retries,omitempty"`
	ParentTaskID       string            `json:"parent_task_id,omitempty"`
	RepoID             string            `json:"repo_id,omitempty"`
	RequiresApproval   bool              `json:"requires_approval,omitempty"`
	PlanSource         string            `json:"plan_source,omitempty"`
	IsPlanSubtask      bool              `json:"is_plan_subtask,omitempty"`
	Kind               string            `json:"kind,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	CreatedBy          string            `json:"created_by,omitempty"`
	NotBefore          *time.Time        `json:"not_before,omitempty"`
	ExpectedCount      int               `json:"expected_count,omitempty"`
	AcceptanceCriteria []string          `json:"acceptance_criteria,omitempty"`
	TestCommands       []string          `json:"test_commands,omitempty"`
	Profile            string            `json:"profile,omitempty"`
	// Timeout caps each run of the task (Task.Timeout); 0 is none.
	Timeout Duration `json:"timeout,omitempty"`
	// AgentType routes the task to agents of that type; empty: any agent.
	AgentType string `json:"agent_type,omitempty"`
	// RunnerLabels limits the task to agents on runners with these labels
	// (Task.RunnerLabels).
	RunnerLabels   []string          `json:"runner_labels,omitempty"`
	Dependencies   []BatchDependency `json:"dependencies,omitempty"`
	DedupeStrategy []DedupeStrategy  `json:"dedupe_strategy,omitempty"`
	// Rules are the entry's own scheduling rules (seed Core Concepts): the
	// task never starts while starting it would exceed one of them. They
	// count the tasks of the task's project.
	Rules []Rule `json:"rules,omitempty"`
	// Workflow places the task in a workflow run; only runs set it.
	Workflow *TaskPlace `json:"-"`
}

// MaxDedupeStrategies caps the dedupe strategies of one batch entry.
const MaxDedupeStrategies = 20

// Validate checks the batch's shape and every entry's fields, naming the
// entry ("tasks[i] (local-id)") and the field: 1 to MaxBatchSize entries,
// local ids of one line, unique, each entry valid as a new task, at most
// MaxDependencies dependencies naming an id each, and dedupe strategies
// that resolve. References between entries, to existing tasks and the
// graph they make are the store's to check.
func (b TaskBatch) Validate() error {
	switch {
	case len(b.Tasks) == 0:
		return Errorf(CodeInvalid, "tasks: the batch is empty")
	case len(b.Tasks) > MaxBatchSize:
		return Errorf(CodeInvalid, "tasks: at most %d tasks per batch (got %d)", MaxBatchSize, len(b.Tasks))
	case b.ProjectID != "" && !ValidID(b.ProjectID):
		return Errorf(CodeInvalid, "project_id: %q is not a project id", cutRunes(b.ProjectID, 80))
	}
	if err := CheckLine("created_by", b.CreatedBy, MaxActorLen); err != nil {
		return err
	}
	locals := make(map[string]int, len(b.Tasks))
	for i, bt := range b.Tasks {
		// The entry's name is formatted only for an error: a batch has
		// up to MaxBatchSize entries.
		if CheckLine("id", bt.LocalID, MaxLocalIDLen) != nil {
			return CheckLine(fmt.Sprintf("tasks[%d].id", i), bt.LocalID, MaxLocalIDLen)
		}
		if bt.LocalID != "" {
			if j, dup := locals[bt.LocalID]; dup {
				return Errorf(CodeInvalid, "%s: id %s is already used by tasks[%d]", batchEntryName(i, bt.LocalID), Quote(bt.LocalID), j)
			}
			locals[bt.LocalID] = i
		}
		if err := bt.Validate(); err != nil {
			return WrapError(CodeInvalid, err, "%s: %s", batchEntryName(i, bt.LocalID), ErrorMessageOf(err))
		}
	}
	return nil
}

// batchEntryName names the i-th entry of a batch in an error: "tasks[3]",
// or "tasks[3] (build)" when it has a local id.
func batchEntryName(i int, localID string) string {
	if localID != "" {
		return fmt.Sprintf("tasks[%d] (%s)", i, localID)
	}
	return fmt.Sprintf("tasks[%d]", i)
}

// TaskTitle is the entry's title: Title, else Name.
func (bt BatchTask) TaskTitle() string {
	if bt.Title != "" {
		return bt.Title
	}
	return bt.Name
}

// Task is the task the entry makes in a batch whose project and creator
// are projectID and createdBy (each applies when the entry names none):
// the entry's fields, DefaultPriority and DefaultMaxRetries when it gives
// none, its place in a workflow run, and the defaults of a new task
// (ApplyDefaults). It is the one conversion of a batch entry into a task:
// validating an entry and creating it both go through it.
func (bt BatchTask) Task(projectID, createdBy string) Task {
	t := Task{
		ProjectID: bt.ProjectID, Title: bt.TaskTitle(), Description: bt.Description,
		Priority: DefaultPriority, VerificationType: bt.VerificationType, MaxRetries: DefaultMaxRetries,
		RequiresApproval: bt.RequiresApproval, IsPlanSubtask: bt.IsPlanSubtask, Kind: bt.Kind, Metadata: bt.Metadata,
		CreatedBy: bt.CreatedBy, NotBefore: bt.NotBefore, ExpectedCount: bt.ExpectedCount,
		AcceptanceCriteria: bt.AcceptanceCriteria, TestCommands: bt.TestCommands, Profile: bt.Profile,
		Timeout: bt.Timeout, AgentType: bt.AgentType, RunnerLabels: bt.RunnerLabels,
	}
	if t.ProjectID == "" {
		t.ProjectID = projectID
	}
	if t.CreatedBy == "" {
		t.CreatedBy = createdBy
	}
	if w := bt.Workflow; w != nil {
		t.RunID, t.StepName, t.ParallelIndex, t.ParallelCount, t.StepConcurrency = w.RunID, w.Step, w.Index, w.Count, w.Concurrency
	}
	if bt.Priority != nil {
		t.Priority = *bt.Priority
	}
	if bt.MaxRetries != nil {
		t.MaxRetries = *bt.MaxRetries
	}
	// Pointers to copies, not into bt: a pointer into bt would move every
	// entry converted to the heap, set or not. Each copy is made only when
	// the field is set (declared in the if's own condition, it would be
	// allocated either way).
	if bt.ParentTaskID != "" {
		v := bt.ParentTaskID
		t.ParentTaskID = &v
	}
	if bt.RepoID != "" {
		v := bt.RepoID
		t.RepoID = &v
	}
	if bt.PlanSource != "" {
		v := bt.PlanSource
		t.PlanSource = &v
	}
	t.ApplyDefaults()
	return t
}

// Validate checks one entry on its own, naming the field: its fields as a
// new task's (with the defaults a batch applies), at most MaxDependencies
// dependencies naming an id each, and at most MaxDedupeStrategies dedupe
// strategies that resolve. Its local id and references are checked with
// the batch (TaskBatch.Validate, the store).
func (bt BatchTask) Validate() error {
	if bt.ProjectID != "" && !ValidID(bt.ProjectID) {
		return Errorf(CodeInvalid, "project_id: %q is not a project id", cutRunes(bt.ProjectID, 80))
	}
	if bt.Name != "" && bt.Title != "" && bt.Name != bt.Title {
		return Errorf(CodeInvalid, "name and title: both given and different (name %s, title %s): give one",
			Quote(bt.Name), Quote(bt.Title))
	}
	t := bt.Task("", "")
	if err := t.validateContent(); err != nil {
		return err
	}
	if len(bt.Dependencies) > MaxDependencies {
		return Errorf(CodeInvalid, "dependencies: at most %d (got %d)", MaxDependencies, len(bt.Dependencies))
	}
	for j, d := range bt.Dependencies {
		// The dependency's name is formatted only for an error: a batch
		// has up to MaxBatchSize entries of up to MaxDependencies each.
		if strings.TrimSpace(d.ID) == "" {
			return Errorf(CodeInvalid, "dependencies[%d]: id: required", j)
		}
		if CheckLine("id", d.ID, MaxLocalIDLen) != nil {
			return CheckLine(fmt.Sprintf("dependencies[%d].id", j), d.ID, MaxLocalIDLen)
		}
	}
	if err := ValidateRules("rules", bt.Rules); err != nil {
		return err
	}
	if err := CheckOwnCapacityRules(bt.Rules, bt.ExpectedCount); err != nil {
		return err
	}
	if len(bt.DedupeStrategy) > MaxDedupeStrategies {
		return Errorf(CodeInvalid, "dedupe_strategy: at most %d strategies (got %d)", MaxDedupeStrategies, len(bt.DedupeStrategy))
	}
	for j, st := range bt.DedupeStrategy {
		if err := st.validate(fmt.Sprintf("dedupe_strategy[%d]", j)); err != nil {
			return err
		}
	}
	return nil
}

// validate checks a strategy's fields; name is its place, for messages.
func (st DedupeStrategy) validate(name string) error {
	if err := CheckLine(name+".kind", st.Kind, MaxKindLen); err != nil {
		return err
	}
	if err := CheckLine(name+".status", st.Status, MaxShortLen); err != nil {
		return err
	}
	if _, err := ResolveStatusSet(st.Status); err != nil {
		return WrapError(CodeInvalid, err, "%s: %s", name, ErrorMessageOf(err))
	}
	return checkList(name+".fields", st.Fields, MaxMetadataEntries, func(f, v string) error {
		if v == "" {
			return Errorf(CodeInvalid, "%s: a metadata key is required", f)
		}
		return CheckLine(f, v, MaxMetadataKeyLen)
	})
}

// TaskPlace is a task's place in a workflow run.
type TaskPlace struct {
	RunID        string
	Step         string
	Index, Count int
	Concurrency  int
}

// BatchDependency is one edge of a batch entry: the entry depends on ID.
type BatchDependency struct {
	// ID is a local id of the batch or an existing task id.
	ID string `json:"id"`
	// RequiresSuccess defaults to true: only the upstream's COMPLETED satisfies it.
	RequiresSuccess *bool `json:"requires_success,omitempty"`
}

// Required reports the edge's requires_success, true when unset.
func (d BatchDependency) Required() bool { return d.RequiresSuccess == nil || *d.RequiresSuccess }

// DedupeStrategy skips creating an entry when a task of Kind (default: the
// entry's kind) in a status of Status (default "Unfinished") exists in the
// same project whose metadata equals the entry's on every field of Fields.
type DedupeStrategy struct {
	Kind   string   `json:"kind,omitempty"`
	Status string   `json:"status,omitempty"`
	Fields []string `json:"fields,omitempty"`
}

// Status groups usable in dedupe strategies and rules besides the eleven
// statuses themselves.
var statusGroups = map[string][]TaskStatus{
	"pending":    {StatusDefined, StatusReady, StatusPaused, StatusFailed},
	"running":    {StatusAssigned, StatusInProgress, StatusWaitingInput, StatusVerifying, StatusAwaitingApproval},
	"unfinished": {StatusDefined, StatusReady, StatusPaused, StatusFailed, StatusAssigned, StatusInProgress, StatusWaitingInput, StatusVerifying, StatusAwaitingApproval},
	"finished":   {StatusCompleted, StatusBlocked},
	"any":        TaskStatuses,
}

// ResolveStatusSet turns a status name or group into statuses. Groups are
// case-insensitive: Pending (DEFINED, READY, PAUSED, FAILED), Running
// (ASSIGNED, IN_PROGRESS, WAITING_INPUT, VERIFYING, AWAITING_APPROVAL),
// Unfinished (both; the default for ""), Finished (COMPLETED, BLOCKED), Any.
// Several names may be joined with '|'.
func ResolveStatusSet(s string) ([]TaskStatus, error) {
	if strings.TrimSpace(s) == "" {
		s = "unfinished"
	}
	var out []TaskStatus
	for part := range strings.SplitSeq(s, "|") {
		part = strings.TrimSpace(part)
		if g, ok := statusGroups[strings.ToLower(part)]; ok {
			out = append(out, g...)
			continue
		}
		st := TaskStatus(strings.ToUpper(part))
		if !st.Valid() {
			return nil, Errorf(CodeInvalid, "status %s: not a task status or one of Pending, Running, Unfinished, Finished, Any", Quote(part))
		}
		out = append(out, st)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// BatchResult answers one batch entry, in the batch's order.
type BatchResult struct {
	LocalID string     `json:"id,omitempty"`
	TaskID  string     `json:"task_id"`
	Status  TaskStatus `json:"status"`
	// Skipped is true when a dedupe strategy matched TaskID, an existing task.
	Skipped bool `json:"skipped,omitempty"`
}
