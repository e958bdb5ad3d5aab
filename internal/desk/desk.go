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
package desk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/models"
)

// DefaultPollInterval is the longest the notifier waits between two looks
// at the desk: items appear without waking it.
const DefaultPollInterval = time.Minute

// The kinds of desk marks.
const (
	markEscalation = "escalation"
	markDigest     = "digest"
)

// Store is what the notifier reads and writes.
type Store interface {
	Desk(ctx context.Context) (models.Desk, error)
	ListProjects(ctx context.Context) ([]models.Project, error)
	MarkAndNotify(ctx context.Context, key, projectID, kind string, n models.Notice) (bool, error)
	LastDeskMark(ctx context.Context, projectID, kind string) (time.Time, bool, error)
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
		sent, err := n.st.MarkAndNotify(ctx, "escalate:"+it.Key, it.ProjectID, markEscalation,
			models.NewDeskEscalationNotice(models.DeskEscalationNotice{ProjectID: it.ProjectID, Item: it,
				Channel: s.EscalateChannel, Role: s.EscalateRole, Waited: models.Duration(now.Sub(it.Since).Round(time.Second))}))
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
		sent, err := n.st.MarkAndNotify(ctx, key, pid, markDigest, models.NewDeskDigestNotice(digest))
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
