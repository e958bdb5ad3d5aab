package discord

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/schedule"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// This file holds the /workflow and /run commands: listing and starting
// workflows, and listing, showing, cancelling and retrying their runs; and
// the notices of runs that ended.

// runsShown is how many runs /run list shows.
const runsShown = 10

// runStatuses are the statuses of a run, in the order it goes through them.
var runStatuses = func() []string {
	out := make([]string, len(models.WorkflowRunStatuses))
	for i, st := range models.WorkflowRunStatuses {
		out[i] = string(st)
	}
	return out
}()

// runIDPattern is a run's id: its workflow's name, "-" and its number.
var runIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}-[0-9]{1,12}$`)

// validRunID reports whether id can be a run's id (it then fits a
// button's custom id).
func validRunID(id string) bool { return runIDPattern.MatchString(id) }

func workflowOpt(required bool) *discordgo.ApplicationCommandOption {
	return str(optWorkflow, "Workflow name", required, true)
}

func runOpt() *discordgo.ApplicationCommandOption {
	return str(optRun, "Run id, e.g. nightly-3", true, true)
}

func runStatusOpt() *discordgo.ApplicationCommandOption {
	o := str("status", "Only runs in this status", false, false)
	for _, s := range runStatuses {
		o.Choices = append(o.Choices, &discordgo.ApplicationCommandOptionChoice{Name: s, Value: s})
	}
	return o
}

// workflowCommandOptions are the subcommands of /workflow.
func workflowCommandOptions() []*discordgo.ApplicationCommandOption {
	return []*discordgo.ApplicationCommandOption{
		sub("list", "List workflows", project(false)),
		sub("run", "Start a run of a workflow now", workflowOpt(true)),
	}
}

// runCommandOptions are the subcommands of /run.
func runCommandOptions() []*discordgo.ApplicationCommandOption {
	return []*discordgo.ApplicationCommandOption{
		sub("list", "The last runs, newest first", workflowOpt(false), runStatusOpt()),
		sub("show", "A run's status and its tasks", runOpt()),
		sub("cancel", "Cancel a run and stop its tasks (admin)", runOpt()),
		sub("retry", "Start a failed or cancelled run's failed and blocked tasks again", runOpt()),
	}
}

// inlineCode renders an id or a name someone typed as inline code.
func inlineCode(s string) string { return "`" + strings.ReplaceAll(cut(s, 100), "`", "") + "`" }

// Names of what checkID refuses.
const (
	aWorkflowName = "a workflow name"
	aRunID        = "a run id (its workflow's name, - and a number, e.g. nightly-3)"
)

// checkID refuses what cannot be a workflow's name or a run's id before it
// is looked up, showing what was typed as code.
func checkID(field, s string, valid bool, what string) error {
	if valid {
		return nil
	}
	return models.Errorf(models.CodeInvalid, "%s: %s is not %s", field, inlineCode(s), what)
}

func (b *Bot) workflowList(ctx context.Context, c call) reply {
	ws, err := b.svc.ListWorkflows(ctx, c.opts.str(optProject))
	if err != nil {
		return b.errorReply("workflow list", err)
	}
	if len(ws) == 0 {
		if p := c.opts.str(optProject); p != "" {
			return text(fmt.Sprintf("Project %s has no workflows.", inlineCode(p)))
		}
		return text("No workflows yet. Add one as a file in `workflows.dir` or through the API (`ctl workflow add`).")
	}
	now := b.cfg.Clock.Now()
	lines := make([]string, len(ws))
	for i, w := range ws {
		lines[i] = renderWorkflow(w, now)
	}
	return text(strings.Join(lines, "\n"))
}

func (b *Bot) workflowRun(ctx context.Context, c call) reply {
	name := c.opts.str(optWorkflow)
	if err := checkID(optWorkflow, name, models.ValidID(name), aWorkflowName); err != nil {
		return b.errorReply("workflow run", err)
	}
	r, err := b.svc.StartRun(ctx, name, actor(c.user))
	if err != nil {
		return b.errorReply("workflow run", err)
	}
	tasks := fmt.Sprintf("%d task(s)", countTasks(r.Tasks))
	if fansOut(r) {
		tasks += " so far (more when its fan-outs expand)"
	}
	return text(fmt.Sprintf("%s Run `%s` of **%s** started by %s: %s, %s.\nFollow it: `/run show run:%s`",
		runIcon(r.Status), r.ID, escape(cut(r.Workflow, 100)), mention(c.user), r.Status, tasks, r.ID))
}

