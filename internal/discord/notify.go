package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Discord error codes the notifier acts on.
const (
	codeUnknownChannel      = 10003
	codeThreadAlreadyExists = 160004
)

// threadLink in a part's content is replaced by a link to the task's thread.
const threadLink = "{thread}"

// outboxBatch is how many notices one pass reads.
const outboxBatch = 100

// maxProgressLines is how many progress lines one coalesced post shows.
const maxProgressLines = 10

// notice is the decoded payload of an outbox message.
type notice struct {
	TaskID    string            `json:"task_id"`
	ProjectID string            `json:"project_id"`
	Title     string            `json:"title"`
	From      models.TaskStatus `json:"from"`
	To        models.TaskStatus `json:"to"`
	Event     models.TaskEvent  `json:"event"`
	Reason    string            `json:"reason"`
	Actor     string            `json:"actor"`
	Blocked   []string          `json:"blocked"`
	// task.progress
	Message string `json:"message"`
	RunID   int64  `json:"run_id"`
	// task.question
	ID   int64  `json:"id"`
	Text string `json:"text"`
	// task.approval_needed
	Files []string `json:"files"`
	// plan.failed
	Error string `json:"error"`

	// hook is a hook's message (hook.message), whose payload is its own.
	hook *hookMessage
	// run is a run's end (run.success, run.failed, run.cancelled), whose
	// payload is its own.
	run *runNotice
}

// decodeNotice decodes an outbox message's payload.
func decodeNotice(kind, payload string) (notice, error) {
	var n notice
	if kind == hookMessageKind {
		var m hookMessage
		if err := json.Unmarshal([]byte(payload), &m); err != nil {
			return n, err
		}
		n.ProjectID, n.hook = m.ProjectID, &m
		return n, nil
	}
	if isRunNotice(kind) {
		var m runNotice
		if err := json.Unmarshal([]byte(payload), &m); err != nil {
			return n, err
		}
		n.ProjectID, n.run = m.ProjectID, &m
		return n, nil
	}
	err := json.Unmarshal([]byte(payload), &n)
	return n, err
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
}

