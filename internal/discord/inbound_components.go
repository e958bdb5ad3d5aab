package discord

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
)

// component answers a pressed button.
func (b *Bot) component(ctx context.Context, s *discordgo.Session, i *discordgo.Interaction, user string) {
	action, args, err := parseCustomID(i.MessageComponentData().CustomID)
	if err != nil {
		b.respondNow(s, i, ephemeral("⚠️ This button is not one of agentqueued's."))
		return
	}
	arg := func(n int) string {
		if n < len(args) {
			return args[n]
		}
		return ""
	}
	switch action {
	case "event":
		ev, taskID, expect := models.TaskEvent(arg(0)), arg(1), models.TaskStatus(arg(2))
		if !ev.IsAdmin() || taskID == "" {
			b.respondNow(s, i, ephemeral("⚠️ This button is broken."))
			return
		}
		if ev == models.EventAdminStop && !b.admin(user) {
			b.respondNow(s, i, ephemeral("🚫 Stopping a task needs an admin."))
			return
		}
		if ev == models.EventAdminCancel && !b.admin(user) {
			b.respondNow(s, i, ephemeral("🚫 Cancelling a task needs an admin."))
			return
		}
		b.run(ctx, s, i, false, func(ctx context.Context) reply {
			r := b.applyEvent(ctx, taskID, ev, expect, user, true)
			if r.Update {
				r.Content = originalContent(i) + "\n" + r.Content
			}
			return r
		})
	case "error":
		b.run(ctx, s, i, true, func(ctx context.Context) reply { return b.viewError(ctx, arg(0)) })
	case "diff":
		// Seen by the person deciding only: the notice stays as it is.
		b.run(ctx, s, i, true, func(ctx context.Context) reply {
			r := b.diffReply(ctx, arg(0))
			r.Ephemeral = true
			return r
		})
	case "approve":
		b.run(ctx, s, i, false, func(ctx context.Context) reply {
			r := b.approve(ctx, arg(0), "", user, true)
			if r.Update {
				r.Content = originalContent(i) + "\n" + r.Content
			}
			return r
		})
	case "reject":
		b.respondModal(s, i, customID("reject", arg(0)), "Reject "+arg(0), "What must change?", "The agent gets this as feedback", true)
	case "answer":
		id, err := strconv.ParseInt(arg(0), 10, 64)
		if err != nil {
			b.respondNow(s, i, ephemeral("⚠️ This button is broken."))
			return
		}
		// A question answered already is told at once, without a form; the
		// look-up is bounded so the form still opens in time.
		lctx, done := b.lookupContext(ctx)
		q, ok := b.findQuestion(lctx, id, arg(1))
		done()
		if ok && !q.Open() {
			b.respondNow(s, i, ephemeral(answeredBy(q)))
			return
		}
		b.respondModal(s, i, customID("answer", arg(0)), fmt.Sprintf("Answer question #%d", id), "Your answer",
			cut(q.Text, 100), true)
	case "confirm":
		if !b.admin(user) {
			b.respondNow(s, i, ephemeral("🚫 This needs an admin."))
			return
		}
		b.run(ctx, s, i, true, func(ctx context.Context) reply {
			r := b.confirmed(ctx, arg(0), arg(1), user)
			r.Update = true
			return r
		})
	case "cancel":
		b.respondNow(s, i, reply{Update: true, Content: "Cancelled; nothing was done."})
	case "nl":
		b.run(ctx, s, i, false, func(ctx context.Context) reply { return b.runProposal(ctx, arg(0), arg(1), user) })
	case "hook-retry":
		b.reopenHookForm(s, i, arg(0), user)
	case "run-retry":
		runID, expect := arg(0), arg(1)
		if !validRunID(runID) || !slices.Contains(runStatuses, expect) {
			b.respondNow(s, i, ephemeral("⚠️ This button is broken."))
			return
		}
		b.run(ctx, s, i, false, func(ctx context.Context) reply {
			r := b.retryRun(ctx, runID, expect, user, true)
			if r.Update {
				r.Content = originalContent(i) + "\n" + r.Content
			}
			return r
		})
	default:
		b.respondNow(s, i, ephemeral("⚠️ This button is not known (any more)."))
	}
}

// answerLookup bounds a read before a form opens: a form cannot be
// deferred, so it must open within Discord's 3 s whatever the read does.
const answerLookup = 500 * time.Millisecond