func (b *Bot) runList(ctx context.Context, c call) reply {
	wf, status := c.opts.str(optWorkflow), c.opts.str("status")
	if wf != "" {
		if err := checkID(optWorkflow, wf, models.ValidID(wf), aWorkflowName); err != nil {
			return b.errorReply("run list", err)
		}
	}
	if status != "" && !slices.Contains(runStatuses, status) {
		return b.errorReply("run list", models.Errorf(models.CodeInvalid, "status: choose %s", strings.Join(runStatuses, ", ")))
	}
	runs, err := b.svc.ListWorkflowRuns(ctx, models.RunFilter{Workflow: wf, Status: models.WorkflowRunStatus(status), Limit: runsShown})
	if err != nil {
		return b.errorReply("run list", err)
	}
	if len(runs) == 0 {
		if wf != "" {
			// A deleted workflow keeps its runs: only a name nobody ran
			// and nobody defined is unknown.
			if _, err := b.svc.GetWorkflow(ctx, wf); models.ErrorCodeOf(err) == models.CodeNotFound {
				return b.errorReply("run list", err)
			}
		}
		switch {
		case wf != "" && status != "":
			return text(fmt.Sprintf("No %s runs of `%s`.", status, wf))
		case wf != "":
			return text(fmt.Sprintf("Workflow `%s` has no runs yet. Start one with `/workflow run`.", wf))
		case status != "":
			return text(fmt.Sprintf("No %s runs.", status))
		}
		return text("No runs yet. Start one with `/workflow run`.")
	}
	header := "**Last runs**"
	if status != "" {
		header = "**Last " + status + " runs**"
	}
	if wf != "" {
		header += " of `" + wf + "`"
	}
	lines := make([]string, len(runs))
	for i, r := range runs {
		lines[i] = renderRunLine(r)
	}
	return text(joinFitting(header+", newest first", lines))
}

func (b *Bot) runShow(ctx context.Context, c call) reply {
	id := c.opts.str(optRun)
	if err := checkID(optRun, id, validRunID(id), aRunID); err != nil {
		return b.errorReply("run show", err)
	}
	r, err := b.svc.GetWorkflowRun(ctx, id)
	if err != nil {
		return b.errorReply("run show", err)
	}
	ts, err := b.svc.RunTasks(ctx, id)
	if err != nil {
		return b.errorReply("run show", err)
	}
	lines := make([]string, len(ts))
	for i, t := range ts {
		lines[i] = renderRunTask(t)
	}
	if len(lines) == 0 {
		lines = []string{"*(no tasks yet)*"}
	}
	return text(joinFitting(renderRunHead(r)+"\n**Tasks**", lines))
}

func (b *Bot) runRetry(ctx context.Context, c call) reply {
	id := c.opts.str(optRun)
	if err := checkID(optRun, id, validRunID(id), aRunID); err != nil {
		return b.errorReply("run retry", err)
	}
	return b.retryRun(ctx, id, "", c.user, false)
}

// retryRun starts a run's failed and blocked tasks again. expect, when
// set, is the status the person saw (a notice's button): a run that moved
// on since, or a second press, changes nothing and says what happened.
func (b *Bot) retryRun(ctx context.Context, id, expect, user string, update bool) reply {
	// One retry at a time: a second press finds the run the first one left.
	b.runMu.Lock()
	defer b.runMu.Unlock()
	if expect != "" {
		cur, err := b.svc.GetWorkflowRun(ctx, id)
		if err != nil {
			return b.errorReply("run retry", err)
		}
		if cur.Status != models.WorkflowRunStatus(expect) {
			return runMovedOn(cur)
		}
	}
	r, err := b.svc.RetryRun(ctx, id, actor(user))
	if err != nil {
		if expect != "" && models.ErrorCodeOf(err) == models.CodeConflict {
			if cur, gerr := b.svc.GetWorkflowRun(ctx, id); gerr == nil {
				return runMovedOn(cur)
			}
		}
		return b.errorReply("run retry", err)
	}
	out := text(fmt.Sprintf("🔁 Run `%s` retried by %s: now %s (%s).", r.ID, mention(user), r.Status, models.StatusCounts(r.Tasks)))
	out.Update = update
	return out
}

