package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds ctl's printers of tasks: lists, details, results, plans,
// runs, transitions and dependency changes.

func printBatchResults(w io.Writer, rs []models.BatchResult) {
	tw := table(w)
	row(tw, "TASK", "STATUS", "LOCAL_ID", "NOTE")
	for _, r := range rs {
		note := "created"
		if r.Skipped {
			note = "existing task (dedupe)"
		}
		row(tw, r.TaskID, string(r.Status), r.LocalID, note)
	}
	tw.Flush()
}

// maxListReason bounds the REASON cell of a task listing; "ctl task show"
// prints the reason whole.
const maxListReason = 80

func printTasks(w io.Writer, ts []models.Task) {
	tw := table(w)
	row(tw, "ID", "PROJECT", "STATUS", "PRIORITY", "AGENT", "UPDATED", "WAITING", "NEXT", "TITLE", "REASON")
	for _, t := range ts {
		row(tw, t.ID, t.ProjectID, string(t.Status), strconv.Itoa(t.Priority), str(t.AssignedAgentID), when(t.UpdatedAt),
			waitingCell(t), nextCell(t), readable(t.Title, 0), readable(reasonOf(t), maxListReason))
	}
	tw.Flush()
}

// reasonOf is why a task is where it is: why a READY task waits, else the
// reason of its last change.
func reasonOf(t models.Task) string {
	if t.WaitingReason != "" {
		return t.WaitingReason
	}
	return t.StatusReason
}

func printTaskDetail(w io.Writer, d models.TaskDetail) {
	printTaskRows(w, d.Task, func(tw io.Writer) {
		if d.ArchivedAt != nil {
			row(tw, "Archived:", when(*d.ArchivedAt)+" (read-only: the task as it was when archived)")
		}
		if v := d.Verification; v != nil {
			phase := fmt.Sprintf("%s (attempt %d)", v.Phase, v.Attempt)
			if detail := v.Detail(); detail != "" {
				phase += ": " + readable(detail, 0)
			}
			row(tw, "Verification phase:", phase)
		}
	})
	printResult(w, d.Result)
	printPlan(w, d.Plan)
	printEdges(w, "Depends on", "UPSTREAM", d.Dependencies, func(e models.Dependency) string { return e.Upstream })
	printEdges(w, "Dependents", "DOWNSTREAM", d.Dependents, func(e models.Dependency) string { return e.Downstream })
	fmt.Fprintf(w, "\nEvents (%d):\n", len(d.Events))
	if len(d.Events) > 0 {
		tw := table(w)
		row(tw, "  TIME", "EVENT", "FROM", "TO", "ACTOR", "REASON")
		for _, e := range d.Events {
			row(tw, "  "+when(e.CreatedAt), string(e.Event), string(e.From), string(e.To), e.Actor, readable(e.Reason, 0))
		}
		tw.Flush()
	}
	printRuns(w, d.Runs)
}

// printResult prints what a task's last completed run reported: its
// summary, the files it changed, its outputs.
func printResult(w io.Writer, c *models.Completion) {
	if c == nil {
		return
	}
	printBlock(w, "Result", c.Summary)
	if c.Summary == "" {
		fmt.Fprintln(w, "\nResult:")
	}
	if c.NoChanges {
		fmt.Fprintln(w, "  (no change to the repository, on purpose)")
	}
	if len(c.FilesChanged) > 0 {
		fmt.Fprintln(w, "  Files changed: "+clean(strings.Join(c.FilesChanged, ", ")))
	}
	if len(c.Outputs) > 0 {
		fmt.Fprintln(w, "  Outputs:")
		for line := range strings.SplitSeq(indentJSON(string(c.Outputs)), "\n") {
			fmt.Fprintln(w, "    "+clean(line))
		}
	}
}

// printPlan prints a task's pending plan: the subtasks created once its
// work is accepted.
func printPlan(w io.Writer, p *models.Plan) {
	if p == nil {
		return
	}
	fmt.Fprintf(w, "\nPending plan (%d tasks, from %s, proposed %s; created when the task's work is accepted):\n",
		len(p.Tasks), clean(p.Source), when(p.CreatedAt))
	tw := table(w)
	row(tw, "  LOCAL_ID", "TITLE", "DEPENDS_ON")
	for _, t := range p.Tasks {
		var deps []string
		for _, d := range t.Dependencies {
			deps = append(deps, d.ID)
		}
		row(tw, "  "+t.LocalID, readable(t.Title, 0), strings.Join(deps, ", "))
	}
	tw.Flush()
}

