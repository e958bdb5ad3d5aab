package discord

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
)

// maxProgressLines is how many progress lines one coalesced post shows.
const maxProgressLines = 10

// notice is an outbox message to render: the task and project it belongs
// to, the task's title where the payload names it, and the payload, of its
// kind's type (models.DecodeNotice).
type notice struct {
	TaskID    string
	ProjectID string
	Title     string
	payload   any
	// kind is the outbox message's kind, set when it is rendered.
	kind models.NoticeKind
}

// decodeNotice decodes an outbox message's payload.
func decodeNotice(kind models.NoticeKind, payload string) (notice, error) {
	n, err := models.DecodeNotice(kind, payload)
	if err != nil {
		return notice{}, err
	}
	return noticeOf(n), nil
}

// noticeOf is the notice to render of a decoded one.
func noticeOf(n models.Notice) notice {
	out := notice{TaskID: n.TaskID, ProjectID: n.ProjectID, payload: n.Payload}
	switch p := n.Payload.(type) {
	case models.TransitionNotice:
		out.Title = p.Title
	case models.ApprovalNeededNotice:
		out.Title = p.Title
	case models.LandingWaitsNotice:
		out.Title = p.Title
	case models.TaskDeletedNotice:
		out.Title = p.Title
	}
	return out
}

// payloadOf returns a notice's payload as its kind's type.
func payloadOf[T any](n notice) (T, error) {
	p, ok := n.payload.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("%w: a notice without its payload (%T, want %T)", errPermanent, n.payload, zero)
	}
	return p, nil
}

// part is one message to post: in the project's channel, or in the task's
// thread.
type part struct {
	Thread     bool
	Content    string
	Components []discordgo.MessageComponent
	File       *attachment
	// Anchor marks the channel notice a new task thread starts from.
	Anchor bool
	// Flags are the message's flags (suppressed embeds).
	Flags discordgo.MessageFlags
	// Channel, when set, is the channel a channel part goes to instead of
	// the project's (an escalation's channel).
	Channel string
	// Roles are the roles the part may mention (an escalation's role);
	// nothing else in a notice pings anyone.
	Roles []string
}

// textParts renders a long text as messages under the limit, or as an
// attached file when it would take more than three.
func textParts(thread bool, head, body string) []part {
	full := head
	if body != "" {
		full += "\n" + body
	}
	chunks := split(full, messageLimit)
	if len(chunks) <= 3 {
		out := make([]part, len(chunks))
		for i, c := range chunks {
			out[i] = part{Thread: thread, Content: c}
		}
		return out
	}
	return []part{{Thread: thread, Content: cut(head, 1500) + "\n*(full text attached)*", File: &attachment{Name: "text.txt", Body: full}}}
}

// progressParts condenses progress lines into one thread post under the
// message limit: the newest lines that fit (at most maxProgressLines), and
// how many earlier ones were left out.
func progressParts(lines []string) []part {
	var kept []string
	size := 0
	for i := len(lines) - 1; i >= 0 && len(kept) < maxProgressLines; i-- {
		l := strings.TrimSpace(strings.ReplaceAll(lines[i], "\n", " "))
		if l == "" {
			continue
		}
		l = "• " + escape(cut(l, 300))
		if size+len([]rune(l))+1 > messageLimit-100 {
			break
		}
		size += len([]rune(l)) + 1
		kept = append(kept, l)
	}
	if len(kept) == 0 {
		return nil
	}
	slices.Reverse(kept)
	var b strings.Builder
	if n := countNonEmpty(lines) - len(kept); n > 0 {
		fmt.Fprintf(&b, "*(%d earlier lines)*\n", n)
	}
	b.WriteString(strings.Join(kept, "\n"))
	return []part{{Thread: true, Content: b.String()}}
}

func countNonEmpty(lines []string) int {
	n := 0
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}

// runParts is the run-end line of a task's thread: the latest ended run
// of the task, when it reported anything about its CLI.
func runParts(d models.TaskDetail) []part {
	for i := len(d.Runs) - 1; i >= 0; i-- {
		if d.Runs[i].EndedAt == nil {
			continue
		}
		if line := renderRun(d.Runs[i]); line != "" {
			return []part{{Thread: true, Content: cut(line, messageLimit)}}
		}
		return nil
	}
	return nil
}

