package landing

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file is a person's decision: approval and rejection of work waiting
// for one, in VERIFYING (HUMAN) or in AWAITING_APPROVAL, and carrying it out.

// requestApproval parks a verified task that requires approval and lands
// without a pull request: its work stays unmerged on its branch, the
// verification records the approval phase, and APPROVAL_REQUESTED moves it
// to AWAITING_APPROVAL, where a person reads its diff and approves (the
// branch is merged) or rejects (the task runs again with the feedback).
func (l *Lander) requestApproval(ctx context.Context, p models.Project, t models.Task, v models.Verification, checks, noPR string) {
	v.Phase, v.VerificationNote = models.PhaseApproval, models.VerificationNote{Text: checks}
	if err := l.store.SetVerification(ctx, v); err != nil {
		l.log.Warn("record approval phase", "task_id", t.ID, "err", err)
		return // the verification runs again and lands here again
	}
	reason := checks + "; waiting for a person to approve or reject the change"
	if noPR != "" {
		reason += " (no pull request: " + noPR + ")"
	}
	if _, pending, err := l.store.PendingPlan(ctx, t.ID); err == nil && pending {
		reason += "; its plan is created on approval"
	}
	l.apply(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventApprovalRequested, ExpectFrom: models.StatusVerifying,
		Actor: "system", Reason: reason})
	// The verification checkout is not needed while a person decides: the
	// work is on the task branch, and the merge stages it again.
	if err := l.ws.Cleanup(ctx, p, t, "", false); err != nil {
		l.log.Warn("clean up verification checkout", "task_id", t.ID, "err", err)
	}
}

// deliverApproved merges the work a person approved while its task waited
// in AWAITING_APPROVAL, and HUMAN_APPROVED completes the task (creating its
// pending plan's subtasks). A merge conflict returns the task to its agent
// (ADMIN_RESTART) with the conflict for the next attempt, as a conflict
// found by the verification would; any other failure leaves the task
// waiting for approval, with the error, for the person to approve again.
func (l *Lander) deliverApproved(ctx context.Context, p models.Project, t models.Task, v models.Verification) {
	sctx := context.WithoutCancel(ctx)
	if v.Phase == models.PhaseLanding {
		// Retried: being merged again, it cannot be cancelled meanwhile.
		if ok, err := l.store.SwitchApproval(sctx, t.ID, v.Attempt, models.PhaseLanding, models.PhaseApproved, v.VerificationNote); err != nil || !ok {
			return
		}
		v.Phase = models.PhaseApproved
	}
	actor, note := v.Actor, v.Text
	reason := "approved by " + actor
	if note != "" {
		reason += ": " + note
	}
	d, err := l.ws.Deliver(ctx, p, t, v.Source)
	if err != nil {
		if ctx.Err() != nil || refused(l.log.With("task_id", t.ID), "merge", err) {
			return // shutting down, taken away or fenced: the recorded approval is carried out later
		}
		var conflict *models.ConflictError
		if errors.As(err, &conflict) {
			msg := fmt.Sprintf("%s, but %s. The next attempt starts with %s merged into its branch and these files in conflict: resolve them and commit.",
				reason, conflict.Error(), conflict.Into)
			if err := l.store.RecordTaskFailure(sctx, t.ID, models.RunOutcomeVerifyFailed, msg); err != nil {
				l.log.Warn("record merge conflict", "task_id", t.ID, "err", err)
			}
			l.noteFailure(t.ID, msg, conflict)
			l.apply(sctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventAdminRestart,
				ExpectFrom: models.StatusAwaitingApproval, Actor: "system", Reason: msg})
			if err := l.ws.Cleanup(sctx, p, t, "", false); err != nil {
				l.log.Warn("clean up verification checkout", "task_id", t.ID, "err", err)
			}
			return
		}
		l.log.Warn("approved change not merged", "task_id", t.ID, "err", models.RedactURL(err.Error()))
		l.noteFailure(t.ID, "the approved change could not be merged: "+models.ReasonOf(err), nil)
		if _, err := l.store.SwitchApproval(sctx, t.ID, v.Attempt, v.Phase, models.PhaseApproval,
			models.VerificationNote{Text: "the approved change could not be merged: " + models.ReasonOf(err)}); err != nil {
			l.log.Warn("record failed merge", "task_id", t.ID, "err", err)
		}
		return
	}
	if d.Waiting != "" {
		l.landingWaits(sctx, p, t, v, models.StatusAwaitingApproval, d.Waiting)
		return
	}
	reason = l.landedReason(sctx, p, t, d, reason)
	l.apply(sctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventHumanApproved, ExpectFrom: models.StatusAwaitingApproval,
		Actor: actor, Reason: reason, Feedback: &models.Feedback{Source: actor, Verdict: models.VerdictApprove, Text: note}})
	if err := l.ws.Cleanup(sctx, p, t, v.Source, d.Merged); err != nil {
		l.log.Warn("clean up after delivery", "task_id", t.ID, "err", err)
	}
}

