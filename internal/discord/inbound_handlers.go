package discord

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
)

// options are a command's option values by name.
type options map[string]*discordgo.ApplicationCommandInteractionDataOption

func (o options) str(name string) string {
	if v, ok := o[name]; ok && v.Type == discordgo.ApplicationCommandOptionString {
		return strings.TrimSpace(v.StringValue())
	}
	return ""
}

func (o options) has(name string) bool { _, ok := o[name]; return ok }

func (o options) int(name string) (int64, bool) {
	if v, ok := o[name]; ok && v.Type == discordgo.ApplicationCommandOptionInteger {
		return v.IntValue(), true
	}
	return 0, false
}

func (o options) float(name string) (float64, bool) {
	if v, ok := o[name]; ok && v.Type == discordgo.ApplicationCommandOptionNumber {
		return v.FloatValue(), true
	}
	return 0, false
}

func (o options) bool(name string) (bool, bool) {
	if v, ok := o[name]; ok && v.Type == discordgo.ApplicationCommandOptionBoolean {
		return v.BoolValue(), true
	}
	return false, false
}

// channelID returns a channel option's id (channels arrive as snowflake strings).
func (o options) channelID(name string) string {
	if v, ok := o[name]; ok && v.Type == discordgo.ApplicationCommandOptionChannel {
		if s, ok := v.Value.(string); ok {
			return s
		}
	}
	return ""
}

// commandPath returns "task add" and the subcommand's options.
func commandPath(data discordgo.ApplicationCommandInteractionData) (string, options) {
	path, opts := data.Name, nonNil(data.Options)
	for len(opts) == 1 && (opts[0].Type == discordgo.ApplicationCommandOptionSubCommand ||
		opts[0].Type == discordgo.ApplicationCommandOptionSubCommandGroup) {
		path += " " + opts[0].Name
		opts = nonNil(opts[0].Options)
	}
	out := options{}
	for _, o := range opts {
		out[o.Name] = o
	}
	return path, out
}

