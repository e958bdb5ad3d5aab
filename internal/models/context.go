package models

import (
	"encoding/json"
	"strconv"
)

// TaskContext is everything an agent is told about a task, assembled at
// dispatch; the prompt is rendered from it by one template.
type TaskContext struct {
	TaskID             string   `json:"task_id"`
	Title              string   `json:"title"`
	Description        string   `json:"description,omitempty"`
	AcceptanceCriteria []string `json:"acceptance_criteria,omitempty"`
	TestCommands       []string `json:"test_commands,omitempty"`
	// CheckoutPath is the run's working directory; BranchName the task
	// branch checked out there ("" without a repo); DefaultBranch the
	// branch the work is merged into.
	CheckoutPath  string `json:"checkout_path"`
	BranchName    string `json:"branch_name,omitempty"`
	DefaultBranch string `json:"default_branch,omitempty"`
	// Attempt counts the task's runs, this one included.
	Attempt int `json:"attempt"`
	// AttachedContext is what earlier work left for this attempt.
	AttachedContext AttachedContext `json:"attached_context"`
	// Review, when set, makes this a review run of another task's work.
	Review *ReviewContext `json:"review,omitempty"`
	// MCPServers and Tools are what the agent may use.
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`
	Tools      []string    `json:"tools,omitempty"`
	// AgentCommand is the shell command the agent reports with (the
	// daemon's binary by its absolute path, then "agent"); empty when the
	// agent's CLI cannot run it, and the prompt then offers no shell.
	AgentCommand string `json:"agent_command,omitempty"`
	// PlanPaths are the files where a plan may be written instead of proposed.
	PlanPaths []string `json:"plan_paths,omitempty"`
	// Run places a task of a workflow run; nil for any other task.
	Run *RunPlace `json:"run,omitempty"`
}

// RunPlace is where a task of a workflow run stands in it: the run, its
// workflow and the task's step, and when the step fans out the task's
// index among the step's Count tasks and, for foreach, its item.
type RunPlace struct {
	RunID    string `json:"run_id"`
	Workflow string `json:"workflow"`
	Step     string `json:"step"`
	// FanOut is set when the step fans out (parallel or foreach): Index
	// (from 0) and Count apply.
	FanOut bool `json:"fan_out,omitempty"`
	Index  int  `json:"index,omitempty"`
	Count  int  `json:"count,omitempty"`
	// Item is the task's item of a foreach (as its metadata "item" keeps
	// it: a string as it is, anything else as JSON); HasItem says there is
	// one.
	Item    string `json:"item,omitempty"`
	HasItem bool   `json:"has_item,omitempty"`
}

// RunPlaceOf returns the place of a task in its workflow run, read from
// its run fields and the metadata the run gave it; nil when the task is
// not part of a run.
func RunPlaceOf(t Task) *RunPlace {
	if t.RunID == "" {
		return nil
	}
	p := &RunPlace{RunID: t.RunID, Workflow: t.Metadata["workflow"], Step: t.StepName}
	if t.ParallelCount > 0 {
		p.FanOut, p.Index, p.Count = true, t.ParallelIndex, t.ParallelCount
	}
	p.Item, p.HasItem = t.Metadata["item"]
	return p
}

// Env returns the run context as the agent's environment: AQ_RUN_ID,
// AQ_WORKFLOW and AQ_STEP, then AQ_PARALLEL_INDEX and AQ_PARALLEL_COUNT
// when the step fans out and AQ_ITEM when it has an item; nil for a nil
// place.
func (p *RunPlace) Env() map[string]string {
	if p == nil {
		return nil
	}
	env := map[string]string{"AQ_RUN_ID": p.RunID, "AQ_WORKFLOW": p.Workflow, "AQ_STEP": p.Step}
	if p.FanOut {
		env["AQ_PARALLEL_INDEX"], env["AQ_PARALLEL_COUNT"] = strconv.Itoa(p.Index), strconv.Itoa(p.Count)
	}
	if p.HasItem {
		env["AQ_ITEM"] = p.Item
	}
	return env
}

// AttachedContext is what upstream tasks, earlier attempts and people left
// for a task's next run.
type AttachedContext struct {
	// Upstream holds the results of the completed tasks this one depends on.
	Upstream []UpstreamResult `json:"upstream,omitempty"`
	// PreviousFailures are the reasons earlier attempts failed, oldest first.
	PreviousFailures []string `json:"previous_failures,omitempty"`
	// Conflicts lists files left in conflict in the checkout: the default
	// branch moved under the task branch and the agent must resolve them.
	Conflicts []string `json:"conflicts,omitempty"`
	// Answers are the human answers to the task's earlier questions.
	Answers []Answer `json:"answers,omitempty"`
	// Feedback is what reviewers (a QA agent, a human) said of earlier attempts.
	Feedback []string `json:"feedback,omitempty"`
	// Rescued names a branch where uncommitted work of a killed run was kept.
	Rescued string `json:"rescued,omitempty"`
}

// UpstreamResult is what a completed upstream task hands its dependents.
type UpstreamResult struct {
	TaskID       string          `json:"task_id"`
	Title        string          `json:"title"`
	Summary      string          `json:"summary,omitempty"`
	FilesChanged []string        `json:"files_changed,omitempty"`
	Outputs      json.RawMessage `json:"outputs,omitempty"`
}

// Answer is a question an agent asked and the human's answer; for a
// question that expired unanswered, Expired is set and Answer says so.
type Answer struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
	Expired  bool   `json:"expired,omitempty"`
}

// ReviewContext is what a QA reviewer is shown.
type ReviewContext struct {
	// TaskID is the reviewed task; Summary its agent's report.
	TaskID  string `json:"task_id"`
	Summary string `json:"summary,omitempty"`
	// Diff is the change under review (truncated when very large).
	Diff         string   `json:"diff"`
	FilesChanged []string `json:"files_changed,omitempty"`
}

// ConflictError is a merge of a task branch that could not be made: the
// files in conflict, for the next attempt's context.
type ConflictError struct {
	Branch string
	Into   string
	Files  []string
}

func (e *ConflictError) Error() string {
	msg := "merging " + e.Branch + " into " + e.Into + " conflicts"
	if len(e.Files) > 0 {
		msg += " in "
		for i, f := range e.Files {
			if i > 0 {
				msg += ", "
			}
			msg += f
		}
	}
	return msg
}