// noticeRenderers render each kind of notice Discord posts. A progress
// notice is not here: the delivery coalesces a task's progress lines
// (progressParts); nor is task.waiting_input, whose question's own notice
// (task.question) asks in the task's thread.
var noticeRenderers = map[models.NoticeKind]func(*Bot, context.Context, notice) ([]part, error){
	models.NoticeTaskStarted:          (*Bot).startedParts,
	models.NoticeTaskQuestion:         (*Bot).questionParts,
	models.NoticeTaskCompleted:        (*Bot).completedParts,
	models.NoticeTaskFailed:           (*Bot).failedParts,
	models.NoticeTaskBlocked:          (*Bot).blockedParts,
	models.NoticeChainBroken:          (*Bot).chainBrokenParts,
	models.NoticeTaskPaused:           (*Bot).pausedParts,
	models.NoticeTaskAwaitingApproval: (*Bot).awaitingApprovalParts,
	models.NoticeTaskApprovalNeeded:   (*Bot).approvalNeededParts,
	models.NoticeTaskDeleted:          (*Bot).deletedParts,
	models.NoticeTaskLandingWaits:     (*Bot).landingWaitsParts,
	models.NoticePlanFailed:           (*Bot).planFailedParts,
	models.NoticeHookMessage:          (*Bot).hookNoticeParts,
	models.NoticeRunSuccess:           (*Bot).runEndedParts,
	models.NoticeRunFailed:            (*Bot).runEndedParts,
	models.NoticeRunCancelled:         (*Bot).runEndedParts,
	models.NoticeDeskEscalation:       (*Bot).deskEscalationParts,
	models.NoticeDeskDigest:           (*Bot).deskDigestParts,
}

// noticeParts renders a notice of a given kind; a kind Discord does not
// post renders as nothing.
func (b *Bot) noticeParts(ctx context.Context, kind models.NoticeKind, n notice) ([]part, error) {
	render, ok := noticeRenderers[kind]
	if !ok {
		b.log.Debug("notice kind not posted to discord", "kind", kind)
		return nil, nil
	}
	n.kind = kind
	return render(b, ctx, n)
}

// noticeTitle is the task's title of a notice, for a line.
func noticeTitle(n notice) string { return escape(cut(n.Title, 120)) }

// noticeID is the task's id of a notice, for a line.
func noticeID(n notice) string { return "`" + n.TaskID + "`" }

func (b *Bot) startedParts(ctx context.Context, n notice) ([]part, error) {
	title, id := noticeTitle(n), noticeID(n)
	t, ok, err := b.box.TaskThread(ctx, n.TaskID)
	if err != nil {
		return nil, err
	}
	by := ""
	if d, err := b.svc.GetTaskDetail(ctx, n.TaskID); err == nil {
		if d.Task.AssignedAgentID != nil {
			by = " by agent `" + *d.Task.AssignedAgentID + "`"
		}
		if d.Task.RetryCount > 0 {
			by += fmt.Sprintf(" (attempt %d)", d.Task.RetryCount+1)
		}
	}
	if !ok {
		return []part{{Anchor: true, Content: fmt.Sprintf("▶️ %s %s started%s", id, title, by)}}, nil
	}
	return []part{{Content: fmt.Sprintf("▶️ %s %s started%s → <#%s>", id, title, by, t.ThreadID)},
		{Thread: true, Content: "▶️ Started" + by}}, nil
}

func (b *Bot) questionParts(ctx context.Context, n notice) ([]part, error) {
	q, err := payloadOf[models.Question](n)
	if err != nil {
		return nil, err
	}
	title, id := noticeTitle(n), noticeID(n)
	if title == "" {
		if d, err := b.svc.GetTaskDetail(ctx, n.TaskID); err == nil {
			title = escape(cut(d.Task.Title, 120))
		}
	}
	return []part{{Thread: true, Content: fmt.Sprintf("❓ **Question #%d**\n%s", q.ID, quote(cut(q.Text, 1800))),
		Components: buttons(button("Answer", discordgo.PrimaryButton, customID("answer", strconv.FormatInt(q.ID, 10), n.TaskID)),
			cancelButton(n.TaskID, models.StatusWaitingInput))},
		{Content: fmt.Sprintf("❓ %s %s is waiting for your answer in %s", id, title, threadLink)}}, nil
}