// deliverLoop delivers the outbox until ctx ends.
func (b *Bot) deliverLoop(ctx context.Context) {
	for {
		wait, hold := b.deliverPending(ctx)
		t := time.NewTimer(wait)
		if hold {
			// Discord asked for a pause: wakes do not shorten it.
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-b.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// deliverPending delivers the due notices, oldest first, and returns how
// long to wait before the next pass, and whether Discord asked for that
// pause (a rate limit). One task's notices keep their order: once one of
// them waits, the task's later ones wait too (the store holds them back
// across passes).
func (b *Bot) deliverPending(ctx context.Context) (time.Duration, bool) {
	b.pruneLastPost()
	wait := b.cfg.PollInterval
	held := map[string]bool{}
	var after int64
	// A page whose notices all wait (one chatty task's progress) does not
	// keep the notices behind it from being read.
	for range maxPages {
		msgs, err := b.box.PendingOutboxAfter(ctx, after, outboxBatch)
		if err != nil {
			if ctx.Err() == nil {
				b.log.Warn("read outbox", "err", err)
			}
			return b.cfg.PollInterval, false
		}
		w, hold, delivered := b.deliverPage(ctx, msgs, held)
		if hold {
			return w, true
		}
		wait = min(wait, w)
		if len(msgs) < outboxBatch || ctx.Err() != nil {
			return wait, false
		}
		if delivered {
			return 0, false // more are waiting: read from the start again
		}
		after = msgs[len(msgs)-1].ID
	}
	return wait, false
}

// maxPages bounds the pages of waiting notices one pass reads.
const maxPages = 20

// deliverPage delivers one page of due notices. It returns the wait before
// the next pass, whether it is a rate limit's, and whether anything went out.
func (b *Bot) deliverPage(ctx context.Context, msgs []models.OutboxMessage, held map[string]bool) (time.Duration, bool, bool) {
	wait := b.cfg.PollInterval
	delivered := false
	done := map[int64]bool{}
	for idx, m := range msgs {
		if ctx.Err() != nil {
			return wait, false, delivered
		}
		if done[m.ID] || (m.TaskID != "" && held[m.TaskID]) {
			continue
		}
		batch := []models.OutboxMessage{m}
		if m.Kind == "task.progress" {
			if next, ok := b.progressDue(m.TaskID); !ok {
				held[m.TaskID] = true
				wait = min(wait, next)
				continue
			}
			batch = progressRun(msgs[idx:], m.TaskID)
		}
		// A delivery under way finishes (post and mark) even when the bot
		// is shutting down, so a restart does not post it twice.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*b.cfg.HTTPTimeout)
		err := b.safeDeliver(dctx, batch)
		cancel()
		// The bookkeeping gets its own deadline: a delivery that used up
		// its own must still be recorded.
		bctx, bcancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeepingTimeout)
		var rl *discordgo.RateLimitError
		switch {
		case errors.As(err, &rl):
			bcancel()
			b.log.Info("discord rate limit; waiting", "retry_after", rl.RetryAfter, "url", redactURL(rl.URL))
			return max(rl.RetryAfter, 10*time.Millisecond), true, delivered
		case err != nil:
			held[m.TaskID] = m.TaskID != ""
			for _, d := range batch {
				done[d.ID] = true
				b.failed(bctx, d, err)
			}
			bcancel()
			continue
		}
		delivered = true
		for _, d := range batch {
			done[d.ID] = true
			if err := b.box.MarkOutboxDelivered(bctx, d.ID); err != nil {
				b.log.Warn("mark notice delivered", "outbox_id", d.ID, "err", err)
			}
		}
		bcancel()
	}
	return wait, false, delivered
}

// bookkeepingTimeout bounds recording a delivery's outcome.
const bookkeepingTimeout = 5 * time.Second

// safeDeliver is deliver, with a panic turned into a failed delivery.
func (b *Bot) safeDeliver(ctx context.Context, batch []models.OutboxMessage) (err error) {
	defer func() {
		if p := recover(); p != nil {
			b.log.Error("discord notice panicked", "outbox_id", batch[0].ID, "kind", batch[0].Kind, "panic", p,
				"stack", string(debug.Stack()))
			err = fmt.Errorf("%w: %v", errPermanent, p)
		}
	}()
	return b.deliver(ctx, batch)
}

// errPermanent marks a delivery failure that trying again cannot mend.
var errPermanent = errors.New("cannot be delivered")

// permanent reports whether a delivery error is one retries cannot mend:
// Discord refused the message itself (bad form, missing access or
// permission, unknown channel) rather than failing to take it.
func permanent(err error) bool {
	if errors.Is(err, errPermanent) {
		return true
	}
	var rest *discordgo.RESTError
	if errors.As(err, &rest) && rest.Response != nil {
		switch rest.Response.StatusCode {
		case http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound, http.StatusRequestEntityTooLarge:
			return true
		}
	}
	return false
}

// pruneLastPost forgets the progress post times that no longer matter.
func (b *Bot) pruneLastPost() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.cfg.Clock.Now()
	for id, t := range b.lastPost {
		if now.Sub(t) > b.cfg.ProgressInterval {
			delete(b.lastPost, id)
		}
	}
}

// progressDue reports whether a task's thread may get a progress post now,
// else how long until it may.
func (b *Bot) progressDue(taskID string) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	last, ok := b.lastPost[taskID]
	if !ok {
		return 0, true
	}
	next := last.Add(b.cfg.ProgressInterval).Sub(b.cfg.Clock.Now())
	return next, next <= 0
}

// progressRun returns the task's progress notices at the head of msgs, up
// to its first notice of another kind.
func progressRun(msgs []models.OutboxMessage, taskID string) []models.OutboxMessage {
	var out []models.OutboxMessage
	for _, m := range msgs {
		if m.TaskID != taskID {
			continue
		}
		if m.Kind != "task.progress" {
			break
		}
		out = append(out, m)
	}
	return out
}