// returnRejected returns a task whose work a person rejected while it
// waited in AWAITING_APPROVAL to its agent: ADMIN_RESTART → READY, with the
// rejection as feedback for the next attempt's prompt.
func (l *Lander) returnRejected(ctx context.Context, p models.Project, t models.Task, v models.Verification) {
	actor, text := v.Actor, v.Text
	l.apply(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventAdminRestart, ExpectFrom: models.StatusAwaitingApproval,
		Actor: actor, Reason: "rejected by " + actor + ": " + text,
		Feedback: &models.Feedback{Source: actor, Verdict: models.VerdictReject, Text: text}})
	if err := l.ws.Cleanup(ctx, p, t, "", false); err != nil {
		l.log.Warn("clean up verification checkout", "task_id", t.ID, "err", err)
	}
}

// Approve is a person's approval of a task: of its work when its
// verification is HUMAN (the branch is merged, HUMAN_APPROVED), of its work
// waiting in AWAITING_APPROVAL without a pull request (the branch is
// merged, HUMAN_APPROVED), of its pull request (merged through GitHub when
// the project allows it), or of its plan when it waits in AWAITING_APPROVAL
// (HUMAN_APPROVED creates the subtasks).
func (l *Lander) Approve(ctx context.Context, taskID, actor, note string) (models.TransitionResult, error) {
	t, _, v, err := l.verification(ctx, taskID)
	if err != nil {
		return models.TransitionResult{}, err
	}
	reason := "approved by " + actor
	if note != "" {
		reason += ": " + note
	}
	fb := &models.Feedback{Source: actor, Verdict: models.VerdictApprove, Text: note}
	switch {
	case t.Status == models.StatusVerifying && v.Phase == models.PhaseHuman:
		// The decision is taken once (compare-and-set of the phase); the
		// merge runs as any verification does, not on the request's
		// context: the answer waits for it unless the caller goes away.
		note := models.VerificationNote{Event: models.EventHumanApproved, Text: reason}
		if err := l.decide(ctx, t, v, models.PhaseDeliver, note); err != nil {
			return models.TransitionResult{}, err
		}
		return l.carriedOut(ctx, t.ID, func() (models.TransitionResult, error) { return l.after(ctx, t) })
	case t.Status == models.StatusAwaitingApproval && v.Phase == models.PhaseApproval:
		// Decided once (compare-and-set of the phase); the merge runs as a
		// verification does, and the answer waits for it.
		if err := l.decide(ctx, t, v, models.PhaseApproved, models.VerificationNote{Actor: actor, Text: note}); err != nil {
			return models.TransitionResult{}, err
		}
		return l.carriedOut(ctx, t.ID, func() (models.TransitionResult, error) { return l.afterApproval(ctx, t, v) })
	case t.Status == models.StatusAwaitingApproval && (v.Phase == models.PhaseApproved || v.Phase == models.PhaseRejected):
		return models.TransitionResult{}, models.Errorf(models.CodeConflict, "task %s was decided meanwhile", t.ID)
	case v.Phase == models.PhaseLanding:
		return models.TransitionResult{}, models.Errorf(models.CodeConflict, "task %s is decided, and its change waits to land: %s",
			t.ID, t.WaitingReason)
	case t.Status == models.StatusAwaitingApproval && t.PRURL != nil:
		return l.approvePR(ctx, t, actor)
	case t.Status == models.StatusAwaitingApproval:
		return l.store.ApplyEvent(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventHumanApproved,
			ExpectFrom: models.StatusAwaitingApproval, Actor: actor, Reason: reason, Feedback: fb})
	}
	return models.TransitionResult{}, l.nothingToDecide(t, v)
}

// Reject is a person's rejection, with feedback for the next attempt: a
// HUMAN verification fails (VERIFY_FAILED); work waiting in
// AWAITING_APPROVAL without a pull request, or a plan awaiting approval, is
// discarded and the task runs again (ADMIN_RESTART), the feedback in its
// next prompt.
func (l *Lander) Reject(ctx context.Context, taskID, actor, feedback string) (models.TransitionResult, error) {
	if strings.TrimSpace(feedback) == "" {
		return models.TransitionResult{}, models.Errorf(models.CodeInvalid, "feedback: say what must change")
	}
	t, _, v, err := l.verification(ctx, taskID)
	if err != nil {
		return models.TransitionResult{}, err
	}
	fb := &models.Feedback{Source: actor, Verdict: models.VerdictReject, Text: strings.TrimSpace(feedback)}
	switch {
	case t.Status == models.StatusVerifying && v.Phase == models.PhaseHuman:
		if err := l.decide(ctx, t, v, models.PhaseRejected, models.VerificationNote{Actor: actor, Text: fb.Text}); err != nil {
			return models.TransitionResult{}, err
		}
		l.verifyFailed(ctx, t, v, "rejected by "+actor, errors.New(fb.Text), fb)
		return l.after(ctx, t)
	case t.Status == models.StatusAwaitingApproval && v.Phase == models.PhaseApproval:
		if err := l.decide(ctx, t, v, models.PhaseRejected, models.VerificationNote{Actor: actor, Text: fb.Text}); err != nil {
			return models.TransitionResult{}, err
		}
		return l.carriedOut(ctx, t.ID, func() (models.TransitionResult, error) { return l.after(ctx, t) })
	case t.Status == models.StatusAwaitingApproval && (v.Phase == models.PhaseApproved || v.Phase == models.PhaseRejected ||
		v.Phase == models.PhaseLanding):
		return models.TransitionResult{}, models.Errorf(models.CodeConflict, "task %s was decided meanwhile", t.ID)
	case t.Status == models.StatusAwaitingApproval && t.PRURL == nil:
		return l.store.ApplyEvent(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventAdminRestart,
			ExpectFrom: models.StatusAwaitingApproval, Actor: actor, Reason: "plan rejected by " + actor + ": " + fb.Text, Feedback: fb})
	}
	return models.TransitionResult{}, l.nothingToDecide(t, v)
}