func (b *Bot) completedParts(ctx context.Context, n notice) ([]part, error) {
	c, err := payloadOf[models.TransitionNotice](n)
	if err != nil {
		return nil, err
	}
	out := []part{{Content: fmt.Sprintf("✅ %s %s completed%s → %s", noticeID(n), noticeTitle(n), byActor(c), threadLink)}}
	d, err := b.svc.GetTaskDetail(ctx, n.TaskID)
	if err == nil && d.Result != nil {
		out = append(out, textParts(true, "✅ **Completed**", renderResultBody(*d.Result))...)
	} else {
		out = append(out, part{Thread: true, Content: "✅ **Completed**" + byActor(c)})
	}
	if err == nil {
		out = append(out, runParts(d)...)
	}
	return out, nil
}

func (b *Bot) failedParts(ctx context.Context, n notice) ([]part, error) {
	c, err := payloadOf[models.TransitionNotice](n)
	if err != nil {
		return nil, err
	}
	attempt := ""
	var run []part
	if d, err := b.svc.GetTaskDetail(ctx, n.TaskID); err == nil {
		attempt = fmt.Sprintf(" (attempt %d of %d)", d.Task.RetryCount+1, d.Task.MaxRetries+1)
		run = runParts(d)
	}
	reason := reasonLine(c.Reason)
	return append([]part{{Content: fmt.Sprintf("❌ %s %s failed%s%s", noticeID(n), noticeTitle(n), attempt, reason),
		Components: buttons(
			button("Retry now", discordgo.PrimaryButton, customID("event", string(models.EventAdminRestart), n.TaskID, string(models.StatusFailed))),
			button("Skip", discordgo.SecondaryButton, customID("event", string(models.EventAdminSkip), n.TaskID, string(models.StatusFailed))),
			button("View error", discordgo.SecondaryButton, customID("error", n.TaskID)),
			cancelButton(n.TaskID, models.StatusFailed))},
		{Thread: true, Content: "❌ **Failed**" + attempt + reason}}, run...), nil
}

func (b *Bot) blockedParts(ctx context.Context, n notice) ([]part, error) {
	c, err := payloadOf[models.TransitionNotice](n)
	if err != nil {
		return nil, err
	}
	if c.Event == models.EventUpstreamFailed {
		return nil, nil // told once, by the chain.broken notice of its root
	}
	reason := reasonLine(c.Reason)
	if b.blockedBehind(ctx, n) {
		// The chain.broken notice carries the buttons: one live set.
		return []part{{Thread: true, Content: "⛔ **Blocked**" + reason}}, nil
	}
	return []part{{Content: fmt.Sprintf("⛔ %s %s is blocked%s%s", noticeID(n), noticeTitle(n), reason, byActor(c)),
		Components: buttons(
			button("Restart", discordgo.PrimaryButton, customID("event", string(models.EventAdminRestart), n.TaskID, string(models.StatusBlocked))),
			button("Skip", discordgo.SecondaryButton, customID("event", string(models.EventAdminSkip), n.TaskID, string(models.StatusBlocked))))},
		{Thread: true, Content: "⛔ **Blocked**" + reason}}, nil
}

func (b *Bot) chainBrokenParts(ctx context.Context, n notice) ([]part, error) {
	c, err := payloadOf[models.TransitionNotice](n)
	if err != nil {
		return nil, err
	}
	blocked := make([]string, len(c.Blocked))
	for i, t := range c.Blocked {
		blocked[i] = "`" + t + "`"
	}
	root, rootTitle := n.TaskID, noticeTitle(n)
	if c.Event == models.EventUpstreamFailed {
		// Tasks created behind a blocked task: the root is theirs.
		if d, err := b.svc.GetTaskDetail(ctx, n.TaskID); err == nil && d.Task.CascadeRootID != "" {
			root = d.Task.CascadeRootID
			if rd, err := b.svc.GetTaskDetail(ctx, root); err == nil {
				rootTitle = escape(cut(rd.Task.Title, 120))
			}
		}
	}
	msg := fmt.Sprintf("⛓️ Chain broken at `%s` %s%s\nBlocked with it: %s", root, rootTitle, reasonLine(c.Reason),
		strings.Join(blocked, ", "))
	return []part{{Content: cut(msg, messageLimit), Components: buttons(
		button("Restart "+root, discordgo.PrimaryButton, customID("event", string(models.EventAdminRestart), root, string(models.StatusBlocked))),
		button("Skip "+root, discordgo.SecondaryButton, customID("event", string(models.EventAdminSkip), root, string(models.StatusBlocked))))}}, nil
}