// failed records a failed delivery: given up at once when Discord refused
// the message itself, else tried again with backoff up to
// MaxDeliveryAttempts.
func (b *Bot) failed(ctx context.Context, m models.OutboxMessage, err error) {
	reason := redactURL(err.Error())
	log := b.log.With("outbox_id", m.ID, "kind", m.Kind, "task_id", m.TaskID, "attempt", m.Attempts+1)
	if permanent(err) || m.Attempts+1 >= b.cfg.MaxDeliveryAttempts {
		log.Error("discord notice given up", "err", reason)
		if err := b.box.GiveUpOutbox(ctx, m.ID, reason); err != nil {
			log.Warn("mark notice given up", "err", err)
		}
		return
	}
	backoff := b.cfg.RetryBackoff
	for range m.Attempts {
		backoff = min(backoff*2, b.cfg.MaxRetryBackoff)
	}
	log.Warn("discord notice not delivered; will retry", "err", reason, "in", backoff)
	if err := b.box.MarkOutboxFailed(ctx, m.ID, b.cfg.Clock.Now().Add(backoff), reason); err != nil {
		log.Warn("mark notice failed", "err", err)
	}
}

// deliver posts one notice (or a run of one task's progress notices).
func (b *Bot) deliver(ctx context.Context, batch []models.OutboxMessage) error {
	m := batch[0]
	n, err := decodeNotice(m.Kind, m.Payload)
	if err != nil {
		return fmt.Errorf("%w: undecodable payload: %v", errPermanent, err)
	}
	if n.TaskID == "" {
		n.TaskID = m.TaskID
	}
	if n.ProjectID == "" {
		n.ProjectID = m.ProjectID
	}
	var parts []part
	if m.Kind == "task.progress" {
		var lines []string
		for _, p := range batch {
			var pn notice
			if json.Unmarshal([]byte(p.Payload), &pn) == nil && strings.TrimSpace(pn.Message) != "" {
				lines = append(lines, pn.Message)
			}
		}
		parts = progressParts(lines)
	} else {
		parts, err = b.noticeParts(ctx, m.Kind, n)
		if err != nil {
			return err
		}
	}
	if m.Kind == "task.deleted" {
		if err := b.closeThread(ctx, n.TaskID); err != nil {
			if !permanent(err) {
				return err
			}
			// Missing Manage Threads: the notice still goes out.
			b.log.Warn("close the thread of a deleted task", "task_id", n.TaskID, "err", redactURL(err.Error()))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	channelID, err := b.projectChannel(ctx, n.ProjectID)
	if err != nil {
		return err
	}
	last := batch[len(batch)-1]
	for i, p := range parts {
		if i < m.PartsDone {
			continue // delivered before an interruption
		}
		pn := nonce(m.ID, last.ID, i)
		// Only a task's notices link to its thread: a project's (a hook's
		// message, a run's end) shows the text as it is.
		if n.TaskID != "" && strings.Contains(p.Content, threadLink) {
			thread, err := b.thread(ctx, channelID, n)
			if err != nil {
				return err
			}
			p.Content = strings.ReplaceAll(p.Content, threadLink, "<#"+thread+">")
		}
		if !p.Thread {
			msg, err := b.postChannel(ctx, channelID, pn, p)
			if err != nil {
				return err
			}
			if p.Anchor {
				if _, err := b.threadFrom(ctx, n, msg); err != nil {
					return err
				}
			}
			if len(parts) > 1 && i < len(parts)-1 {
				if err := b.box.MarkOutboxPart(ctx, m.ID, i+1); err != nil {
					return err
				}
			}
			continue
		}
		if err := b.postThread(ctx, channelID, n, pn, p); err != nil {
			return err
		}
		if m.Kind == "task.progress" {
			b.mu.Lock()
			b.lastPost[m.TaskID] = b.cfg.Clock.Now()
			b.mu.Unlock()
		}
		if len(parts) > 1 && i < len(parts)-1 {
			if err := b.box.MarkOutboxPart(ctx, m.ID, i+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// postThread posts into the task's thread; a thread deleted in Discord is
// replaced by a new one.
func (b *Bot) postThread(ctx context.Context, channelID string, n notice, nonce string, p part) error {
	thread, err := b.thread(ctx, channelID, n)
	if err != nil {
		return err
	}
	_, err = b.send(ctx, thread, nonce, p)
	if discordCode(err) != codeUnknownChannel {
		return err
	}
	b.log.Warn("task thread gone from discord; opening a new one", "task_id", n.TaskID, "thread_id", thread)
	if err := b.box.ForgetTaskThread(ctx, n.TaskID, thread); err != nil {
		return err
	}
	// The new anchor's nonce differs from the old one's, which Discord may
	// still remember.
	if thread, err = b.threadAnchored(ctx, channelID, n, threadNonce(n.TaskID+"|"+thread)); err != nil {
		return err
	}
	_, err = b.send(ctx, thread, nonce, p)
	return err
}

// nonce is the idempotency nonce of part i of the notices first..last (at
// most 25 characters, as Discord allows).
func nonce(first, last int64, i int) string {
	n := "aq" + strconv.FormatInt(first, 36)
	if last != first {
		n += "-" + strconv.FormatInt(last, 36)
	}
	return n + "-" + strconv.Itoa(i)
}

// postChannel posts into a project's channel, falling back to the control
// channel when the project's channel is gone.
func (b *Bot) postChannel(ctx context.Context, channelID, nonce string, p part) (*discordgo.Message, error) {
	msg, err := b.send(ctx, channelID, nonce, p)
	if discordCode(err) == codeUnknownChannel && channelID != b.cfg.ControlChannelID {
		b.log.Warn("project channel unknown to discord; using the control channel", "channel_id", channelID)
		return b.send(ctx, b.cfg.ControlChannelID, nonce, p)
	}
	return msg, err
}

// projectChannel is where a project's notices go.
func (b *Bot) projectChannel(ctx context.Context, projectID string) (string, error) {
	if projectID == "" {
		return b.cfg.ControlChannelID, nil
	}
	p, err := b.svc.GetProject(ctx, projectID)
	if models.ErrorCodeOf(err) == models.CodeNotFound {
		return b.cfg.ControlChannelID, nil
	}
	if err != nil {
		return "", err
	}
	if p.DiscordChannelID != nil && *p.DiscordChannelID != "" {
		return *p.DiscordChannelID, nil
	}
	return b.cfg.ControlChannelID, nil
}

// thread returns the task's thread, creating it (from an anchor notice in
// the channel) when the task has none yet.
func (b *Bot) thread(ctx context.Context, channelID string, n notice) (string, error) {
	return b.threadAnchored(ctx, channelID, n, threadNonce(n.TaskID))
}

// threadAnchored is thread with the nonce of the anchor to post.
func (b *Bot) threadAnchored(ctx context.Context, channelID string, n notice, anchorNonce string) (string, error) {
	t, ok, err := b.box.TaskThread(ctx, n.TaskID)
	if err != nil {
		return "", err
	}
	if ok {
		return t.ThreadID, nil
	}
	title := n.Title
	if title == "" {
		if d, err := b.svc.GetTaskDetail(ctx, n.TaskID); err == nil {
			title = d.Task.Title
		}
	}
	// The anchor's nonce is the task's, so a retry after a crash finds the
	// same message (and its thread).
	msg, err := b.postChannel(ctx, channelID, anchorNonce, part{Content: fmt.Sprintf("🧵 `%s` %s", n.TaskID, escape(title))})
	if err != nil {
		return "", err
	}
	n.Title = title
	return b.threadFrom(ctx, n, msg)
}

// threadNonce is the nonce of a task's thread anchor (at most 25 characters).
func threadNonce(taskID string) string {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(taskID); i++ {
		h = (h ^ uint64(taskID[i])) * 1099511628211
	}
	return "aqt" + strconv.FormatUint(h, 36)
}

// threadFrom starts the task's thread on msg and records it. A thread
// started on the message before (a retry after a crash) has the message's
// id, as Discord gives every thread started from a message.
func (b *Bot) threadFrom(ctx context.Context, n notice, msg *discordgo.Message) (string, error) {
	if t, ok, err := b.box.TaskThread(ctx, n.TaskID); err != nil || ok {
		return t.ThreadID, err
	}
	s := b.sess()
	id := msg.ID
	_, err := s.MessageThreadStartComplex(msg.ChannelID, msg.ID, &discordgo.ThreadStart{
		Name: cut(n.TaskID+" · "+n.Title, 100), AutoArchiveDuration: 10080}, discordgo.WithContext(ctx),
		discordgo.WithRetryOnRatelimit(false))
	if err != nil && discordCode(err) != codeThreadAlreadyExists {
		return "", fmt.Errorf("start thread of task %s: %w", n.TaskID, err)
	}
	t, err := b.box.SaveTaskThread(ctx, models.ChatThread{TaskID: n.TaskID, ChannelID: msg.ChannelID, ThreadID: id})
	if err != nil {
		return "", err
	}
	return t.ThreadID, nil
}

func (b *Bot) sess() *discordgo.Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.session
}

// messageCreate is a message with Discord's idempotency nonce: a repeat
// with the same nonce returns the message made the first time.
type messageCreate struct {
	*discordgo.MessageSend
	Nonce        string `json:"nonce,omitempty"`
	EnforceNonce bool   `json:"enforce_nonce,omitempty"`
}

// send posts one message, without discordgo's own rate-limit retries so
// that the outbox can wait (and shut down) on its own terms.
func (b *Bot) send(ctx context.Context, channelID, nonce string, p part) (*discordgo.Message, error) {
	s := b.sess()
	p.Content, p.File = fit(p.Content, p.File)
	m := &discordgo.MessageSend{Content: p.Content, Components: p.Components, Flags: p.Flags,
		AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}}
	if p.File != nil {
		m.Files = []*discordgo.File{p.File.file()}
	}
	body := messageCreate{MessageSend: m, Nonce: nonce, EnforceNonce: nonce != ""}
	endpoint := discordgo.EndpointChannelMessages(channelID)
	opts := []discordgo.RequestOption{discordgo.WithContext(ctx), discordgo.WithRetryOnRatelimit(false)}
	var (
		resp []byte
		err  error
	)
	if len(m.Files) > 0 {
		ct, data, merr := discordgo.MultipartBodyWithJSON(body, m.Files)
		if merr != nil {
			return nil, merr
		}
		resp, err = s.RequestRaw("POST", endpoint, ct, data, endpoint, 0, opts...)
	} else {
		resp, err = s.RequestWithBucketID("POST", endpoint, body, endpoint, opts...)
	}
	if err != nil {
		return nil, err
	}
	var msg discordgo.Message
	if err := json.Unmarshal(resp, &msg); err != nil {
		return nil, fmt.Errorf("decode created message: %w", err)
	}
	if msg.ChannelID == "" {
		msg.ChannelID = channelID
	}
	return &msg, nil
}

// discordCode returns the JSON error code of a Discord REST error, or 0.
func discordCode(err error) int {
	var rest *discordgo.RESTError
	if errors.As(err, &rest) && rest.Message != nil {
		return rest.Message.Code
	}
	return 0
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

// noticeParts renders a notice of a given kind.
func (b *Bot) noticeParts(ctx context.Context, kind string, n notice) ([]part, error) {
	title := escape(cut(n.Title, 120))
	id := "`" + n.TaskID + "`"
	switch kind {
	case "task.started":
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
	case "task.question":
		if title == "" {
			if d, err := b.svc.GetTaskDetail(ctx, n.TaskID); err == nil {
				title = escape(cut(d.Task.Title, 120))
			}
		}
		return []part{{Thread: true, Content: fmt.Sprintf("❓ **Question #%d**\n%s", n.ID, quote(cut(n.Text, 1800))),
			Components: buttons(button("Answer", discordgo.PrimaryButton, customID("answer", strconv.FormatInt(n.ID, 10), n.TaskID)),
				cancelButton(n.TaskID, models.StatusWaitingInput))},
			{Content: fmt.Sprintf("❓ %s %s is waiting for your answer in %s", id, title, threadLink)}}, nil
	case "task.completed":
		out := []part{{Content: fmt.Sprintf("✅ %s %s completed%s → %s", id, title, byActor(n), threadLink)}}
		d, err := b.svc.GetTaskDetail(ctx, n.TaskID)
		if err == nil && d.Result != nil {
			out = append(out, textParts(true, "✅ **Completed**", renderResultBody(*d.Result))...)
		} else {
			out = append(out, part{Thread: true, Content: "✅ **Completed**" + byActor(n)})
		}
		if err == nil {
			out = append(out, runParts(d)...)
		}
		return out, nil
	case "task.failed":
		attempt := ""
		var run []part
		if d, err := b.svc.GetTaskDetail(ctx, n.TaskID); err == nil {
			attempt = fmt.Sprintf(" (attempt %d of %d)", d.Task.RetryCount+1, d.Task.MaxRetries+1)
			run = runParts(d)
		}
		reason := reasonLine(n.Reason)
		return append([]part{{Content: fmt.Sprintf("❌ %s %s failed%s%s", id, title, attempt, reason),
			Components: buttons(
				button("Retry now", discordgo.PrimaryButton, customID("event", string(models.EventAdminRestart), n.TaskID, string(models.StatusFailed))),
				button("Skip", discordgo.SecondaryButton, customID("event", string(models.EventAdminSkip), n.TaskID, string(models.StatusFailed))),
				button("View error", discordgo.SecondaryButton, customID("error", n.TaskID)),
				cancelButton(n.TaskID, models.StatusFailed))},
			{Thread: true, Content: "❌ **Failed**" + attempt + reason}}, run...), nil
	case "task.blocked":
		if n.Event == models.EventUpstreamFailed {
			return nil, nil // told once, by the chain.broken notice of its root
		}
		reason := reasonLine(n.Reason)
		if b.blockedBehind(ctx, n) {
			// The chain.broken notice carries the buttons: one live set.
			return []part{{Thread: true, Content: "⛔ **Blocked**" + reason}}, nil
		}
		return []part{{Content: fmt.Sprintf("⛔ %s %s is blocked%s%s", id, title, reason, byActor(n)),
			Components: buttons(
				button("Restart", discordgo.PrimaryButton, customID("event", string(models.EventAdminRestart), n.TaskID, string(models.StatusBlocked))),
				button("Skip", discordgo.SecondaryButton, customID("event", string(models.EventAdminSkip), n.TaskID, string(models.StatusBlocked))))},
			{Thread: true, Content: "⛔ **Blocked**" + reason}}, nil
	case "chain.broken":
		blocked := make([]string, len(n.Blocked))
		for i, t := range n.Blocked {
			blocked[i] = "`" + t + "`"
		}
		root, rootTitle := n.TaskID, title
		if n.Event == models.EventUpstreamFailed {
			// Tasks created behind a blocked task: the root is theirs.
			if d, err := b.svc.GetTaskDetail(ctx, n.TaskID); err == nil && d.Task.CascadeRootID != "" {
				root = d.Task.CascadeRootID
				if rd, err := b.svc.GetTaskDetail(ctx, root); err == nil {
					rootTitle = escape(cut(rd.Task.Title, 120))
				}
			}
		}
		msg := fmt.Sprintf("⛓️ Chain broken at `%s` %s%s\nBlocked with it: %s", root, rootTitle, reasonLine(n.Reason),
			strings.Join(blocked, ", "))
		return []part{{Content: cut(msg, messageLimit), Components: buttons(
			button("Restart "+root, discordgo.PrimaryButton, customID("event", string(models.EventAdminRestart), root, string(models.StatusBlocked))),
			button("Skip "+root, discordgo.SecondaryButton, customID("event", string(models.EventAdminSkip), root, string(models.StatusBlocked))))}}, nil
	case "task.paused":
		until := ""
		var run []part
		if d, err := b.svc.GetTaskDetail(ctx, n.TaskID); err == nil {
			if d.Task.ResumeAfter != nil {
				until = " until " + renderTime(*d.Task.ResumeAfter)
			}
			run = runParts(d)
		}
		return append([]part{{Content: fmt.Sprintf("⏸️ %s %s paused%s%s", id, title, until, reasonLine(n.Reason))},
			{Thread: true, Content: "⏸️ **Paused**" + until + reasonLine(n.Reason)}}, run...), nil
	case "task.awaiting_approval":
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
		return []part{{Content: fmt.Sprintf("🙋 %s %s needs your approval%s", id, title, reasonLine(n.Reason)), Components: approvalButtons(n.TaskID, models.StatusAwaitingApproval)}}, nil
	case "task.approval_needed":
		files := ""
		if len(n.Files) > 0 {
			fs := n.Files
			if len(fs) > 10 {
				fs = fs[:10]
			}
			files = "\nfiles: `" + strings.Join(fs, "`, `") + "`"
			if len(n.Files) > 10 {
				files += fmt.Sprintf(" and %d more", len(n.Files)-10)
			}
		}
		return []part{{Content: fmt.Sprintf("🙋 %s %s is ready and needs your approval%s", id, title, files), Components: approvalButtons(n.TaskID, models.StatusVerifying)}}, nil
	case "task.deleted":
		return []part{{Content: fmt.Sprintf("🗑️ %s %s was deleted", id, title)}}, nil
	case "task.landing_waits":
		return []part{{Content: fmt.Sprintf("🛬 %s %s is verified and waits to land%s", id, title, reasonLine(n.Reason))},
			{Thread: true, Content: "🛬 **Waiting to land**" + reasonLine(n.Reason)}}, nil
	case "plan.failed":
		return []part{{Content: fmt.Sprintf("📝 The plan of %s could not be created: %s", id, escape(cut(n.Error, 500)))}}, nil
	case hookMessageKind:
		if n.hook == nil {
			return nil, fmt.Errorf("%w: a hook message without its payload", errPermanent)
		}
		return hookMessageParts(*n.hook), nil
	case runSuccessKind, runFailedKind, runCancelledKind:
		if n.run == nil {
			return nil, fmt.Errorf("%w: a run's notice without its payload", errPermanent)
		}
		return runNoticeParts(kind, *n.run), nil
	}
	b.log.Debug("notice kind not posted to discord", "kind", kind)
	return nil, nil
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

func byActor(n notice) string {
	if strings.HasPrefix(n.Actor, "discord:") {
		return " by " + renderActor(n.Actor)
	}
	return ""
}

func renderResultBody(c models.Completion) string {
	out := quote(c.Summary)
	if len(c.FilesChanged) > 0 {
		files := c.FilesChanged
		more := ""
		if len(files) > 20 {
			files, more = files[:20], fmt.Sprintf(" and %d more", len(c.FilesChanged)-20)
		}
		out += "\nfiles: `" + strings.Join(files, "`, `") + "`" + more
	}
	return out
}

// closeThread archives and locks a deleted task's thread, if it has one.
func (b *Bot) closeThread(ctx context.Context, taskID string) error {
	t, ok, err := b.box.TaskThread(ctx, taskID)
	if err != nil || !ok {
		return err
	}
	yes := true
	_, err = b.sess().ChannelEdit(t.ThreadID, &discordgo.ChannelEdit{Archived: &yes, Locked: &yes}, discordgo.WithContext(ctx),
		discordgo.WithRetryOnRatelimit(false))
	if err != nil && discordCode(err) != codeUnknownChannel {
		return err
	}
	// Task ids may be given again: a new task of the same id opens its own.
	return b.box.ForgetTaskThread(ctx, taskID, t.ThreadID)
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
