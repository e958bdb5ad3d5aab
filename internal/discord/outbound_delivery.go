package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
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
		if m.Kind == models.NoticeTaskProgress {
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
		if m.Kind != models.NoticeTaskProgress {
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
	if m.Kind == models.NoticeTaskProgress {
		var lines []string
		for _, p := range batch {
			pn, err := models.DecodeNotice(p.Kind, p.Payload)
			if pm, ok := pn.Payload.(models.ProgressNotice); err == nil && ok && strings.TrimSpace(pm.Message) != "" {
				lines = append(lines, pm.Message)
			}
		}
		parts = progressParts(lines)
	} else {
		parts, err = b.noticeParts(ctx, m.Kind, n)
		if err != nil {
			return err
		}
	}
	if m.Kind == models.NoticeTaskDeleted {
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
			to := channelID
			if p.Channel != "" {
				to = p.Channel
			}
			msg, err := b.postChannel(ctx, to, pn, p)
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
		if m.Kind == models.NoticeTaskProgress {
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
		AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}, Roles: p.Roles}}
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
