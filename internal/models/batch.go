package models

import (
	"slices"
	"strings"
	"time"
)

// MaxBatchSize caps the tasks of one batch.
const MaxBatchSize = 50_000

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
	LocalID            string            `json:"id,omitempty"`
	ProjectID          string            `json:"project_id,omitempty"`
	Title              string            `json:"title"`
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
	Dependencies       []BatchDependency `json:"dependencies,omitempty"`
	DedupeStrategy     []DedupeStrategy  `json:"dedupe_strategy,omitempty"`
	// Workflow places the task in a workflow run; only runs set it.
	Workflow *TaskPlace `json:"-"`
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
			return nil, Errorf(CodeInvalid, "status %q: not a task status or one of Pending, Running, Unfinished, Finished, Any", part)
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
