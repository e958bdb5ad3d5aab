package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds ctl's printers of workflows, their runs and their
// tasks' logs.

// scheduleSummary says when a workflow runs on its own: its cron
// expression and zone, "-" when it has none.
func scheduleSummary(wf models.Workflow) string {
	if wf.Schedule == "" {
		return ""
	}
	tz := wf.Timezone
	if tz == "" {
		tz = "UTC"
	}
	return fmt.Sprintf("%s (%s)", wf.Schedule, tz)
}

// scheduleState says whether a workflow's schedule is on; "-" without one.
func scheduleState(wf models.Workflow) string {
	switch {
	case wf.Schedule == "":
		return ""
	case wf.ScheduleEnabled:
		return "on"
	}
	return "off"
}

func printWorkflows(w io.Writer, ws []models.Workflow) {
	tw := table(w)
	row(tw, "NAME", "PROJECT", "STEPS", "SCHEDULE", "ENABLED", "NEXT_RUN", "ORIGIN")
	for _, wf := range ws {
		row(tw, wf.Name, wf.ProjectID, strconv.Itoa(len(wf.Steps)), scheduleSummary(wf), scheduleState(wf),
			whenPtr(wf.NextRun), wf.Origin)
	}
	tw.Flush()
}

// workflowStepSummary describes a step by what it waits for, how it fans
// out and the settings it makes.
func workflowStepSummary(s models.WorkflowStep) string {
	var parts []string
	if len(s.DependsOn) > 0 {
		deps := make([]string, len(s.DependsOn))
		for i, d := range s.DependsOn {
			deps[i] = d.Step
			if !d.Required() {
				deps[i] += " (whatever its result)"
			}
		}
		parts = append(parts, "after "+strings.Join(deps, ", "))
	}
	switch {
	case s.Foreach != "":
		parts = append(parts, "foreach "+s.Foreach)
	case s.Parallel != nil && s.Parallel.From != "":
		parts = append(parts, "parallel "+s.Parallel.From)
	case s.Parallel != nil:
		parts = append(parts, "parallel "+strconv.Itoa(s.Parallel.Count))
	}
	if s.Concurrency > 0 {
		parts = append(parts, "concurrency "+strconv.Itoa(s.Concurrency))
	}
	if s.ExpectedCount != nil {
		parts = append(parts, "expected_count "+s.ExpectedCount.String())
	}
	for _, f := range []struct{ name, v string }{{"profile", s.Profile}, {"agent_type", s.AgentType}, {"kind", s.Kind},
		{"verification", string(s.Verification)}, {"runner_labels", strings.Join(s.RunnerLabels, ",")}} {
		if f.v != "" {
			parts = append(parts, f.name+" "+f.v)
		}
	}
	if s.RequiresApproval {
		parts = append(parts, "requires approval")
	}
	return strings.Join(parts, "; ")
}

func printWorkflow(w io.Writer, wf models.Workflow) {
	tw := table(w)
	row(tw, "Name:", wf.Name)
	row(tw, "Project:", wf.ProjectID)
	row(tw, "Description:", wf.Description)
	schedule := scheduleSummary(wf)
	if schedule != "" {
		schedule += ", " + scheduleState(wf)
	}
	row(tw, "Schedule:", schedule)
	row(tw, "Next run:", whenPtr(wf.NextRun))
	row(tw, "Origin:", wf.Origin)
	row(tw, "Created:", when(wf.CreatedAt))
	row(tw, "Updated:", when(wf.UpdatedAt))
	tw.Flush()
	fmt.Fprintf(w, "\nSteps (%d):\n", len(wf.Steps))
	if len(wf.Steps) > 0 {
		tw = table(w)
		row(tw, "  STEP", "TITLE", "RUNS")
		for _, s := range wf.Steps {
			row(tw, "  "+s.Name, s.Title, workflowStepSummary(s))
		}
		tw.Flush()
	}
	printBlock(w, "Document", wf.Source)
}

// taskCounts summarises a run's tasks by status: "BLOCKED=1, READY=2".
func taskCounts(counts map[models.TaskStatus]int) string {
	var parts []string
	for _, st := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s=%d", st, counts[st]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// runTrigger says how a run started: "manual by alice", "schedule".
func runTrigger(r models.WorkflowRun) string {
	trigger := string(r.Trigger)
	if r.TriggeredBy == "" || r.TriggeredBy == trigger {
		return trigger
	}
	if r.Trigger == models.TriggerByHand {
		return trigger + " by " + r.TriggeredBy
	}
	return r.TriggeredBy
}

func printWorkflowRuns(w io.Writer, rs []models.WorkflowRun) {
	tw := table(w)
	row(tw, "RUN", "WORKFLOW", "PROJECT", "STATUS", "TRIGGER", "CREATED", "ENDED")
	for _, r := range rs {
		row(tw, r.ID, r.Workflow, r.ProjectID, string(r.Status), runTrigger(r), when(r.CreatedAt), whenPtr(r.EndedAt))
	}
	tw.Flush()
}

func printWorkflowRun(w io.Writer, r models.WorkflowRun) {
	tw := table(w)
	row(tw, "Run:", r.ID)
	row(tw, "Workflow:", r.Workflow)
	row(tw, "Project:", r.ProjectID)
	row(tw, "Status:", string(r.Status))
	row(tw, "Reason:", r.Reason)
	row(tw, "Trigger:", runTrigger(r))
	row(tw, "Scheduled at:", whenPtr(r.ScheduledAt))
	for _, k := range slices.Sorted(maps.Keys(r.Inputs)) {
		v := r.Inputs[k]
		if v == "" {
			v = `""`
		}
		row(tw, "Input "+k+":", v)
	}
	row(tw, "Tasks:", taskCounts(r.Tasks))
	if r.ArchivedTasks > 0 {
		row(tw, "Archived:", fmt.Sprintf("%d of its tasks (ctl run tasks %s marks them)", r.ArchivedTasks, r.ID))
	}
	row(tw, "Created:", when(r.CreatedAt))
	row(tw, "Updated:", when(r.UpdatedAt))
	row(tw, "Ended:", whenPtr(r.EndedAt))
	tw.Flush()
}

func printRunTasks(w io.Writer, ts []models.RunTask) {
	tw := table(w)
	row(tw, "NAME", "TASK", "STATUS", "TITLE", "REASON")
	for _, t := range ts {
		status := string(t.Status)
		if t.ArchivedAt != nil {
			status += " (archived)"
		}
		row(tw, t.Name, t.ID, status, t.Title, t.StatusReason)
	}
	tw.Flush()
}

// printTaskLogs prints each attempt's log under a "== attempt N ==" header,
// one cleaned line at a time (tabs kept).
func printTaskLogs(w io.Writer, name string, l models.TaskLogs) {
	if len(l.Attempts) == 0 {
		fmt.Fprintf(w, "task %s (%s) has no log yet\n", clean(name), clean(l.TaskID))
		return
	}
	for i, a := range l.Attempts {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "== attempt %d ==\n", a.Attempt)
		if a.Truncated {
			fmt.Fprintln(w, "(the end of the log only)")
		}
		if a.Log == "" {
			continue
		}
		for line := range strings.SplitSeq(strings.TrimRight(a.Log, "\n"), "\n") {
			cells := strings.Split(line, "\t")
			for j, c := range cells {
				cells[j] = clean(c)
			}
			fmt.Fprintln(w, strings.Join(cells, "\t"))
		}
	}
}
