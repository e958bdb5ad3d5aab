// Package desk keeps people told of what waits on them. The desk itself —
// one list of everything that waits on a person, read by the store
// (Store.Desk) and shown by ctl, the dashboard, Discord and the API — is
// the store's; this package's Notifier acts on it over time:
//
//   - an item that has waited its project's escalate_after is escalated
//     once: re-posted to the project's escalation channel (else its own
//     channel), mentioning its escalation role;
//   - while something of a project waits, a digest ("4 things wait on you,
//     oldest 3h") goes to the project's channel, first when the oldest item
//     has waited digest_every, then at most every digest_every.
//
// Each is a notice in the outbox under a key, written with a desk mark in
// one transaction (Store.MarkAndNotify): an item is escalated once, and a
// digest sent once a period, however often the notifier looks and across
// restarts, like cron firings. The notifier reads the desk when the next
// of these is due, when woken, and at least every PollInterval.
//
// A project's escalate_webhook names one of the daemon's desk webhooks
// (Config.Webhooks: the URL, often holding a token, stays in the daemon's
// configuration): each escalation is also POSTed there as JSON
// (models.DeskWebhookBody), queued with the escalation's mark and retried
// with backoff until a 2xx answer, at most MaxWebhookAttempts times.
package desk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/models"
)

// Defaults of the notifier's configuration.
const (
	// DefaultPollInterval is the longest the notifier waits between two
	// looks at the desk: items appear without waking it.
	DefaultPollInterval = time.Minute
	// DefaultWebhookTimeout bounds one POST to a webhook.
	DefaultWebhookTimeout = 10 * time.Second
	// WebhookBackoff is the wait before a failed webhook delivery is tried
	// again, doubled for each failure up to MaxWebhookBackoff.
	WebhookBackoff    = 30 * time.Second
	MaxWebhookBackoff = 30 * time.Minute
	// MaxWebhookAttempts is how often a delivery is tried before it is
	// given up (and logged).
	MaxWebhookAttempts = 12
	// webhookBatch is how many due deliveries one look makes.
	webhookBatch = 20
)

// The kinds of desk marks.
const (
	markEscalation = "escalation"
	markDigest     = "digest"
)

// Store is what the notifier reads and writes.
type Store interface {
	Desk(ctx context.Context) (models.Desk, error)
	ListProjects(ctx context.Context) ([]models.Project, error)
	MarkAndNotify(ctx context.Context, m models.DeskSend) (bool, error)
	LastDeskMark(ctx context.Context, projectID, kind string) (time.Time, bool, error)
	PendingWebhooks(ctx context.Context, now time.Time, limit int) ([]models.WebhookDelivery, *time.Time, error)
	WebhookDelivered(ctx context.Context, key, errText string, retryAt *time.Time) error
}

// Config configures a Notifier.
type Config struct {
	// PollInterval bounds the wait between two looks at the desk; default
	// DefaultPollInterval.
	PollInterval time.Duration
	// Clock reads the time and waits; nil: clock.Real.
	Clock clock.Clock
	// Logger receives what was escalated and digested.
	Logger *slog.Logger
	// OnPass, when set, is called after each look at the desk with the
	// time the next is due (for tests).
	OnPass func(next time.Time)
	// Webhooks are the URLs escalations may be POSTed to, by the name a
	// project's escalate_webhook gives; HTTPClient posts them (default a
	// client with WebhookTimeout, DefaultWebhookTimeout).
	Webhooks       map[string]string
	HTTPClient     *http.Client
	WebhookTimeout time.Duration
}

// Notifier escalates desk items and posts digests (see the package
// documentation). Create it with New, run it with Run.
type Notifier struct {
	cfg  Config
	st   Store
	log  *slog.Logger
	wake chan struct{}
}