func (b *Bot) pausedParts(ctx context.Context, n notice) ([]part, error) {
	c, err := payloadOf[models.TransitionNotice](n)
	if err != nil {
		return nil, err
	}
	until := ""
	var run []part
	if d, err := b.svc.GetTaskDetail(ctx, n.TaskID); err == nil {
		if d.Task.ResumeAfter != nil {
			until = " until " + renderTime(*d.Task.ResumeAfter)
		}
		run = runParts(d)
	}
	return append([]part{{Content: fmt.Sprintf("⏸️ %s %s paused%s%s", noticeID(n), noticeTitle(n), until, reasonLine(c.Reason))},
		{Thread: true, Content: "⏸️ **Paused**" + until + reasonLine(c.Reason)}}, run...), nil
}

func (b *Bot) awaitingApprovalParts(ctx context.Context, n notice) ([]part, error) {
	c, err := payloadOf[models.TransitionNotice](n)
	if err != nil {
		return nil, err
	}
	title, id := noticeTitle(n), noticeID(n)
	d, err := b.svc.GetTaskDetail(ctx, n.TaskID)
	if err != nil {
		return nil, err
	}
	// A pull request of an earlier attempt does not count when this
	// one waits for a person without one.
	local := d.Verification != nil && d.Verification.Phase == models.PhaseApproval
	if d.Task.PRURL != nil && *d.Task.PRURL != "" && !local {
		return []part{{Content: fmt.Sprintf("🙋 %s %s waits for its pull request to be merged: %s", id, title, *d.Task.PRURL),
			Components: buttons(linkButton("Open pull request", *d.Task.PRURL), cancelButton(n.TaskID, models.StatusAwaitingApproval))}}, nil
	}
	return []part{{Content: fmt.Sprintf("🙋 %s %s needs your approval%s", id, title, reasonLine(c.Reason)), Components: approvalButtons(n.TaskID, models.StatusAwaitingApproval)}}, nil
}

func (b *Bot) approvalNeededParts(_ context.Context, n notice) ([]part, error) {
	a, err := payloadOf[models.ApprovalNeededNotice](n)
	if err != nil {
		return nil, err
	}
	files := ""
	if len(a.Files) > 0 {
		fs := a.Files
		if len(fs) > 10 {
			fs = fs[:10]
		}
		files = "\nfiles: `" + strings.Join(fs, "`, `") + "`"
		if len(a.Files) > 10 {
			files += fmt.Sprintf(" and %d more", len(a.Files)-10)
		}
	}
	return []part{{Content: fmt.Sprintf("🙋 %s %s is ready and needs your approval%s", noticeID(n), noticeTitle(n), files),
		Components: approvalButtons(n.TaskID, models.StatusVerifying)}}, nil
}

func (b *Bot) deletedParts(_ context.Context, n notice) ([]part, error) {
	return []part{{Content: fmt.Sprintf("🗑️ %s %s was deleted", noticeID(n), noticeTitle(n))}}, nil
}

func (b *Bot) landingWaitsParts(_ context.Context, n notice) ([]part, error) {
	l, err := payloadOf[models.LandingWaitsNotice](n)
	if err != nil {
		return nil, err
	}
	return []part{{Content: fmt.Sprintf("🛬 %s %s is verified and waits to land%s", noticeID(n), noticeTitle(n), reasonLine(l.Reason))},
		{Thread: true, Content: "🛬 **Waiting to land**" + reasonLine(l.Reason)}}, nil
}

func (b *Bot) planFailedParts(_ context.Context, n notice) ([]part, error) {
	p, err := payloadOf[models.PlanFailedNotice](n)
	if err != nil {
		return nil, err
	}
	return []part{{Content: fmt.Sprintf("📝 The plan of %s could not be created: %s", noticeID(n), escape(cut(p.Error, 500)))}}, nil
}

func (b *Bot) hookNoticeParts(_ context.Context, n notice) ([]part, error) {
	m, err := payloadOf[models.HookMessage](n)
	if err != nil {
		return nil, err
	}
	return hookMessageParts(m), nil
}

func (b *Bot) runEndedParts(_ context.Context, n notice) ([]part, error) {
	r, err := payloadOf[models.RunEndedNotice](n)
	if err != nil {
		return nil, err
	}
	return runNoticeParts(n.kind, r), nil
}