// lookupContext returns a context for a read before a form opens. It ends
// once answerLookup has passed on the timer of Config.Clock, with the cause
// context.DeadlineExceeded (see lookupErr), or when done is called, which
// must be once the read is over.
func (b *Bot) lookupContext(ctx context.Context) (lctx context.Context, done func()) {
	lctx, cancel := context.WithCancelCause(ctx)
	timer := b.cfg.Clock.After(answerLookup)
	go func() {
		select {
		case <-timer:
			cancel(context.DeadlineExceeded)
		case <-lctx.Done():
		}
	}()
	return lctx, func() { cancel(context.Canceled) }
}

// lookupErr returns the error of a read made with a lookupContext: a read
// cut short by the bound failed with context.DeadlineExceeded, as it would
// have under context.WithTimeout, not with the cancellation that ended it.
func lookupErr(lctx context.Context, err error) error {
	if errors.Is(err, context.Canceled) && errors.Is(context.Cause(lctx), context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}

// originalContent is the text of the message a button was on.
func originalContent(i *discordgo.Interaction) string {
	if i.Message != nil {
		return i.Message.Content
	}
	return ""
}

// confirmed runs a destructive command its admin confirmed.
func (b *Bot) confirmed(ctx context.Context, verb, id, user string) reply {
	switch verb {
	case "task-delete":
		return b.deleteTask(ctx, id, user)
	case "task-stop":
		return b.applyEvent(ctx, id, models.EventAdminStop, "", user, false)
	case "project-archive":
		st := models.ProjectArchived
		p, err := b.svc.UpdateProject(ctx, id, models.ProjectPatch{Status: &st})
		if err != nil {
			return b.errorReply("project archive", err)
		}
		return text(fmt.Sprintf("🗄️ Project `%s` archived by %s.", p.ID, mention(user)))
	case "agent-remove":
		return b.removeAgent(ctx, id, user)
	case "hook-delete":
		return b.deleteHook(ctx, id, user)
	case "run-cancel":
		return b.cancelRun(ctx, id, user)
	}
	return ephemeral("⚠️ Unknown confirmation.")
}

// viewError shows a task's recent errors to the person who asked.
func (b *Bot) viewError(ctx context.Context, taskID string) reply {
	errs, err := b.svc.RunErrors(ctx, taskID)
	if err != nil {
		return b.errorReply("view error", err)
	}
	if len(errs) == 0 {
		d, err := b.svc.GetTaskDetail(ctx, taskID)
		if err != nil {
			return b.errorReply("view error", err)
		}
		if d.Task.StatusReason == "" {
			return ephemeral(fmt.Sprintf("`%s` recorded no error.", taskID))
		}
		errs = []string{d.Task.StatusReason}
	}
	for i, e := range errs {
		errs[i] = models.RedactURL(e) // before it is cut: a cut URL would no longer be seen as one
	}
	last := errs[len(errs)-1]
	r := text(fmt.Sprintf("Last error of `%s` (%d recorded):\n%s", taskID, len(errs), codeBlock(cut(last, 1800))))
	if len(last) > 1800 {
		r.File = &attachment{Name: taskID + "-error.txt", Body: strings.Join(errs, "\n\n---\n\n")}
	}
	r.Ephemeral = true
	return r
}

// findQuestion finds a question of a task, answered or not.
func (b *Bot) findQuestion(ctx context.Context, id int64, taskID string) (models.Question, bool) {
	qs, err := b.svc.TaskQuestions(ctx, taskID)
	if err == nil {
		for _, q := range qs {
			if q.ID == id {
				return q, true
			}
		}
	}
	return models.Question{}, false
}

func answeredBy(q models.Question) string {
	by := q.AnsweredBy
	if q.Answer == nil && q.ClosedAt != nil {
		return fmt.Sprintf("Question #%d was closed: %s.", q.ID, escape(cmp.Or(q.ClosedReason, "its task was cancelled")))
	}
	if q.Answer == nil && q.ExpiredAt != nil {
		return fmt.Sprintf("Question #%d expired unanswered <t:%d:R>.", q.ID, q.ExpiredAt.Unix())
	}
	if by == "" {
		return fmt.Sprintf("Question #%d is closed already.", q.ID)
	}
	return fmt.Sprintf("Question #%d was answered already by %s.", q.ID, renderActor(by))
}

// modalSubmit answers a submitted modal: an answer to a question, a
// rejection's feedback, or a hook's form.
func (b *Bot) modalSubmit(ctx context.Context, s *discordgo.Session, i *discordgo.Interaction, user string) {
	action, args, err := parseCustomID(i.ModalSubmitData().CustomID)
	if err != nil || len(args) == 0 {
		b.respondNow(s, i, ephemeral("⚠️ This form is not one of agentqueued's."))
		return
	}
	typed := strings.TrimSpace(modalText(i))
	switch action {
	case "answer":
		id, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil {
			b.respondNow(s, i, ephemeral("⚠️ This form is broken."))
			return
		}
		b.run(ctx, s, i, false, func(ctx context.Context) reply { return b.answer(ctx, id, typed, user) })
	case "reject":
		b.run(ctx, s, i, false, func(ctx context.Context) reply {
			r := b.reject(ctx, args[0], typed, user)
			if !r.Ephemeral && updatable(i) {
				// The approval notice the form came from loses its buttons.
				r.Update, r.Content = true, originalContent(i)+"\n"+r.Content
			}
			return r
		})
	case "hook-form":
		values := modalValues(i)
		b.run(ctx, s, i, false, func(ctx context.Context) reply {
			r := b.submitHookForm(ctx, args[0], user, values)
			if r.Ephemeral && updatable(i) {
				// Submitted again from the message that said what was
				// wrong: that message says what is wrong now.
				r.Update = true
			}
			return r
		})
	default:
		b.respondNow(s, i, ephemeral("⚠️ This form is not known."))
	}
}

// autocomplete suggests project, task, agent, hook and run ids, workflow
// names and hook schedules, for the focused option.
func (b *Bot) autocomplete(ctx context.Context, i *discordgo.Interaction) []*discordgo.ApplicationCommandOptionChoice {
	data := i.ApplicationCommandData()
	path, opts := commandPath(data)
	var focused *discordgo.ApplicationCommandInteractionDataOption
	for _, o := range opts {
		if o.Focused {
			focused = o
		}
	}
	if focused == nil {
		return nil
	}
	raw := strings.TrimSpace(fmt.Sprint(focused.Value))
	typed := strings.ToLower(raw)
	var choices []*discordgo.ApplicationCommandOptionChoice
	addChoice := func(value, label string) bool {
		if typed != "" && !strings.Contains(strings.ToLower(value+" "+label), typed) {
			return true
		}
		choices = append(choices, &discordgo.ApplicationCommandOptionChoice{Name: cut(label, 100), Value: value})
		return len(choices) < 25
	}
	switch focused.Name {
	case optProject:
		ps, err := b.svc.ListProjects(ctx)
		if err != nil {
			return nil
		}
		for _, p := range ps {
			if p.Status != models.ProjectArchived && !addChoice(p.ID, p.ID+" — "+p.Name) {
				break
			}
		}
	case optAgent:
		as, err := b.svc.ListAgents(ctx)
		if err != nil {
			return nil
		}
		for _, a := range as {
			if !addChoice(a.ID, fmt.Sprintf("%s (%s, %s)", a.ID, a.AgentType, a.State)) {
				break
			}
		}
	case optTask:
		f := models.TaskFilter{ProjectID: opts.str(optProject), Statuses: taskStatusesFor(path), Limit: 200}
		ts, err := b.svc.ListTasks(ctx, f)
		if err != nil {
			return nil
		}
		for _, t := range ts {
			if !addChoice(t.ID, fmt.Sprintf("%s · %s · %s", t.ID, t.Status, t.Title)) {
				break
			}
		}
	case optHook:
		hs, err := b.svc.ListHooks(ctx, opts.str(optProject))
		if err != nil {
			return nil
		}
		for _, h := range hs {
			if !addChoice(h.ID, fmt.Sprintf("%s · %s · %s", h.ID, h.Name, triggerText(h.Trigger, false))) {
				break
			}
		}
	case optWorkflow:
		ws, err := b.svc.ListWorkflows(ctx, opts.str(optProject))
		if err != nil {
			return nil
		}
		for _, w := range ws {
			if !addChoice(w.Name, workflowLabel(w)) {
				break
			}
		}
	case optRun:
		// Recent runs first, narrowed to those the command can act on.
		runs, err := b.svc.ListWorkflowRuns(ctx, models.RunFilter{Workflow: opts.str(optWorkflow), Limit: runSuggestions})
		if err != nil {
			return nil
		}
		statuses := runStatusesFor(path)
		for _, r := range runs {
			if statuses != nil && !slices.Contains(statuses, r.Status) {
				continue
			}
			if !addChoice(r.ID, fmt.Sprintf("%s · %s · %s · %s", r.ID, r.Status, r.Trigger, r.CreatedAt.UTC().Format("2006-01-02 15:04 UTC"))) {
				break
			}
		}
	case optSchedule:
		typ := models.HookTriggerType(opts.str("trigger"))
		if typ == "" && opts.str(optHook) != "" {
			if h, err := b.svc.GetHook(ctx, opts.str(optHook)); err == nil {
				typ = h.Trigger.Type
			}
		}
		suggestions := scheduleSuggestions(typ)
		if raw != "" && len(raw) <= 100 && !slices.ContainsFunc(suggestions, func(s [2]string) bool { return s[0] == raw }) {
			// What was typed comes first: picking the first suggestion keeps it.
			suggestions = append([][2]string{{raw, raw}}, suggestions...)
		}
		for _, s := range suggestions {
			if !addChoice(s[0], s[1]) {
				break
			}
		}
	}
	return choices
}

// taskStatusesFor narrows task suggestions to those a command can act on.
func taskStatusesFor(path string) []models.TaskStatus {
	switch path {
	case "task restart":
		return []models.TaskStatus{models.StatusFailed, models.StatusBlocked, models.StatusPaused, models.StatusCompleted,
			models.StatusWaitingInput, models.StatusAwaitingApproval, models.StatusVerifying, models.StatusAssigned, models.StatusDefined}
	case "task skip":
		return []models.TaskStatus{models.StatusFailed, models.StatusBlocked}
	case "task stop":
		return []models.TaskStatus{models.StatusInProgress}
	case "task cancel":
		var open []models.TaskStatus
		for _, st := range models.TaskStatuses {
			if !st.Terminal() {
				open = append(open, st)
			}
		}
		return open
	case "task approve", "task reject":
		return []models.TaskStatus{models.StatusVerifying, models.StatusAwaitingApproval}
	case "task answer":
		return []models.TaskStatus{models.StatusWaitingInput}
	case "task result":
		return []models.TaskStatus{models.StatusCompleted, models.StatusVerifying, models.StatusAwaitingApproval}
	}
	return nil
}

// handleMessage reads plain messages: a reply in a task's thread answers
// its open question; a mention of the bot elsewhere gets a proposed
// command (with an LLM) or a short help.
func (b *Bot) handleMessage(ctx context.Context, s *discordgo.Session, m *discordgo.Message) {
	if m.Author == nil || m.Author.Bot || m.Author.ID == b.botID() {
		return
	}
	taskID, inThread, err := b.box.ThreadTask(ctx, m.ChannelID)
	if err != nil {
		b.log.Warn("look up thread", "channel_id", m.ChannelID, "err", err)
		return
	}
	mentioned := false
	for _, u := range m.Mentions {
		if u != nil && u.ID == b.botID() {
			mentioned = true
		}
	}
	if !inThread && !mentioned {
		return
	}
	if !b.authorized(m.Author.ID) {
		if mentioned || inThread {
			b.log.Warn("discord message ignored: user not authorized", "user", m.Author.ID, "channel_id", m.ChannelID)
		}
		return
	}
	if inThread && strings.TrimSpace(m.Content) != "" && !mentioned {
		b.threadReply(ctx, s, m, taskID)
		return
	}
	if mentioned {
		b.mentioned(ctx, s, m)
	}
}

func (b *Bot) botID() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.botUserID
}

// threadReply answers a task's open question with a person's message in
// its thread. Messages while no question is open are conversation.
func (b *Bot) threadReply(ctx context.Context, s *discordgo.Session, m *discordgo.Message, taskID string) {
	qs, err := b.svc.TaskQuestions(ctx, taskID)
	if err != nil {
		b.log.Warn("questions of thread task", "task_id", taskID, "err", err)
		return
	}
	for i := len(qs) - 1; i >= 0; i-- {
		if qs[i].Answer != nil {
			continue
		}
		if m.Member != nil {
			ctx = withRoles(ctx, m.Member.Roles)
		}
		r := b.answer(ctx, qs[i].ID, m.Content, m.Author.ID)
		ref := &discordgo.MessageReference{MessageID: m.ID, ChannelID: m.ChannelID}
		if _, err := s.ChannelMessageSendComplex(m.ChannelID, &discordgo.MessageSend{Content: firstLine(r.Content), Reference: ref,
			AllowedMentions: &discordgo.MessageAllowedMentions{}}, discordgo.WithContext(ctx)); err != nil {
			b.log.Warn("confirm thread answer", "task_id", taskID, "err", err)
		}
		return
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