// nonNil drops the null entries a malformed payload may carry.
func nonNil(opts []*discordgo.ApplicationCommandInteractionDataOption) []*discordgo.ApplicationCommandInteractionDataOption {
	out := opts[:0:0]
	for _, o := range opts {
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}

// command answers a slash command.
func (b *Bot) command(ctx context.Context, s *discordgo.Session, i *discordgo.Interaction, user string) {
	path, opts := commandPath(i.ApplicationCommandData())
	if destructive[path] {
		if !b.admin(user) {
			b.respondNow(s, i, ephemeral(fmt.Sprintf("🚫 `/%s` needs an admin (`discord.admin_users`).", path)))
			return
		}
		id := opts.str(optTask) + opts.str(optProject) + opts.str(optAgent) + opts.str(optHook) + opts.str(optRun)
		valid := models.ValidID(id)
		switch {
		case opts.has(optTask):
			valid = models.ValidTaskID(id)
		case opts.has(optRun):
			valid = validRunID(id)
		}
		if !valid {
			b.respondNow(s, i, ephemeral(fmt.Sprintf("⚠️ `/%s` needs the id of what to act on; %q is not one.", path, cut(id, 80))))
			return
		}
		verb := strings.ReplaceAll(path, " ", "-")
		b.respondNow(s, i, reply{Ephemeral: true, Content: fmt.Sprintf("Really %s `%s`?", confirmVerb(path), id),
			Components: buttons(
				button("Yes, "+confirmVerb(path), discordgo.DangerButton, customID("confirm", verb, id)),
				button("Cancel", discordgo.SecondaryButton, customID("cancel")))})
		return
	}
	if open, ok := formCommands[path]; ok {
		// A form must be the first answer: these answer on their own.
		open(b, ctx, s, i, user, opts)
		return
	}
	h, ok := b.handlers()[path]
	if !ok {
		b.respondNow(s, i, ephemeral(fmt.Sprintf("⚠️ Unknown command `/%s`.", path)))
		return
	}
	b.run(ctx, s, i, false, func(ctx context.Context) reply { return h(ctx, call{i: i, user: user, opts: opts}) })
}

func confirmVerb(path string) string {
	switch path {
	case "task delete":
		return "delete task"
	case "task stop":
		return "stop task"
	case "project archive":
		return "archive project"
	case "agent remove":
		return "remove agent"
	case "hook delete":
		return "delete hook"
	case "run cancel":
		return "cancel run"
	}
	return path
}

// call is one command invocation.
type call struct {
	i    *discordgo.Interaction
	user string
	opts options
}

type handler func(ctx context.Context, c call) reply

// handlers maps each command path to its operation.
func (b *Bot) handlers() map[string]handler {
	return map[string]handler{
		"status":          b.status,
		"questions":       b.questions,
		"budget":          b.budget,
		"project create":  b.projectCreate,
		"project list":    b.projectList,
		"project show":    b.projectShow,
		"project edit":    b.projectEdit,
		"project pause":   b.projectStatus(models.ProjectPaused),
		"project resume":  b.projectStatus(models.ProjectActive),
		"task add":        b.taskAdd,
		"task list":       b.taskList,
		"task show":       b.taskShow,
		"task edit":       b.taskEdit,
		"task deps":       b.taskDeps,
		"task restart":    b.taskEvent(models.EventAdminRestart),
		"task skip":       b.taskEvent(models.EventAdminSkip),
		"task approve":    b.taskApprove,
		"task reject":     b.taskReject,
		"task answer":     b.taskAnswer,
		"task result":     b.taskResult,
		"task diff":       b.taskDiff,
		"agent add":       b.agentAdd,
		"agent list":      b.agentList,
		"agent pause":     b.agentPause(true),
		"agent resume":    b.agentPause(false),
		"task delete":     b.taskDelete,
		"task stop":       b.taskEvent(models.EventAdminStop),
		"task cancel":     b.taskCancel,
		"project archive": b.projectStatus(models.ProjectArchived),
		"agent remove":    b.agentRemove,
		"hook list":       b.hookList,
		"hook fire":       b.hookFire,
		"hook runs":       b.hookRuns,
		"hook delete":     b.hookDelete,
		"workflow list":   b.workflowList,
		"workflow run":    b.workflowRun,
		"run list":        b.runList,
		"run show":        b.runShow,
		"run retry":       b.runRetry,
		"run cancel":      b.runCancel,
	}
}

// splitIDs splits a comma- or space-separated list of ids.
func splitIDs(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == ';' })
}