// printRuns lists a task's runs: the CLI and its version, the session, the
// tokens (input, output, cache read, cache write), the cost the CLI
// reported, the outcome, and what went wrong at the CLI's side (denied
// tools, MCP servers not connected at start, a version below the
// known-good one).
func printRuns(w io.Writer, runs []models.Run) {
	fmt.Fprintf(w, "\nRuns (%d):\n", len(runs))
	if len(runs) == 0 {
		return
	}
	tw := table(w)
	row(tw, "  RUN", "KIND", "AGENT", "ATTEMPT", "STARTED", "DURATION", "CLI", "SESSION", "TOKENS IN/OUT/CACHE-READ/CACHE-WRITE",
		"COST", "OUTCOME", "NOTES")
	for _, r := range runs {
		cli := r.CLI
		if r.CLIVersion != "" {
			cli += " " + r.CLIVersion
		}
		cost := "-"
		if r.CostUSD != nil {
			cost = fmt.Sprintf("$%.4f", *r.CostUSD)
		}
		outcome := string(r.Outcome)
		if r.EndedAt == nil {
			outcome = "running"
		}
		u := r.Usage
		duration := "-"
		if r.EndedAt != nil {
			duration = r.EndedAt.Sub(r.StartedAt).Round(time.Second).String()
		}
		row(tw, fmt.Sprintf("  %d", r.ID), r.Kind, r.AgentID, strconv.Itoa(r.Attempt), when(r.StartedAt), duration, orDash(cli),
			orDash(r.SessionID),
			fmt.Sprintf("%d/%d/%d/%d", u.Input, u.Output, u.CacheRead, u.CacheWrite), cost, orDash(outcome),
			orDash(strings.Join(runNotes(r), "; ")))
	}
	tw.Flush()
}