// decide records a person's decision on the verification v of t: its
// phase moves from v's to to, with note (compare-and-set: of two people
// deciding at once, one wins, and the other is told the task was decided
// meanwhile).
func (l *Lander) decide(ctx context.Context, t models.Task, v models.Verification, to models.VerificationPhase,
	note models.VerificationNote) error {
	switchPhase := l.store.SwitchVerification
	if t.Status == models.StatusAwaitingApproval {
		switchPhase = l.store.SwitchApproval
	}
	ok, err := switchPhase(ctx, t.ID, v.Attempt, v.Phase, to, note)
	if err != nil {
		return err
	}
	if !ok {
		return models.Errorf(models.CodeConflict, "task %s was decided meanwhile", t.ID)
	}
	return nil
}

// carriedOut waits for the verification that carries out a decision
// recorded on the task taskID, and returns answer's answer, computed as
// that verification left the task (see awaitVerify): a verification
// started meanwhile, which may hold the task in the middle of a merge
// again, does not change the answer.
func (l *Lander) carriedOut(ctx context.Context, taskID string, answer func() (models.TransitionResult, error)) (models.TransitionResult, error) {
	var res models.TransitionResult
	var err error
	if werr := l.awaitVerify(ctx, taskID, func(outcome) { res, err = answer() }); werr != nil {
		return models.TransitionResult{}, fmt.Errorf("wait for the decision on task %s to be carried out: %w", taskID, werr)
	}
	return res, err
}

// afterApproval answers a person's approval of t's work, whose
// verification v waited in the approval phase, once it was carried out:
// merged (the task as it is now), waiting to land (a conflict error
// saying why), or not merged for another reason (a conflict error saying
// why, for the person to approve again).
func (l *Lander) afterApproval(ctx context.Context, t models.Task, v models.Verification) (models.TransitionResult, error) {
	cur, found, err := l.store.GetVerification(ctx, t.ID)
	if err == nil && found && cur.Attempt == v.Attempt && l.stillAwaiting(ctx, t.ID) {
		switch cur.Phase {
		case models.PhaseLanding:
			now, _ := l.store.GetTask(ctx, t.ID)
			return models.TransitionResult{}, models.Errorf(models.CodeConflict, "task %s is approved, and its change waits to land: %s",
				t.ID, now.WaitingReason)
		case models.PhaseApproval:
			// The person who approved is told why, and may approve again.
			return models.TransitionResult{}, models.Errorf(models.CodeConflict, "task %s: %s; it still awaits approval: approve it again",
				t.ID, cur.Detail())
		}
	}
	return l.after(ctx, t)
}

// stillAwaiting reports whether a task is still AWAITING_APPROVAL.
func (l *Lander) stillAwaiting(ctx context.Context, taskID string) bool {
	t, err := l.store.GetTask(ctx, taskID)
	return err == nil && t.Status == models.StatusAwaitingApproval
}

func (l *Lander) nothingToDecide(t models.Task, v models.Verification) error {
	if t.Status == models.StatusVerifying {
		return models.Errorf(models.CodeConflict, "task %s is being verified (%s), not waiting for a person", t.ID, v.Phase)
	}
	return models.Errorf(models.CodeConflict, "task %s is %s: nothing waits for approval", t.ID, t.Status)
}

// after answers what a decision did: the task as it is now.
func (l *Lander) after(ctx context.Context, before models.Task) (models.TransitionResult, error) {
	t, err := l.store.GetTask(ctx, before.ID)
	if err != nil {
		return models.TransitionResult{}, err
	}
	if t.Status == before.Status && t.Status == models.StatusVerifying {
		// Decided, and being merged by a verification already under way.
		return models.TransitionResult{Task: t, From: before.Status, To: t.Status}, nil
	}
	if t.Status == before.Status {
		return models.TransitionResult{}, models.Errorf(models.CodeConflict, "task %s is still %s: %s", t.ID, t.Status, t.StatusReason)
	}
	return models.TransitionResult{Task: t, From: before.Status, To: t.Status}, nil
}