// approvalButtons are the actions of a task waiting, in status, for a
// person's decision.
func approvalButtons(taskID string, status models.TaskStatus) []discordgo.MessageComponent {
	return buttons(
		button("Approve", discordgo.SuccessButton, customID("approve", taskID)),
		button("Reject", discordgo.DangerButton, customID("reject", taskID)),
		button("Diff", discordgo.SecondaryButton, customID("diff", taskID)),
		cancelButton(taskID, status))
}

// cancelButton cancels (ADMIN_CANCEL) a task the notice showed in status;
// pressed after the task moved on, it changes nothing and says so.
func cancelButton(taskID string, status models.TaskStatus) discordgo.MessageComponent {
	return button("Cancel", discordgo.DangerButton, customID("event", string(models.EventAdminCancel), taskID, string(status)))
}

func reasonLine(reason string) string {
	if strings.TrimSpace(reason) == "" {
		return ""
	}
	return ": " + escape(cut(strings.TrimSpace(strings.ReplaceAll(models.RedactURL(reason), "\n", " ")), 300))
}

func byActor(n models.TransitionNotice) string {
	if strings.HasPrefix(n.Actor, "discord:") {
		return " by " + renderActor(n.Actor)
	}
	return ""
}

// blockedBehind reports whether other tasks are blocked with n's task as
// their root cause.
func (b *Bot) blockedBehind(ctx context.Context, n notice) bool {
	ts, err := b.svc.ListTasks(ctx, models.TaskFilter{ProjectID: n.ProjectID, Statuses: []models.TaskStatus{models.StatusBlocked}, Limit: 1000})
	if err != nil {
		return false
	}
	for _, t := range ts {
		if t.CascadeRootID == n.TaskID {
			return true
		}
	}
	return false
}

// hookMessageParts renders a hook's message for its project's channel. The
// text comes from an LLM: it is escaped (no markdown, masked links or
// mentions), shows no previews of the links it names, and is cut to one
// message, the whole text attached when cut.
func hookMessageParts(m models.HookMessage) []part {
	p := hookMessagePart(m)
	p.Flags = discordgo.MessageFlagsSuppressEmbeds
	return []part{p}
}

func hookMessagePart(m models.HookMessage) part {
	name := strings.TrimSpace(m.HookName)
	if name == "" {
		name = m.HookID
	}
	head := fmt.Sprintf("🪝 **%s** (`%s`)", escape(cut(name, 100)), strings.ReplaceAll(cut(m.RunID, 100), "`", ""))
	body := strings.TrimSpace(m.Text)
	if body == "" {
		return part{Content: head + "\n*(empty)*"}
	}
	budget := messageLimit - utf8.RuneCountInString(head) - 1
	if escaped, cutShort := escapeFit(body, budget); !cutShort {
		return part{Content: head + "\n" + escaped}
	}
	const note = "\n*(full text attached)*"
	escaped, _ := escapeFit(body, budget-utf8.RuneCountInString(note))
	return part{Content: head + "\n" + escaped + note, File: &attachment{Name: "hook-message.txt", Body: body}}
}

// escapeFit escapes s within n characters: whole when it fits, else as
// much as fits before a "…", never splitting an escape.
func escapeFit(s string, n int) (string, bool) {
	if e := escape(s); utf8.RuneCountInString(e) <= n {
		return e, false
	}
	var b strings.Builder
	used := 0
	for _, r := range s {
		e := escape(string(r))
		k := utf8.RuneCountInString(e)
		if used+k > n-1 {
			break
		}
		b.WriteString(e)
		used += k
	}
	return b.String() + "…", true
}

// runNoticeParts renders a run's end for its project's channel; a failed
// run's notice has a Retry button.
func runNoticeParts(kind models.NoticeKind, m models.RunEndedNotice) []part {
	head := fmt.Sprintf("Run %s of **%s**", inlineCode(m.RunID), escape(cut(m.Workflow, 100)))
	reason := ""
	if strings.TrimSpace(m.Reason) != "" {
		reason = ": " + runReason(m.Reason, 300)
	}
	switch kind {
	case models.NoticeRunSuccess:
		return []part{{Content: "✅ " + head + " succeeded"}}
	case models.NoticeRunFailed:
		p := part{Content: "❌ " + head + " failed" + reason}
		if validRunID(m.RunID) {
			p.Components = buttons(button("Retry", discordgo.PrimaryButton, customID("run-retry", m.RunID, string(models.RunFailed))))
		}
		return []part{p}
	}
	return []part{{Content: "🛑 " + head + " was cancelled" + reason}}
}