// New returns a Notifier over st; it starts nothing until Run.
func New(cfg Config, st Store) (*Notifier, error) {
	if st == nil {
		return nil, errors.New("desk: a store is required")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.WebhookTimeout <= 0 {
		cfg.WebhookTimeout = DefaultWebhookTimeout
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: cfg.WebhookTimeout}
	}
	for name, u := range cfg.Webhooks {
		if err := models.ValidateWebhookURL("desk.webhooks."+name, u); err != nil {
			return nil, err
		}
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Notifier{cfg: cfg, st: st, log: cfg.Logger, wake: make(chan struct{}, 1)}, nil
}

// Wake asks for a look at the desk now; it never blocks.
func (n *Notifier) Wake() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Run looks at the desk until ctx ends. A look that fails is logged and
// repeated at the next poll.
func (n *Notifier) Run(ctx context.Context) error {
	for {
		now := n.cfg.Clock.Now()
		next, err := n.pass(ctx, now)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			n.log.Warn("desk: look at what waits on a person", "err", err)
		}
		if hook := n.deliverWebhooks(ctx, now); !hook.IsZero() && (next.IsZero() || hook.Before(next)) {
			next = hook
		}
		poll := now.Add(n.cfg.PollInterval)
		if next.IsZero() || next.After(poll) {
			next = poll
		}
		if n.cfg.OnPass != nil {
			n.cfg.OnPass(next)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-n.wake:
		case <-n.cfg.Clock.After(max(next.Sub(n.cfg.Clock.Now()), 0)):
		}
	}
}