// splitCommands splits test commands separated by ";" or new lines.
func splitCommands(s string) []string {
	var out []string
	for _, c := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == '\n' }) {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// inferProject picks the project of a command that names none: the one
// whose channel (or task thread) the command was used in, else the only
// active project.
func (b *Bot) inferProject(ctx context.Context, c call) (string, error) {
	if p := c.opts.str(optProject); p != "" {
		return p, nil
	}
	projects, err := b.svc.ListProjects(ctx)
	if err != nil {
		return "", err
	}
	for _, p := range projects {
		if p.DiscordChannelID != nil && *p.DiscordChannelID == c.i.ChannelID {
			return p.ID, nil
		}
	}
	if taskID, ok, err := b.box.ThreadTask(ctx, c.i.ChannelID); err == nil && ok {
		if d, err := b.svc.GetTaskDetail(ctx, taskID); err == nil {
			return d.Task.ProjectID, nil
		}
	}
	var active []string
	for _, p := range projects {
		if p.Status == models.ProjectActive {
			active = append(active, p.ID)
		}
	}
	if len(active) == 1 {
		return active[0], nil
	}
	return "", models.Errorf(models.CodeInvalid, "project: name the project (this channel belongs to none, and %d projects are active)", len(active))
}

func (b *Bot) status(ctx context.Context, c call) reply {
	v, err := b.statusView(ctx)
	if err != nil {
		return b.errorReply("status", err)
	}
	content, btns := renderStatus(v)
	r := text(content)
	r.Components = btns
	return r
}

func (b *Bot) questions(ctx context.Context, c call) reply {
	qs, err := b.svc.OpenQuestions(ctx)
	if err != nil {
		return b.errorReply("questions", err)
	}
	if len(qs) == 0 {
		return ephemeral("No open questions. 🎉")
	}
	var lines []string
	var btns []discordgo.MessageComponent
	for n, q := range qs {
		lines = append(lines, fmt.Sprintf("**#%d** `%s` asks: %s", q.ID, q.TaskID, quote(cut(q.Text, 300))))
		if n < 25 {
			btns = append(btns, button(fmt.Sprintf("Answer #%d", q.ID), discordgo.PrimaryButton, customID("answer", strconv.FormatInt(q.ID, 10), q.TaskID)))
		}
	}
	r := text(strings.Join(lines, "\n"))
	r.Ephemeral = true
	r.Components = buttons(btns...)
	return r
}

func (b *Bot) projectCreate(ctx context.Context, c call) reply {
	p := models.Project{ID: c.opts.str("id"), Name: c.opts.str("name")}
	if p.Name == "" {
		p.Name = p.ID
	}
	if u := c.opts.str("repo_url"); u != "" {
		p.Repo = &models.RepoConfig{SourceType: models.RepoClone, URL: u}
	}
	if ch := c.opts.channelID("channel"); ch != "" {
		p.DiscordChannelID = &ch
	}
	if w, ok := c.opts.float("credit_weight"); ok {
		p.CreditWeight = w
	}
	if n, ok := c.opts.int("max_agents"); ok {
		p.MaxConcurrentAgents = int(n)
	}
	if n, ok := c.opts.int("budget"); ok {
		p.BudgetLimit = &n
	}
	p, err := b.svc.CreateProject(ctx, p)
	if err != nil {
		return b.errorReply("project create", err)
	}
	return text(fmt.Sprintf("📁 Created project `%s`.\n%s", p.ID, renderProject(p)))
}

func (b *Bot) projectList(ctx context.Context, c call) reply {
	ps, err := b.svc.ListProjects(ctx)
	if err != nil {
		return b.errorReply("project list", err)
	}
	if len(ps) == 0 {
		return text("No projects yet. Create one with `/project create`.")
	}
	var lines []string
	for _, p := range ps {
		lines = append(lines, fmt.Sprintf("`%s` %s — %s, weight %g, up to %d agents", p.ID, escape(p.Name), p.Status, p.CreditWeight, p.MaxConcurrentAgents))
	}
	return text(strings.Join(lines, "\n"))
}

func (b *Bot) projectShow(ctx context.Context, c call) reply {
	p, err := b.svc.GetProject(ctx, c.opts.str(optProject))
	if err != nil {
		return b.errorReply("project show", err)
	}
	return text(renderProject(p))
}

func (b *Bot) projectEdit(ctx context.Context, c call) reply {
	var patch models.ProjectPatch
	if n := c.opts.str("name"); n != "" {
		patch.Name = &n
	}
	if ch := c.opts.channelID("channel"); ch != "" {
		patch.DiscordChannelID = &ch
	}
	if w, ok := c.opts.float("credit_weight"); ok {
		patch.CreditWeight = &w
	}
	if n, ok := c.opts.int("max_agents"); ok {
		m := int(n)
		patch.MaxConcurrentAgents = &m
	}
	if n, ok := c.opts.int("budget"); ok {
		if n < 0 {
			patch.ClearBudgetLimit = true // the option's documented way to remove the limit
		} else {
			patch.BudgetLimit = &n
		}
	}
	if len(patch.Fields()) == 0 {
		return ephemeral("⚠️ Nothing to change: give name, channel, credit_weight, max_agents or budget.")
	}
	p, err := b.svc.UpdateProject(ctx, c.opts.str(optProject), patch)
	if err != nil {
		return b.errorReply("project edit", err)
	}
	return text("Updated.\n" + renderProject(p))
}

func (b *Bot) projectStatus(st models.ProjectStatus) handler {
	return func(ctx context.Context, c call) reply {
		p, err := b.svc.UpdateProject(ctx, c.opts.str(optProject), models.ProjectPatch{Status: &st})
		if err != nil {
			return b.errorReply("project status", err)
		}
		return text(fmt.Sprintf("Project `%s` is now %s (by %s).", p.ID, p.Status, mention(c.user)))
	}
}

func (b *Bot) taskAdd(ctx context.Context, c call) reply {
	projectID, err := b.inferProject(ctx, c)
	if err != nil {
		return b.errorReply("task add", err)
	}
	t := models.BatchTask{Title: c.opts.str("title"), Description: c.opts.str("description"),
		TestCommands: splitCommands(c.opts.str("test_commands")), Profile: c.opts.str("profile"),
		VerificationType: models.VerificationType(c.opts.str("verification"))}
	if n, ok := c.opts.int("priority"); ok {
		p := int(n)
		t.Priority = &p
	}
	if v, ok := c.opts.bool("requires_approval"); ok {
		t.RequiresApproval = v
	}
	for _, id := range splitIDs(c.opts.str("depends_on")) {
		t.Dependencies = append(t.Dependencies, models.BatchDependency{ID: id})
	}
	if err := t.Validate(); err != nil {
		// Checked here too so the answer names the option, not a batch entry.
		return b.errorReply("task add", err)
	}
	res, err := b.svc.CreateTasks(ctx, models.TaskBatch{ProjectID: projectID, CreatedBy: actor(c.user), Tasks: []models.BatchTask{t}})
	if err != nil {
		return b.errorReply("task add", err)
	}
	r := res[0]
	if r.Skipped {
		return text(fmt.Sprintf("A matching task exists already: `%s` (%s). Nothing was added.", r.TaskID, r.Status))
	}
	return text(fmt.Sprintf("🆕 Added `%s` to `%s`: %s — %s.", r.TaskID, projectID, escape(t.Title), r.Status))
}

func (b *Bot) taskList(ctx context.Context, c call) reply {
	f := models.TaskFilter{ProjectID: c.opts.str(optProject), Limit: 50}
	if st := c.opts.str("status"); st != "" {
		f.Statuses = []models.TaskStatus{models.TaskStatus(st)}
	}
	ts, err := b.svc.ListTasks(ctx, f)
	if err != nil {
		return b.errorReply("task list", err)
	}
	if len(ts) == 0 {
		return text("No tasks match.")
	}
	var lines []string
	for _, t := range ts {
		lines = append(lines, fmt.Sprintf("%s `%s` %s — %s", statusIcon(t.Status), t.ID, escape(cut(t.Title, 80)), t.Status))
	}
	if len(ts) == f.Limit {
		lines = append(lines, fmt.Sprintf("*(first %d shown)*", f.Limit))
	}
	return text(strings.Join(lines, "\n"))
}

func (b *Bot) taskShow(ctx context.Context, c call) reply {
	d, err := b.svc.GetTaskDetail(ctx, c.opts.str(optTask))
	if err != nil {
		return b.errorReply("task show", err)
	}
	return text(renderTaskDetail(d))
}

func (b *Bot) taskEvent(ev models.TaskEvent) handler {
	return func(ctx context.Context, c call) reply {
		return b.applyEvent(ctx, c.opts.str(optTask), ev, "", c.user, false)
	}
}

// taskCancel cancels a task that has not finished (ADMIN_CANCEL); like
// stopping a task, it needs an admin.
func (b *Bot) taskCancel(ctx context.Context, c call) reply {
	if !b.admin(c.user) {
		return ephemeral("🚫 `/task cancel` needs an admin (`discord.admin_users`).")
	}
	return b.applyEventWithReason(ctx, c.opts.str(optTask), models.EventAdminCancel, "", c.user, c.opts.str("reason"), false)
}

// applyEvent applies an admin event; expect, when set, is the status the
// person saw (a button's task), so a stale or repeated press changes
// nothing and says what happened instead.
func (b *Bot) applyEvent(ctx context.Context, taskID string, ev models.TaskEvent, expect models.TaskStatus, user string, update bool) reply {
	reason := fmt.Sprintf("%s from Discord", strings.ToLower(eventVerb(ev)))
	if ev == models.EventAdminCancel {
		reason = "" // the store records "cancelled by <actor>"
	}
	return b.applyEventWithReason(ctx, taskID, ev, expect, user, reason, update)
}

// applyEventWithReason is applyEvent with the reason recorded.
func (b *Bot) applyEventWithReason(ctx context.Context, taskID string, ev models.TaskEvent, expect models.TaskStatus, user,
	reason string, update bool) reply {
	res, err := b.svc.ApplyEvent(ctx, models.TransitionRequest{TaskID: taskID, Event: ev, ExpectFrom: expect,
		Actor: actor(user), Reason: reason})
	if err != nil {
		if models.ErrorCodeOf(err) == models.CodeConflict {
			return b.movedOn(ctx, taskID, err)
		}
		return b.errorReply("task event", err)
	}
	if res.Duplicate {
		return b.movedOn(ctx, taskID, nil)
	}
	msg := fmt.Sprintf("%s `%s` by %s: %s → %s.", eventVerb(ev), taskID, mention(user), res.From, res.To)
	if len(res.Reopened) > 0 {
		msg += fmt.Sprintf(" Reopened %d blocked dependent(s).", len(res.Reopened))
	}
	if len(res.Promoted) > 0 {
		msg += fmt.Sprintf(" %d dependent(s) are ready.", len(res.Promoted))
	}
	if len(res.Blocked) > 0 {
		msg += fmt.Sprintf(" Blocked with it: %d dependent(s).", len(res.Blocked))
	}
	r := text(msg)
	r.Update = update
	return r
}

// movedOn tells a person that a task is no longer where their action
// expected it, and what happened to it last.
func (b *Bot) movedOn(ctx context.Context, taskID string, cause error) reply {
	d, err := b.svc.GetTaskDetail(ctx, taskID)
	if err != nil {
		if cause != nil {
			return b.errorReply("task event", cause)
		}
		return b.errorReply("task event", err)
	}
	msg := fmt.Sprintf("Nothing done: `%s` is %s now", taskID, d.Task.Status)
	if n := len(d.Events); n > 0 {
		e := d.Events[n-1]
		msg += fmt.Sprintf(" (%s", e.Event)
		if e.Actor != "" {
			msg += " by " + renderActor(e.Actor)
		}
		msg += ")"
	}
	return ephemeral(msg + ".")
}

func (b *Bot) taskApprove(ctx context.Context, c call) reply {
	return b.approve(ctx, c.opts.str(optTask), c.opts.str("note"), c.user, false)
}

func (b *Bot) approve(ctx context.Context, taskID, note, user string, update bool) reply {
	if err := models.CheckText("note", note, models.MaxDescriptionLen); err != nil {
		return b.errorReply("approve", err)
	}
	if r, ok := b.mayActOnTask(ctx, taskID, user); !ok {
		return r
	}
	res, err := b.svc.ApproveTask(ctx, taskID, actor(user), note)
	if err != nil {
		if models.ErrorCodeOf(err) == models.CodeConflict {
			// A task waiting for its pull request says where to merge it.
			if d, derr := b.svc.GetTaskDetail(ctx, taskID); derr == nil && d.Task.Status == models.StatusAwaitingApproval && d.Task.PRURL != nil {
				return b.errorReply("approve", err)
			}
			return b.movedOn(ctx, taskID, err)
		}
		return b.errorReply("approve", err)
	}
	r := text(fmt.Sprintf("👍 `%s` approved by %s (now %s).", taskID, mention(user), res.To))
	r.Update = update
	return r
}

func (b *Bot) taskReject(ctx context.Context, c call) reply {
	return b.reject(ctx, c.opts.str(optTask), c.opts.str("feedback"), c.user)
}

func (b *Bot) reject(ctx context.Context, taskID, feedback, user string) reply {
	if err := (models.Feedback{Source: actor(user), Verdict: models.VerdictReject, Text: feedback}).Validate(); err != nil {
		return b.errorReply("reject", err)
	}
	if r, ok := b.mayActOnTask(ctx, taskID, user); !ok {
		return r
	}
	res, err := b.svc.RejectTask(ctx, taskID, actor(user), feedback)
	if err != nil {
		if models.ErrorCodeOf(err) == models.CodeConflict {
			return b.movedOn(ctx, taskID, err)
		}
		return b.errorReply("reject", err)
	}
	return text(fmt.Sprintf("👎 `%s` rejected by %s (now %s): %s", taskID, mention(user), res.To, quote(cut(feedback, 500))))
}

func (b *Bot) taskAnswer(ctx context.Context, c call) reply {
	taskID := c.opts.str(optTask)
	qs, err := b.svc.TaskQuestions(ctx, taskID)
	if err != nil {
		return b.errorReply("answer", err)
	}
	for i := len(qs) - 1; i >= 0; i-- {
		if qs[i].Answer == nil {
			return b.answer(ctx, qs[i].ID, c.opts.str("answer"), c.user)
		}
	}
	return ephemeral(fmt.Sprintf("`%s` has no open question.", taskID))
}

// answer answers a question; a question answered already says by whom.
func (b *Bot) answer(ctx context.Context, id int64, answer, user string) reply {
	asked, err := b.svc.GetQuestion(ctx, id)
	if err != nil {
		return b.errorReply("answer", err)
	}
	if r, ok := b.mayActOn(ctx, asked.ProjectID, user); !ok {
		return r
	}
	q, err := b.svc.AnswerQuestion(ctx, id, answer, actor(user))
	if err != nil {
		return b.errorReply("answer", err)
	}
	return text(fmt.Sprintf("💬 %s answered question #%d of `%s`:\n%s", mention(user), q.ID, q.TaskID, quote(cut(answer, 1500))))
}

func (b *Bot) taskResult(ctx context.Context, c call) reply {
	d, err := b.svc.GetTaskDetail(ctx, c.opts.str(optTask))
	if err != nil {
		return b.errorReply("task result", err)
	}
	if d.Result == nil {
		return ephemeral(fmt.Sprintf("`%s` has no result yet (%s).", d.Task.ID, d.Task.Status))
	}
	return text(renderResult(d.Task, *d.Result))
}

func (b *Bot) agentList(ctx context.Context, c call) reply {
	as, err := b.svc.ListAgents(ctx)
	if err != nil {
		return b.errorReply("agent list", err)
	}
	if len(as) == 0 {
		return text("No agents.")
	}
	return text(renderAgents(as))
}

func (b *Bot) agentPause(paused bool) handler {
	return func(ctx context.Context, c call) reply {
		a, err := b.svc.SetAgentPaused(ctx, c.opts.str(optAgent), paused)
		if err != nil {
			return b.errorReply("agent pause", err)
		}
		verb := "resumed"
		if paused {
			verb = "paused"
		}
		return text(fmt.Sprintf("Agent `%s` %s by %s.", a.ID, verb, mention(c.user)))
	}
}

func (b *Bot) agentAdd(ctx context.Context, c call) reply {
	if !b.admin(c.user) {
		return ephemeral("🚫 `/agent add` needs an admin (`discord.admin_users`).")
	}
	typ := c.opts.str("type")
	if typ == "command" || !slices.Contains(models.AgentTypes, typ) {
		return ephemeral("⚠️ type: choose claude, codex, cursor or aider (a command agent runs any program: add it in the configuration file or with `agentqueued ctl agent add`).")
	}
	reg := models.AgentRegistration{ID: c.opts.str("id"), AgentType: typ}
	reg.Projects = splitIDs(c.opts.str("projects"))
	a, err := b.svc.RegisterAgent(ctx, reg.Agent())
	if err != nil {
		return b.errorReply("agent add", err)
	}
	return text(fmt.Sprintf("🤖 Registered agent `%s` (%s).", a.ID, a.AgentType))
}

func (b *Bot) budget(ctx context.Context, c call) reply {
	v, err := b.svc.Budget(ctx)
	if err != nil {
		return b.errorReply("budget", err)
	}
	return text(renderBudget(v))
}