// cancelRun cancels a run its admin confirmed.
func (b *Bot) cancelRun(ctx context.Context, id, user string) reply {
	cur, err := b.svc.GetWorkflowRun(ctx, id)
	if err != nil {
		return b.errorReply("run cancel", err)
	}
	if cur.Status != models.RunPending && cur.Status != models.RunRunning {
		return runMovedOn(cur)
	}
	r, err := b.svc.CancelRun(ctx, id, actor(user))
	if err != nil {
		return b.errorReply("run cancel", err)
	}
	return text(fmt.Sprintf("🛑 Run `%s` of **%s** cancelled by %s: %s.", r.ID, escape(cut(r.Workflow, 100)), mention(user),
		models.StatusCounts(r.Tasks)))
}

// runMovedOn tells a person that a run is not where their action expected
// it, and since when.
func runMovedOn(r models.WorkflowRun) reply {
	msg := fmt.Sprintf("Nothing done: run `%s` is %s now (", r.ID, r.Status)
	if strings.TrimSpace(r.Reason) != "" {
		msg += runReason(r.Reason, 200) + ", "
	}
	return ephemeral(msg + fmt.Sprintf("since <t:%d:R>).", r.UpdatedAt.Unix()))
}

// countTasks adds up a run's task counts.
func countTasks(counts map[models.TaskStatus]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// fansOut reports whether a run's workflow has steps whose tasks are made
// only when an upstream step has completed.
func fansOut(r models.WorkflowRun) bool {
	var w models.Workflow
	if len(r.Definition) == 0 || json.Unmarshal(r.Definition, &w) != nil {
		return false
	}
	for _, s := range w.Steps {
		if workflow.Deferred(s) {
			return true
		}
	}
	return false
}

func runIcon(status models.WorkflowRunStatus) string {
	switch status {
	case models.RunPending:
		return "⏳"
	case models.RunRunning:
		return "▶️"
	case models.RunSuccess:
		return "✅"
	case models.RunFailed:
		return "❌"
	case models.RunCancelled:
		return "🛑"
	}
	return "•"
}

// renderWorkflow renders a workflow on one line: its project, steps and
// schedule with the next time it runs.
func renderWorkflow(w models.Workflow, now time.Time) string {
	icon := "🔁"
	parts := []string{"project `" + w.ProjectID + "`", fmt.Sprintf("%d step(s)", len(w.Steps))}
	switch {
	case w.Schedule == "":
		parts = append(parts, "by hand only")
	default:
		s := "cron " + inlineCode(w.Schedule)
		if w.Timezone != "" {
			s += " (" + inlineCode(w.Timezone) + ")"
		}
		parts = append(parts, s)
		if !w.ScheduleEnabled {
			icon = "⏸️"
			parts = append(parts, "schedule **disabled**")
		} else if next := nextRun(w, now); next != nil {
			parts = append(parts, "next "+renderTime(*next))
		}
	}
	return fmt.Sprintf("%s `%s` · %s", icon, w.Name, strings.Join(parts, " · "))
}

// nextRun is a workflow's next scheduled time: the one the engine
// recorded, else the schedule's next time after now.
func nextRun(w models.Workflow, now time.Time) *time.Time {
	if w.NextRun != nil {
		return w.NextRun
	}
	sched, loc, err := models.ParseCron(w.Schedule, w.Timezone, "schedule", "timezone")
	if err != nil {
		return nil
	}
	next := schedule.Cron(sched, loc, w.ScheduleFrom).Next(later(now, w.ScheduleFrom))
	if next.IsZero() {
		return nil
	}
	return &next
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// renderRunTrigger says who or what started a run: a Discord user as a
// mention, a schedule as such.
func renderRunTrigger(r models.WorkflowRun) string {
	by := strings.TrimSpace(r.TriggeredBy)
	if r.Trigger == models.TriggerBySchedule {
		if by == "" || by == string(models.TriggerBySchedule) {
			return "scheduled"
		}
		return flat(by, 120)
	}
	if id, ok := strings.CutPrefix(by, "discord:"); ok && id != "" && strings.Trim(id, "0123456789") == "" {
		return "by " + mention(id)
	}
	if by == "" {
		return flat(string(r.Trigger), 40)
	}
	return "by " + inlineCode(cut(by, 80))
}

// runReason renders why a run ended, on one line and escaped; a Discord
// user who cancelled it is shown as a mention.
func runReason(reason string, n int) string {
	reason = strings.Join(strings.Fields(reason), " ")
	if by, ok := strings.CutPrefix(reason, "cancelled by discord:"); ok && by != "" && strings.Trim(by, "0123456789") == "" {
		return "cancelled by " + mention(by)
	}
	return flat(reason, n)
}

// renderRunLine renders a run on one line (and why it ended on a second).
func renderRunLine(r models.WorkflowRun) string {
	l := fmt.Sprintf("%s `%s` **%s** %s · %s · <t:%d:R>", runIcon(r.Status), r.ID, escape(cut(r.Workflow, 100)), r.Status,
		renderRunTrigger(r), r.CreatedAt.Unix())
	if strings.TrimSpace(r.Reason) != "" {
		l += "\n↳ " + runReason(r.Reason, 300)
	}
	return l
}

// renderRunHead renders a run's status, reason and task counts.
func renderRunHead(r models.WorkflowRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s Run `%s` of **%s** — %s\n", runIcon(r.Status), r.ID, escape(cut(r.Workflow, 100)), r.Status)
	fmt.Fprintf(&b, "project `%s` · %s · started <t:%d:R>", r.ProjectID, renderRunTrigger(r), r.CreatedAt.Unix())
	if r.EndedAt != nil {
		fmt.Fprintf(&b, " · ended <t:%d:R>", r.EndedAt.Unix())
	}
	if strings.TrimSpace(r.Reason) != "" {
		b.WriteString("\nreason: " + runReason(r.Reason, 500))
	}
	fmt.Fprintf(&b, "\ntasks: %s", models.StatusCounts(r.Tasks))
	return b.String()
}

// renderRunTask renders a task of a run: its name in the run, id, title
// and status, and why it failed or is blocked.
func renderRunTask(t models.RunTask) string {
	l := fmt.Sprintf("%s `%s` · `%s` %s — %s", statusIcon(t.Status), strings.ReplaceAll(t.Name, "`", ""), t.ID,
		escape(cut(t.Title, 80)), t.Status)
	if (t.Status == models.StatusFailed || t.Status == models.StatusBlocked) && strings.TrimSpace(t.StatusReason) != "" {
		l += ": " + flat(t.StatusReason, 150)
	}
	return l
}

func (b *Bot) runCancel(ctx context.Context, c call) reply {
	return b.cancelRun(ctx, c.opts.str(optRun), c.user)
}

// runSuggestions is how many recent runs autocomplete looks through.
const runSuggestions = 200

// runStatusesFor narrows run suggestions to the runs a command can act
// on; nil is every run.
func runStatusesFor(path string) []models.WorkflowRunStatus {
	switch path {
	case "run cancel":
		return []models.WorkflowRunStatus{models.RunPending, models.RunRunning}
	case "run retry":
		return []models.WorkflowRunStatus{models.RunFailed, models.RunCancelled}
	}
	return nil
}

// workflowLabel describes a workflow in a suggestion (plain text).
func workflowLabel(w models.Workflow) string {
	l := fmt.Sprintf("%s · %s · %d step(s)", w.Name, w.ProjectID, len(w.Steps))
	switch {
	case w.Schedule == "":
		l += " · by hand"
	case !w.ScheduleEnabled:
		l += " · cron " + w.Schedule + " (disabled)"
	default:
		l += " · cron " + w.Schedule
	}
	return l
}
