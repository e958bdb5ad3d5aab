package landing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file dispatches the reviews of QA_AGENT verifications; the
// orchestrator runs the reviewer (Host.StartReview).

// dispatchReviews asks the host to start a review run for each task
// waiting in the review phase whose reviewer agent is idle and whose
// project has a free slot; the others record why they wait.
func (l *Lander) dispatchReviews(ctx context.Context) error {
	waiting, err := l.store.Verifications(ctx, models.PhaseReview)
	if err != nil {
		return err
	}
	for _, v := range waiting {
		if l.host.Reviewing(v.TaskID) {
			continue
		}
		// The list may be stale: a review that just ended may have moved
		// the verification on (to its merge).
		cur, ok, err := l.store.GetVerification(ctx, v.TaskID)
		if err != nil {
			return err
		}
		if !ok || cur.Phase != models.PhaseReview || cur.Attempt != v.Attempt {
			continue
		}
		v = cur
		t, p, _, err := l.verification(ctx, v.TaskID)
		if err != nil {
			return err
		}
		reviewer := p.Settings.QAAgent
		if reviewer == "" {
			reviewer = l.cfg.QAAgent
		}
		if reviewer == "" {
			l.verifyFailed(ctx, t, v, "review", errors.New("no QA reviewer is configured (verification.qa_agent, or the project's settings.qa_agent)"), nil)
			continue
		}
		ag, err := l.store.GetAgent(ctx, reviewer)
		if err != nil {
			l.verifyFailed(ctx, t, v, "review", fmt.Errorf("reviewer %s: %w", reviewer, err), nil)
			continue
		}
		if ag.State != models.AgentIdle || ag.Paused || l.host.Resting(ag.ID) {
			// The review waits for its reviewer; say why where people look.
			why := fmt.Sprintf("waiting for the reviewer %s (%s)", ag.ID, ag.State)
			switch {
			case ag.Paused:
				why = fmt.Sprintf("waiting for the reviewer %s, which is paused", ag.ID)
			case ag.RestUntil != nil:
				why = fmt.Sprintf("waiting for the reviewer %s, which rests until %s: %s", ag.ID,
					ag.RestUntil.UTC().Format(time.RFC3339), ag.RestReason)
			case ag.State == models.AgentIdle:
				why = fmt.Sprintf("waiting for the reviewer %s, which rests after a rate limit or a failed start", ag.ID)
			}
			if v.Detail() != why {
				if _, err := l.store.SwitchVerification(ctx, t.ID, v.Attempt, models.PhaseReview, models.PhaseReview,
					models.VerificationNote{Text: why}); err != nil {
					l.log.Warn("record review wait", "task_id", t.ID, "err", err)
				}
			}
			continue
		}
		// The reviewer's run takes one of the project's slots: it waits for
		// a free one (reviews are dispatched before the scheduler hands out
		// the round's free slots, so it gets the next).
		held, err := l.store.SlotsHeld(ctx, p.ID)
		if err != nil {
			return err
		}
		if held >= p.MaxConcurrentAgents {
			why := fmt.Sprintf("waiting for a free slot of project %s (%d of %d busy)", p.ID, held, p.MaxConcurrentAgents)
			if v.Detail() != why {
				if _, err := l.store.SwitchVerification(ctx, t.ID, v.Attempt, models.PhaseReview, models.PhaseReview,
					models.VerificationNote{Text: why}); err != nil {
					l.log.Warn("record review wait", "task_id", t.ID, "err", err)
				}
			}
			continue
		}
		l.host.StartReview(ctx, ag, p, t, v)
	}
	return nil
}
