package main

import (
	"bytes"
	"encoding/json"
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

// repoSummary says where a project's repository is, without the
// credentials a URL stored by an older daemon may hold.
func repoSummary(r *models.RepoConfig) string {
	if r == nil {
		return ""
	}
	where := models.RedactURL(r.URL)
	if where == "" {
		where = r.SourcePath
	}
	s := string(r.SourceType)
	if where != "" {
		s += " " + where
	}
	return s + " (" + r.DefaultBranch + ")"
}

// repoKind says in plain words what a repository's source type (LINK,
// CLONE, INIT) means for the user: where agents work and where their work
// lands.
func repoKind(r *models.RepoConfig) string {
	switch r.SourceType {
	case models.RepoLink:
		if r.InPlace {
			return "your own repository, used in place: agents work in it one at a time, each on its task's branch " +
				"aq/<task>, and verified work is merged into your " + r.DefaultBranch
		}
		return "your own repository: each agent works in a git worktree of it, on the task's branch aq/<task>, " +
			"and verified work is merged into your " + r.DefaultBranch + " (CLONE would clone a URL instead, INIT start an empty repository)"
	case models.RepoClone:
		return "cloned from the URL: each agent works in its own clone in the data directory, and verified work is pushed to its " +
			r.DefaultBranch
	case models.RepoInit:
		return "a new repository the daemon made in the data directory: agents work in clones of it, and verified work lands in its " +
			r.DefaultBranch
	}
	return string(r.SourceType)
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
	settings := settingRows(p.Settings)
	if len(settings) == 0 {
		row(tw, "Settings:", "(defaults)")
	} else {
		// The heading says how many are set (an empty value would print as
		// "-"), the settings follow it, one a row.
		row(tw, "Settings:", fmt.Sprintf("%d set, the others default", len(settings)))
	}
	for _, kv := range settings {
		row(tw, "  "+kv[0]+":", kv[1])
	}
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

// readable makes text fit one table cell: line breaks and tabs become a
// space, runs of spaces one, other control characters are escaped (as
// clean does), and the result is cut to max characters ("…" last; no cap
// when max is 0).
func readable(s string, max int) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\n' || r == '\r' || r == '\t' }), " ")
	s = clean(s)
	if r := []rune(s); max > 0 && len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
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
	row(tw, "ID", "NAME", "TYPE", "STATE", "PAUSED", "TASK", "TOKENS", "LAST_HEARTBEAT", "CLI")
	for _, a := range as {
		row(tw, a.ID, a.Name, a.AgentType, agentState(a, maxListRestReason), strconv.FormatBool(a.Paused), str(a.CurrentTaskID),
			strconv.FormatInt(a.TotalTokensUsed, 10), whenPtr(a.LastHeartbeat), cliCell(a))
	}
	tw.Flush()
}

// cliCell is the CLI version an agent's latest run reported, with a
// warning when it is older than the known-good one.
func cliCell(a models.Agent) string {
	switch {
	case a.CLIVersion == "":
		return "-"
	case a.CLIWarning != "":
		return a.CLIVersion + " (older than " + models.KnownGoodCLIVersion(a.AgentType) + ", the known-good version)"
	}
	return a.CLIVersion
}

// maxListRestReason bounds a rest's reason in an agent listing; the
// agent's own page shows it whole.
const maxListRestReason = 80

// agentState is an agent's state for a listing: its rest after a rate
// limit, with the reason cut to max characters (0: whole), while it lasts.
func agentState(a models.Agent, max int) string {
	if a.RestUntil == nil {
		return string(a.State)
	}
	return "resting until " + when(*a.RestUntil) + ": " + models.CleanLine(a.RestReason, max)
}

// printAgent prints one agent and its settings as the daemon answered
// them (env values masked by its service).
func printAgent(w io.Writer, a models.Agent) {
	tw := table(w)
	row(tw, "ID:", a.ID)
	row(tw, "Name:", a.Name)
	row(tw, "Type:", a.AgentType)
	row(tw, "State:", string(a.State))
	if a.RestUntil != nil {
		row(tw, "Resting until:", when(*a.RestUntil))
		row(tw, "Rest reason:", a.RestReason)
	}
	row(tw, "Paused:", strconv.FormatBool(a.Paused))
	row(tw, "Task:", str(a.CurrentTaskID))
	row(tw, "Command:", a.Command)
	row(tw, "Args:", strings.Join(a.Args, " "))
	var env []string
	for _, k := range slices.Sorted(maps.Keys(a.Env)) {
		env = append(env, k+"="+a.Env[k])
	}
	row(tw, "Env:", strings.Join(env, ", "))
	row(tw, "Pass env:", strings.Join(a.PassEnv, ", "))
	row(tw, "Projects:", strings.Join(a.Projects, ", "))
	row(tw, "Max runtime:", durationOrDefault(a.MaxRuntime))
	row(tw, "Idle timeout:", durationOrDefault(a.IdleTimeout))
	heartbeat := "none"
	if a.HeartbeatTimeout > 0 {
		heartbeat = a.HeartbeatTimeout.Std().String()
	}
	row(tw, "Heartbeat limit:", heartbeat)
	row(tw, "Model:", a.Profile.Model)
	row(tw, "Permission mode:", a.Profile.PermissionMode)
	var servers []string
	for _, s := range a.Profile.MCPServers {
		d := s.Name + " (" + s.Command + s.URL
		if len(s.Env) > 0 {
			d += "; env " + strings.Join(slices.Sorted(maps.Keys(s.Env)), ", ")
		}
		servers = append(servers, d+")")
	}
	row(tw, "MCP servers:", strings.Join(servers, ", "))
	row(tw, "Tokens used:", strconv.FormatInt(a.TotalTokensUsed, 10))
	row(tw, "CLI version:", cliCell(a))
	if a.CLIWarning != "" {
		row(tw, "CLI warning:", a.CLIWarning)
	}
	row(tw, "Last heartbeat:", whenPtr(a.LastHeartbeat))
	row(tw, "Created:", when(a.CreatedAt))
	tw.Flush()
}

// durationOrDefault shows an agent's limit, "daemon default" when unset.
func durationOrDefault(d models.Duration) string {
	if d == 0 {
		return "daemon default"
	}
	return d.Std().String()
}

func printQuestions(w io.Writer, qs []models.Question) {
	tw := table(w)
	row(tw, "ID", "TASK", "ASKED", "QUESTION")
	for _, q := range qs {
		row(tw, strconv.FormatInt(q.ID, 10), q.TaskID, when(q.AskedAt), q.Text)
	}
	tw.Flush()
}

// triggerSummary says in a few words when a hook fires.
func triggerSummary(t models.HookTrigger) string {
	switch t.Type {
	case models.TriggerPeriodic:
		return fmt.Sprintf("every %s", time.Duration(t.IntervalSeconds)*time.Second)
	case models.TriggerCron:
		tz := t.Timezone
		if tz == "" {
			tz = "UTC"
		}
		return fmt.Sprintf("cron %s (%s)", t.Expr, tz)
	case models.TriggerEvent:
		s := "on " + t.EventType
		var filters []string
		for _, k := range slices.Sorted(maps.Keys(t.Filters)) {
			filters = append(filters, k+"="+t.Filters[k])
		}
		if len(filters) > 0 {
			s += " where " + strings.Join(filters, ", ")
		}
		return s
	}
	return string(t.Type)
}

func printHooks(w io.Writer, hs []models.Hook) {
	tw := table(w)
	row(tw, "ID", "PROJECT", "NAME", "ENABLED", "TRIGGER", "COOLDOWN", "STEPS", "LLM")
	for _, h := range hs {
		row(tw, h.ID, h.ProjectID, h.Name, strconv.FormatBool(h.Enabled), triggerSummary(h.Trigger),
			(time.Duration(h.CooldownSeconds) * time.Second).String(), strconv.Itoa(len(h.ContextSteps)),
			strconv.FormatBool(h.PromptTemplate != ""))
	}
	tw.Flush()
}

// llmSummary says which LLM a hook calls: none without a prompt template,
// else its overrides (the key only said to be set) or the daemon's.
func llmSummary(h models.Hook) string {
	overrides := llmOverrides(h.LLMConfig)
	switch {
	case h.PromptTemplate == "" && overrides == "":
		return "none (no prompt template: the hook calls no LLM)"
	case h.PromptTemplate == "":
		return "none (no prompt template: the hook calls no LLM; llm_config: " + overrides + ")"
	case overrides == "":
		return "the daemon's (its llm settings)"
	}
	return overrides
}

// llmOverrides describes a hook's LLM overrides, "" when it has none.
func llmOverrides(c *models.HookLLMConfig) string {
	if c == nil {
		return ""
	}
	var parts []string
	if c.Model != "" {
		parts = append(parts, "model "+c.Model)
	}
	if c.BaseURL != "" {
		parts = append(parts, "endpoint "+c.BaseURL)
	}
	if c.APIKey != "" {
		parts = append(parts, "own API key")
	}
	if c.Temperature != nil {
		parts = append(parts, "temperature "+strconv.FormatFloat(float64(*c.Temperature), 'g', -1, 32))
	}
	return strings.Join(parts, ", ")
}

// stepSummary describes one context step by its type and the fields it sets.
func stepSummary(s models.HookStep) string {
	parts := []string{s.Type}
	for _, f := range []struct{ name, v string }{{"path", s.Path}, {"pattern", s.Pattern}, {"base", s.Base}, {"head", s.Head},
		{"since", s.Since}, {"query", s.Query}, {"status", s.Status}, {"url", s.URL}, {"command", s.Command},
		{"skip_llm_if", s.SkipLLMIf}} {
		if f.v != "" {
			parts = append(parts, f.name+"="+f.v)
		}
	}
	if s.MaxCount != 0 {
		parts = append(parts, "max_count="+strconv.Itoa(s.MaxCount))
	}
	if s.TimeoutSeconds != 0 {
		parts = append(parts, "timeout_seconds="+strconv.Itoa(s.TimeoutSeconds))
	}
	return strings.Join(parts, " ")
}

// printBlock prints a titled block of text, indented, one cleaned line at a time.
func printBlock(w io.Writer, title, text string) {
	if text == "" {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	for line := range strings.SplitSeq(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintln(w, "  "+clean(line))
	}
}

func printHook(w io.Writer, h models.Hook) {
	tw := table(w)
	row(tw, "ID:", h.ID)
	row(tw, "Project:", h.ProjectID)
	row(tw, "Name:", h.Name)
	row(tw, "Enabled:", strconv.FormatBool(h.Enabled))
	row(tw, "Trigger:", triggerSummary(h.Trigger))
	row(tw, "Cooldown:", (time.Duration(h.CooldownSeconds) * time.Second).String())
	maxTokens := "-"
	if h.MaxTokensPerRun != nil {
		maxTokens = strconv.Itoa(*h.MaxTokensPerRun)
	}
	row(tw, "Max tokens per run:", maxTokens)
	row(tw, "LLM:", llmSummary(h))
	row(tw, "Schedule from:", when(h.ScheduleFrom))
	row(tw, "Created:", when(h.CreatedAt))
	row(tw, "Updated:", when(h.UpdatedAt))
	tw.Flush()
	fmt.Fprintf(w, "\nContext steps (%d):\n", len(h.ContextSteps))
	for i, s := range h.ContextSteps {
		fmt.Fprintf(w, "  step_%d: %s\n", i, clean(stepSummary(s)))
	}
	printBlock(w, "Prompt template", h.PromptTemplate)
	if t := h.FileTask; t != nil {
		fmt.Fprintf(w, "\nFiles a task, without a model:\n  title: %s\n", clean(t.Title))
		if t.Kind != "" {
			fmt.Fprintf(w, "  kind: %s\n", clean(t.Kind))
		}
		if t.Priority != nil {
			fmt.Fprintf(w, "  priority: %d\n", *t.Priority)
		}
		printBlock(w, "Its description", t.Description)
	}
}

func printHookRuns(w io.Writer, runs []models.HookRun) {
	tw := table(w)
	row(tw, "RUN", "HOOK", "STATUS", "STARTED", "COMPLETED", "TOKENS", "TRIGGER", "DETAIL")
	for _, r := range runs {
		row(tw, r.ID, r.HookID, string(r.Status), when(r.StartedAt), whenPtr(r.CompletedAt), strconv.FormatInt(r.TokensUsed, 10),
			string(r.TriggerReason), r.TriggerDetail)
	}
	tw.Flush()
}

func printHookRun(w io.Writer, r models.HookRun) {
	tw := table(w)
	row(tw, "Run:", r.ID)
	row(tw, "Hook:", r.HookID)
	row(tw, "Project:", r.ProjectID)
	row(tw, "Status:", string(r.Status))
	row(tw, "Trigger:", string(r.TriggerReason))
	row(tw, "Trigger detail:", r.TriggerDetail)
	row(tw, "Scheduled at:", whenPtr(r.ScheduledAt))
	row(tw, "Started:", when(r.StartedAt))
	row(tw, "Completed:", whenPtr(r.CompletedAt))
	row(tw, "Tokens:", strconv.FormatInt(r.TokensUsed, 10))
	row(tw, "Skipped:", str(r.SkippedReason))
	row(tw, "Error:", r.Error)
	tw.Flush()
	printBlock(w, "Event", indentJSON(str(r.EventData)))
	printBlock(w, "Context", indentJSON(str(r.ContextResults)))
	printBlock(w, "Prompt", str(r.PromptSent))
	printBlock(w, "Answer", str(r.LLMResponse))
	printBlock(w, "Actions", indentJSON(str(r.ActionsTaken)))
}

// indentJSON indents a JSON text for reading; other text is returned as is.
func indentJSON(s string) string {
	var b bytes.Buffer
	if json.Indent(&b, []byte(s), "", "  ") != nil {
		return s
	}
	return b.String()
}

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
		{"verification", string(s.Verification)}} {
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

// queueSummary is a project's tasks by status, in the statuses' order:
// "ready 2 · in_progress 1 · completed 5".
func queueSummary(counts map[models.TaskStatus]int) string {
	var parts []string
	for _, st := range models.TaskStatuses {
		if n := counts[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", strings.ToLower(string(st)), n))
		}
	}
	if len(parts) == 0 {
		return "no tasks"
	}
	return strings.Join(parts, " · ")
}

// maxStatusTitle bounds a title in the status overview.
const maxStatusTitle = 60

// printStatus prints the daemon's overview: what Discord's /status shows,
// and the budget; ages are measured from now.
func printStatus(w io.Writer, now time.Time, o models.Overview) {
	fmt.Fprintf(w, "Projects (%d):\n", len(o.Projects))
	if len(o.Projects) > 0 {
		tw := table(w)
		row(tw, "  PROJECT", "STATUS", "MAX_AGENTS", "WORKING", "TO_LAND", "TASKS")
		for _, p := range o.Projects {
			a := o.ProjectActivity[p.ID]
			row(tw, "  "+p.ID, string(p.Status), strconv.Itoa(p.MaxConcurrentAgents), strconv.Itoa(a.AgentsWorking),
				strconv.Itoa(a.WaitingToLand), queueSummary(o.Counts[p.ID]))
		}
		tw.Flush()
	}
	working := map[string]models.Task{}
	for _, t := range o.Working {
		working[t.ID] = t
	}
	fmt.Fprintf(w, "\nAgents (%d):\n", len(o.Agents))
	if len(o.Agents) > 0 {
		tw := table(w)
		row(tw, "  AGENT", "TYPE", "STATE", "TASK", "DOING")
		for _, a := range o.Agents {
			task, doing := str(a.CurrentTaskID), ""
			if t, ok := working[task]; ok {
				doing = string(t.Status) + ": " + readable(t.Title, maxStatusTitle)
			}
			state := agentState(a, maxListRestReason)
			if a.Paused {
				state += " (paused)"
			}
			row(tw, "  "+a.ID, a.AgentType, state, task, doing)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nAgents working: %d · Waiting to land or verify: %d\n", o.Activity.AgentsWorking, o.Activity.WaitingToLand)
	fmt.Fprintln(w)
	printDesk(w, now, o.Desk, o.DeskTruncated)
	if len(o.Rules) > 0 {
		fmt.Fprintf(w, "\nRules: %d in force (ctl rule list)\n", len(o.Rules))
	}
	if o.Budget != nil {
		fmt.Fprintln(w, "\nBudget:")
		printBudget(w, *o.Budget)
	}
}

// maxDeskWhat bounds what a desk line says of its item, before its notes.
const maxDeskWhat = 72

// printDesk prints what waits on a person under "Waiting on you (N):",
// oldest first: per item, one line with how long it has waited (from
// now), its kind, whose it is and what it asks, with notes, then the
// command that ends the wait (and the address of a pull request) on the
// next line. Text from the API is cleaned.
func printDesk(w io.Writer, now time.Time, items []models.DeskItem, truncated bool) {
	more := ""
	if truncated {
		more = "+"
	}
	fmt.Fprintf(w, "Waiting on you (%d%s):\n", len(items), more)
	if len(items) == 0 {
		fmt.Fprintln(w, "  nothing")
		return
	}
	type line struct{ age, kind, whose, what string }
	lines := make([]line, len(items))
	var ageW, kindW, whoseW int
	for i, it := range items {
		l := line{age: age(now, it.Since), kind: string(it.Kind), whose: deskWhose(it), what: readable(it.What, maxDeskWhat)}
		if notes := deskNotes(now, it); len(notes) > 0 {
			l.what += " (" + strings.Join(notes, "; ") + ")"
		}
		l.kind, l.whose = clean(l.kind), clean(l.whose)
		ageW, kindW, whoseW = max(ageW, len([]rune(l.age))), max(kindW, len([]rune(l.kind))), max(whoseW, len([]rune(l.whose)))
		lines[i] = l
	}
	indent := strings.Repeat(" ", 2+ageW+2)
	for i, l := range lines {
		fmt.Fprintf(w, "  %s  %s  %s  %s\n", padLeft(l.age, ageW), pad(l.kind, kindW), pad(l.whose, whoseW), l.what)
		action := items[i].Action
		cmd := readable(action.Command, 0)
		if u := action.URL; strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
			cmd += "  " + readable(u, 0)
		}
		if cmd != "" {
			fmt.Fprintf(w, "%s→ %s\n", indent, cmd)
		}
	}
	if truncated {
		fmt.Fprintf(w, "  … and more (the desk lists the oldest %d)\n", len(items))
	}
}

// deskWhose says whose a desk item is: project/task, the agent, or the
// project.
func deskWhose(it models.DeskItem) string {
	switch {
	case it.TaskID != "":
		return it.ProjectID + "/" + it.TaskID
	case it.AgentID != "":
		return "agent " + it.AgentID
	}
	return it.ProjectID
}

// deskNotes are what a desk line adds to an item's text: the tasks
// blocked behind it, that the run that asked has ended, when a question
// expires.
func deskNotes(now time.Time, it models.DeskItem) []string {
	var notes []string
	if it.Behind > 0 {
		notes = append(notes, fmt.Sprintf("%d task(s) behind it", it.Behind))
	}
	if it.RunEnded {
		notes = append(notes, "its run ended: the answer starts a new one")
	}
	if it.ExpiresAt != nil {
		if it.ExpiresAt.After(now) {
			notes = append(notes, "expires in "+span(it.ExpiresAt.Sub(now)))
		} else {
			notes = append(notes, "expired")
		}
	}
	return notes
}

// age says how long ago t was, from now (span); "-" when t is unset.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return span(now.Sub(t))
}

// span says a duration in its largest whole unit: 45s, 12m, 3h (up to two
// days), 2d; a negative one is 0s.
func span(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// pad and padLeft fill s with spaces to n characters, after or before it.
func pad(s string, n int) string { return s + strings.Repeat(" ", max(n-len([]rune(s)), 0)) }

func padLeft(s string, n int) string { return strings.Repeat(" ", max(n-len([]rune(s)), 0)) + s }
