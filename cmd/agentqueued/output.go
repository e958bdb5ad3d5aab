package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/agentqueued/agentqueued/internal/models"
)

// table returns a writer that aligns tab-separated columns; call Flush.
func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// row writes one tab-separated line of cleaned cells.
func row(w io.Writer, cols ...string) {
	for i, c := range cols {
		if c == "" {
			c = "-"
		}
		cols[i] = clean(c)
	}
	fmt.Fprintln(w, strings.Join(cols, "\t"))
}

// clean makes text from the API safe to print on a terminal: control
// characters (escape sequences, tabs, newlines, carriage returns) are shown
// as Go escapes instead of acting on the terminal or breaking the table.
func clean(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isControl(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func whenPtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return when(*t)
}

func repoSummary(r *models.RepoConfig) string {
	if r == nil {
		return ""
	}
	where := r.URL
	if where == "" {
		where = r.SourcePath
	}
	s := string(r.SourceType)
	if where != "" {
		s += " " + where
	}
	return s + " (" + r.DefaultBranch + ")"
}

func printProjects(w io.Writer, ps []models.Project) {
	tw := table(w)
	row(tw, "ID", "NAME", "STATUS", "WEIGHT", "MAX_AGENTS", "TOKENS", "BUDGET", "REPO")
	for _, p := range ps {
		row(tw, p.ID, p.Name, string(p.Status), strconv.FormatFloat(p.CreditWeight, 'g', -1, 64),
			strconv.Itoa(p.MaxConcurrentAgents), strconv.FormatInt(p.TotalTokensUsed, 10), itoa(p.BudgetLimit), repoSummary(p.Repo))
	}
	tw.Flush()
}

func printProject(w io.Writer, p models.Project) {
	tw := table(w)
	row(tw, "ID:", p.ID)
	row(tw, "Name:", p.Name)
	row(tw, "Status:", string(p.Status))
	row(tw, "Credit weight:", strconv.FormatFloat(p.CreditWeight, 'g', -1, 64))
	row(tw, "Max agents:", strconv.Itoa(p.MaxConcurrentAgents))
	row(tw, "Tokens used:", strconv.FormatInt(p.TotalTokensUsed, 10))
	row(tw, "Budget:", itoa(p.BudgetLimit))
	row(tw, "Discord channel:", str(p.DiscordChannelID))
	row(tw, "Repo:", repoSummary(p.Repo))
	row(tw, "Created:", when(p.CreatedAt))
	row(tw, "Updated:", when(p.UpdatedAt))
	tw.Flush()
}

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

func printTasks(w io.Writer, ts []models.Task) {
	tw := table(w)
	row(tw, "ID", "PROJECT", "STATUS", "PRIORITY", "TITLE")
	for _, t := range ts {
		row(tw, t.ID, t.ProjectID, string(t.Status), strconv.Itoa(t.Priority), t.Title)
	}
	tw.Flush()
}

func printTaskDetail(w io.Writer, d models.TaskDetail) {
	printTask(w, d.Task)
	printEdges(w, "Depends on", "UPSTREAM", d.Dependencies, func(e models.Dependency) string { return e.Upstream })
	printEdges(w, "Dependents", "DOWNSTREAM", d.Dependents, func(e models.Dependency) string { return e.Downstream })
	fmt.Fprintf(w, "\nEvents (%d):\n", len(d.Events))
	if len(d.Events) > 0 {
		tw := table(w)
		row(tw, "  TIME", "EVENT", "FROM", "TO", "ACTOR", "REASON")
		for _, e := range d.Events {
			row(tw, "  "+when(e.CreatedAt), string(e.Event), string(e.From), string(e.To), e.Actor, e.Reason)
		}
		tw.Flush()
	}
}

// printTask prints a task's fields and description.
func printTask(w io.Writer, t models.Task) {
	tw := table(w)
	row(tw, "ID:", t.ID)
	row(tw, "Project:", t.ProjectID)
	row(tw, "Title:", t.Title)
	row(tw, "Status:", string(t.Status))
	row(tw, "Reason:", t.StatusReason)
	row(tw, "Priority:", strconv.Itoa(t.Priority))
	row(tw, "Verification:", string(t.VerificationType))
	row(tw, "Requires approval:", strconv.FormatBool(t.RequiresApproval))
	row(tw, "Retries:", fmt.Sprintf("%d/%d", t.RetryCount, t.MaxRetries))
	row(tw, "Kind:", t.Kind)
	row(tw, "Created by:", t.CreatedBy)
	row(tw, "Agent:", str(t.AssignedAgentID))
	row(tw, "Branch:", str(t.BranchName))
	row(tw, "PR:", str(t.PRURL))
	row(tw, "Profile:", t.Profile)
	row(tw, "Test commands:", strings.Join(t.TestCommands, "; "))
	row(tw, "Criteria:", strings.Join(t.AcceptanceCriteria, "; "))
	var meta []string
	for _, k := range slices.Sorted(maps.Keys(t.Metadata)) {
		meta = append(meta, k+"="+t.Metadata[k])
	}
	row(tw, "Metadata:", strings.Join(meta, ", "))
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
	row(tw, "  "+column, "REQUIRES_SUCCESS", "RESOLUTION", "RESOLVED")
	for _, e := range edges {
		row(tw, "  "+other(e), strconv.FormatBool(e.RequiresSuccess), string(e.Resolution), whenPtr(e.ResolvedAt))
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

// printBudget prints token use against the global budget and each
// project's.
func printBudget(w io.Writer, b models.BudgetReport) {
	global := "unlimited"
	if b.Global.Budget != nil {
		global = strconv.FormatInt(*b.Global.Budget, 10)
	}
	fmt.Fprintf(w, "Window: %s (since %s)\n", b.Window, when(b.Since))
	fmt.Fprintf(w, "All projects: %d tokens in the window, global budget %s", b.Global.TokensInWindow, global)
	if b.Global.Exhausted {
		fmt.Fprint(w, " (exhausted: no task starts)")
	}
	fmt.Fprintln(w)
	if len(b.Projects) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := table(w)
	row(tw, "PROJECT", "STATUS", "WINDOW_TOKENS", "TOTAL_TOKENS", "BUDGET", "EXHAUSTED")
	for _, p := range b.Projects {
		row(tw, p.ProjectID, string(p.Status), strconv.FormatInt(p.TokensInWindow, 10), strconv.FormatInt(p.TotalTokensUsed, 10),
			itoa(p.BudgetLimit), strconv.FormatBool(p.Exhausted))
	}
	tw.Flush()
}

func printAgents(w io.Writer, as []models.Agent) {
	tw := table(w)
	row(tw, "ID", "NAME", "TYPE", "STATE", "PAUSED", "TASK", "TOKENS", "LAST_HEARTBEAT")
	for _, a := range as {
		row(tw, a.ID, a.Name, a.AgentType, string(a.State), strconv.FormatBool(a.Paused), str(a.CurrentTaskID),
			strconv.FormatInt(a.TotalTokensUsed, 10), whenPtr(a.LastHeartbeat))
	}
	tw.Flush()
}

func printQuestions(w io.Writer, qs []models.Question) {
	tw := table(w)
	row(tw, "ID", "TASK", "ASKED", "QUESTION")
	for _, q := range qs {
		row(tw, strconv.FormatInt(q.ID, 10), q.TaskID, when(q.AskedAt), q.Text)
	}
	tw.Flush()
}