// runNotes are the warnings of one run.
func runNotes(r models.Run) []string {
	var notes []string
	if len(r.DeniedTools) > 0 {
		notes = append(notes, "denied: "+strings.Join(r.DeniedTools, ", "))
	}
	if len(r.MCPNotReady) > 0 {
		notes = append(notes, "MCP not connected at start: "+strings.Join(r.MCPNotReady, ", "))
	}
	if r.CLIWarning != "" {
		notes = append(notes, r.CLIWarning)
	}
	return notes
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// waitingCell is the WAITING column of a task listing: the waiting code of a
// READY task that has one, "-" otherwise.
func waitingCell(t models.Task) string {
	if t.WaitingCode == "" {
		return "-"
	}
	return t.WaitingCode
}

// nextVerbs name a task's next event in the NEXT column.
var nextVerbs = map[models.TaskEvent]string{
	models.EventRetry:       "retry",
	models.EventMaxRetries:  "block",
	models.EventResumeTimer: "resume",
}

// nextCell is the NEXT column of a task listing: what the daemon does next
// to a FAILED or PAUSED task and when ("retry 2026-03-01T12:01:00Z"), "-"
// for any other.
func nextCell(t models.Task) string {
	if t.NextEvent == "" || t.NextEventAt == nil {
		return "-"
	}
	verb, ok := nextVerbs[t.NextEvent]
	if !ok {
		verb = clean(string(t.NextEvent))
	}
	return verb + " " + when(*t.NextEventAt)
}

// printTask prints a task's fields and description.
func printTask(w io.Writer, t models.Task) { printTaskRows(w, t, nil) }

// printTaskRows prints a task's fields, with the rows more adds after its
// verification type, and its description.
func printTaskRows(w io.Writer, t models.Task, more func(tw io.Writer)) {
	tw := table(w)
	row(tw, "ID:", t.ID)
	row(tw, "Project:", t.ProjectID)
	row(tw, "Title:", readable(t.Title, 0))
	row(tw, "Status:", string(t.Status))
	row(tw, "Reason:", readable(t.StatusReason, 0))
	if t.WaitingCode != "" {
		row(tw, "Waiting:", readable(t.WaitingReason, 0)+" ("+t.WaitingCode+")")
	}
	if t.NextEvent != "" {
		row(tw, "Next:", readable(t.NextEventReason, 0)+" ("+clean(string(t.NextEvent))+")")
	}
	row(tw, "Priority:", strconv.Itoa(t.Priority))
	row(tw, "Verification:", string(t.VerificationType))
	if more != nil {
		more(tw)
	}
	row(tw, "Requires approval:", strconv.FormatBool(t.RequiresApproval))
	row(tw, "Retries:", fmt.Sprintf("%d/%d", t.RetryCount, t.MaxRetries))
	if t.Timeout > 0 {
		row(tw, "Timeout:", t.Timeout.String())
	}
	row(tw, "Kind:", t.Kind)
	row(tw, "Created by:", t.CreatedBy)
	row(tw, "Agent:", str(t.AssignedAgentID))
	row(tw, "Branch:", str(t.BranchName))
	row(tw, "PR:", str(t.PRURL))
	row(tw, "Profile:", t.Profile)
	row(tw, "Agent type:", t.AgentType)
	if len(t.RunnerLabels) > 0 {
		row(tw, "Runner labels:", strings.Join(t.RunnerLabels, ", "))
	}
	row(tw, "Test commands:", strings.Join(t.TestCommands, "; "))
	row(tw, "Criteria:", strings.Join(t.AcceptanceCriteria, "; "))
	var meta []string
	for _, k := range slices.Sorted(maps.Keys(t.Metadata)) {
		meta = append(meta, k+"="+t.Metadata[k])
	}
	row(tw, "Metadata:", strings.Join(meta, ", "))
	if t.ExpectedCount > 0 || t.SuccessCount > 0 || t.FailureCount > 0 {
		row(tw, "Items:", fmt.Sprintf("%d succeeded, %d failed of %d expected", t.SuccessCount, t.FailureCount, t.ExpectedCount))
	}
	for i, r := range t.Rules {
		row(tw, fmt.Sprintf("Rule %d:", i), r.Summary())
	}
	row(tw, "Created:", when(t.CreatedAt))
	row(tw, "Updated:", when(t.UpdatedAt))
	tw.Flush()
	if t.Description != "" {
		fmt.Fprintln(w, "\nDescription:")
		for line := range strings.SplitSeq(strings.TrimRight(t.Description, "\n"), "\n") {
			fmt.Fprintln(w, "  "+clean(line))
		}
	}
}

// printEdges lists edge facts under a title, naming each edge's other task.
func printEdges(w io.Writer, title, column string, edges []models.Dependency, other func(models.Dependency) string) {
	fmt.Fprintf(w, "\n%s (%d):\n", title, len(edges))
	if len(edges) == 0 {
		return
	}
	tw := table(w)
	row(tw, "  "+column, "REQUIRES_SUCCESS", "RESOLUTION", "RESOLVED", "UPSTREAM_ENDED", "ATTEMPT")
	for _, e := range edges {
		ended, attempt := string(e.UpstreamOutcome), ""
		if ended == "" {
			ended = "-"
		}
		if e.UpstreamAttempt != nil {
			attempt = strconv.Itoa(*e.UpstreamAttempt)
		}
		row(tw, "  "+other(e), strconv.FormatBool(e.RequiresSuccess), string(e.Resolution), whenPtr(e.ResolvedAt),
			ended, attempt)
	}
	tw.Flush()
}

func printTransition(w io.Writer, r models.TransitionResult) {
	note := ""
	if r.Duplicate {
		note = " (already applied)"
	}
	fmt.Fprintf(w, "%s: %s -> %s%s\n", r.Task.ID, r.From, r.To, note)
	for _, l := range []struct {
		label string
		ids   []string
	}{{"promoted to READY", r.Promoted}, {"blocked", r.Blocked}, {"reopened", r.Reopened}} {
		if len(l.ids) > 0 {
			fmt.Fprintf(w, "%s: %s\n", l.label, strings.Join(l.ids, ", "))
		}
	}
}

// printDependencyResult prints a task's status and edges after a change of
// its dependencies, and the tasks the change moved.
func printDependencyResult(w io.Writer, r models.DependencyResult) {
	fmt.Fprintf(w, "%s: %s\n", clean(r.Task.ID), r.Task.Status)
	for _, l := range []struct {
		label string
		ids   []string
	}{{"added", r.Added}, {"removed", r.Removed}, {"promoted to READY", r.Promoted}, {"blocked", r.Blocked},
		{"reopened", r.Reopened}} {
		if len(l.ids) > 0 {
			fmt.Fprintf(w, "%s: %s\n", l.label, clean(strings.Join(l.ids, ", ")))
		}
	}
	printEdges(w, "Depends on", "UPSTREAM", r.Dependencies, func(e models.Dependency) string { return e.Upstream })
}