// pass escalates the items due at now and posts the digests due, and
// returns when the next of either is due (zero: nothing is).
func (n *Notifier) pass(ctx context.Context, now time.Time) (time.Time, error) {
	d, err := n.st.Desk(ctx)
	if err != nil {
		return time.Time{}, err
	}
	projects, err := n.st.ListProjects(ctx)
	if err != nil {
		return time.Time{}, err
	}
	settings := map[string]models.ProjectSettings{}
	for _, p := range projects {
		settings[p.ID] = p.Settings
	}
	var next time.Time
	consider := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	var errs []error
	waiting := map[string][]models.DeskItem{}
	for _, it := range d.Items {
		if it.ProjectID == "" {
			continue // an agent's: no project's escalation or digest
		}
		waiting[it.ProjectID] = append(waiting[it.ProjectID], it)
		if it.EscalatesAt == nil {
			continue
		}
		if now.Before(*it.EscalatesAt) {
			consider(*it.EscalatesAt)
			continue
		}
		s := settings[it.ProjectID]
		waited := models.Duration(now.Sub(it.Since).Round(time.Second))
		send := models.DeskSend{Key: "escalate:" + it.Key, ProjectID: it.ProjectID, Kind: markEscalation,
			Notice: models.NewDeskEscalationNotice(models.DeskEscalationNotice{ProjectID: it.ProjectID, Item: it,
				Channel: s.EscalateChannel, Role: s.EscalateRole, Waited: waited})}
		if s.EscalateWebhook != "" {
			send.Webhook = s.EscalateWebhook
			if send.WebhookBody, err = json.Marshal(models.DeskWebhookBody{Kind: models.NoticeDeskEscalation,
				ProjectID: it.ProjectID, Waited: waited, Item: it, Text: webhookText(it, waited)}); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		sent, err := n.st.MarkAndNotify(ctx, send)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if sent {
			n.log.Info("desk item escalated", "project_id", it.ProjectID, "task_id", it.TaskID, "key", it.Key,
				"waited", now.Sub(it.Since).Round(time.Second))
		}
	}
	for pid, items := range waiting {
		every := settings[pid].DigestEvery.Std()
		if every <= 0 {
			continue
		}
		// The first digest once the oldest item has waited a period, then
		// at most one a period while something waits.
		due := items[0].Since.Add(every)
		if last, ok, err := n.st.LastDeskMark(ctx, pid, markDigest); err != nil {
			errs = append(errs, err)
			continue
		} else if ok && last.Add(every).After(due) {
			due = last.Add(every)
		}
		if now.Before(due) {
			consider(due)
			continue
		}
		digest := models.DeskDigestNotice{ProjectID: pid, Count: len(items), Oldest: items[0].Since, At: now,
			Items: items[:min(len(items), models.MaxDigestItems)]}
		// Keyed by the period of now: two looks in one period send one.
		key := fmt.Sprintf("digest:%s:%d", pid, now.UnixNano()/int64(every))
		sent, err := n.st.MarkAndNotify(ctx, models.DeskSend{Key: key, ProjectID: pid, Kind: markDigest,
			Notice: models.NewDeskDigestNotice(digest)})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if sent {
			n.log.Info("desk digest posted", "project_id", pid, "items", len(items), "oldest", items[0].Since)
		}
		consider(now.Add(every))
	}
	return next, errors.Join(errs...)
}

// webhookText is the line a chat shows for an escalation.
func webhookText(it models.DeskItem, waited models.Duration) string {
	whose := it.TaskID
	if whose == "" {
		whose = it.ProjectID
	}
	return fmt.Sprintf("Waiting on you for %s: %s (%s) — %s. %s", waited, it.Title, whose, it.What, it.Action.Command)
}

// deliverWebhooks makes the webhook deliveries due at now and returns when
// the next is due (zero: none waits).
func (n *Notifier) deliverWebhooks(ctx context.Context, now time.Time) time.Time {
	due, next, err := n.st.PendingWebhooks(ctx, now, webhookBatch)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("desk: read webhook deliveries", "err", err)
		}
		return now.Add(n.cfg.PollInterval)
	}
	var out time.Time
	if next != nil {
		out = *next
	}
	for _, d := range due {
		errText := n.post(ctx, d)
		if ctx.Err() != nil {
			return out
		}
		var retryAt *time.Time
		if errText != "" && d.Attempts+1 < MaxWebhookAttempts {
			wait := WebhookBackoff << min(d.Attempts, 20)
			at := now.Add(min(wait, MaxWebhookBackoff))
			retryAt = &at
			if out.IsZero() || at.Before(out) {
				out = at
			}
		}
		switch {
		case errText == "":
			n.log.Info("desk webhook delivered", "webhook", d.Webhook, "key", d.Key)
		case retryAt != nil:
			n.log.Warn("desk webhook not delivered; trying again", "webhook", d.Webhook, "key", d.Key, "err", errText,
				"retry_at", *retryAt)
		default:
			n.log.Error("desk webhook given up", "webhook", d.Webhook, "key", d.Key, "err", errText, "attempts", d.Attempts+1)
		}
		if err := n.st.WebhookDelivered(ctx, d.Key, errText, retryAt); err != nil {
			n.log.Warn("desk: record a webhook delivery", "key", d.Key, "err", err)
		}
	}
	if len(due) == webhookBatch {
		return now
	}
	return out
}

// post POSTs one delivery and returns why it failed ("" when delivered).
// The URL never appears in what it returns: it may hold a token.
func (n *Notifier) post(ctx context.Context, d models.WebhookDelivery) string {
	u, ok := n.cfg.Webhooks[d.Webhook]
	if !ok {
		return fmt.Sprintf("no webhook named %q in desk.webhooks", d.Webhook)
	}
	rctx, cancel := context.WithTimeout(ctx, n.cfg.WebhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, u, bytes.NewReader([]byte(d.Payload)))
	if err != nil {
		return "build the request: " + models.RedactURL(err.Error())
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentqueued")
	resp, err := n.cfg.HTTPClient.Do(req)
	if err != nil {
		var uerr interface{ Unwrap() error }
		if errors.As(err, &uerr) {
			err = uerr.Unwrap() // drop the URL *url.Error adds
		}
		return "post: " + strings.ReplaceAll(err.Error(), u, "<url>")
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Sprintf("answered %s: %s", resp.Status, models.CleanLine(string(body), 200))
	}
	return ""
}
