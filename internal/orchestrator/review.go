package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
)

// This file runs the reviewer agents of QA_AGENT verifications; landing
// decides when a review is due and what its verdict means.

// startReview claims the agent ag for a review of task t and runs the
// review in a goroutine of its own; a claim lost to a race starts nothing.
func (o *Orchestrator) startReview(ctx context.Context, ag models.Agent, p models.Project, t models.Task, v models.Verification) {
	run, token, err := o.store.ClaimReview(ctx, t.ID, ag.ID)
	if err != nil {
		o.log.Info("review claim lost", "task_id", t.ID, "agent", ag.ID, "err", err)
		return
	}
	ar := newActiveRun(run, token, ag, o.cfg.Clock.Now())
	o.mu.Lock()
	o.runs[run.ID] = ar
	o.mu.Unlock()
	o.log.Info("review assigned", "task_id", t.ID, "agent", ag.ID, "run_id", run.ID)
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		o.review(ctx, ar, p, t, v)
		o.mu.Lock()
		delete(o.runs, run.ID)
		o.mu.Unlock()
		o.Wake()
	}()
}

// reviewRunning reports whether a review run of the task is under way.
func (o *Orchestrator) reviewRunning(taskID string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.runs {
		if r.run.TaskID == taskID && r.run.Kind == models.RunReview {
			return true
		}
	}
	return false
}

// review runs a reviewer agent over a task's staged change and applies its
// verdict: approve lands the work, reject fails the verification with the
// reasons as feedback, no verdict fails it too.
func (o *Orchestrator) review(ctx context.Context, ar *activeRun, p models.Project, t models.Task, v models.Verification) {
	log := o.log.With("task_id", t.ID, "agent", ar.agent.ID, "run_id", ar.run.ID)
	closeRun := func(outcome models.RunOutcome, msg string) {
		if _, err := o.store.FinishRun(ctx, models.RunEnd{RunID: ar.run.ID, Outcome: outcome, Error: msg}); err != nil {
			log.Warn("close review run", "err", err)
		}
	}
	// fail ends a review that could not run; after maxReviewFailures in a
	// row the verification fails with the reason instead of waiting on.
	fail := func(step string, err error) {
		closeRun(models.RunOutcomeExecutionError, models.RedactURL(err.Error()))
		log.Warn("review did not run", "step", step, "err", models.RedactURL(err.Error()))
		key := fmt.Sprintf("%s:%d", t.ID, v.Attempt)
		o.mu.Lock()
		o.reviewFails[key]++
		n := o.reviewFails[key]
		o.mu.Unlock()
		if n >= maxReviewFailures {
			o.mu.Lock()
			delete(o.reviewFails, key)
			o.mu.Unlock()
			o.landing.ReviewFailed(ctx, t, v, "review", fmt.Errorf("the reviewer %s could not run %d times: %s: %w", ar.agent.ID, n, step, err), nil)
			return
		}
		o.coolDown("agent:"+ar.agent.ID, o.cfg.Clock.Now().Add(o.cfg.RetryBackoff))
	}
	adapter, err := o.adapters.For(ar.agent.AgentType)
	if err != nil {
		fail("agent type", err)
		return
	}
	prof := ar.agent.Profile
	if name := cmp.Or(p.Settings.QAProfile, o.cfg.QAProfile); name != "" {
		named, ok := o.cfg.Profiles[name]
		if !ok {
			fail("profile", fmt.Errorf("profile %q is not configured", name))
			return
		}
		prof = prof.Merge(named)
	}
	staged, err := o.ws.Stage(ctx, p, t, v.Source)
	if models.Fenced(err) {
		// Not the change's fault: the review is dispatched again later.
		closeRun(models.RunOutcomeRecovered, models.RedactURL(err.Error()))
		log.Warn("review left for later: the lease's fence refused its stage", "err", err)
		return
	}
	if err != nil {
		closeRun(models.RunOutcomeStageFailed, models.RedactURL(err.Error()))
		o.landing.ReviewFailed(ctx, t, v, "stage", err, nil)
		return
	}
	result, _, err := o.store.TaskResult(ctx, t.ID)
	if err != nil {
		fail("read the result", err)
		return
	}
	tc := models.TaskContext{TaskID: t.ID, Title: t.Title, Description: t.Description, AcceptanceCriteria: t.AcceptanceCriteria,
		TestCommands: p.Settings.TestCommandsFor(t), CheckoutPath: staged.Dir, DefaultBranch: defaultBranch(p), Attempt: v.Attempt,
		Review: &models.ReviewContext{TaskID: t.ID, Summary: result.Summary, Diff: staged.Diff, FilesChanged: staged.Files}}
	if vp, ok := adapter.(agent.VersionProber); ok {
		o.probeVersion(ctx, ar, vp) // a reviewer's CLI is recorded like a worker's
	}
	base := filepath.Join(o.cfg.RunDir, t.ID, fmt.Sprintf("%d.review-%d", v.Attempt, ar.run.ID))
	proc, parser, err := o.launch(ctx, ar, adapter, launchSpec{task: t, profile: prof, tc: tc, dir: staged.Dir, base: base})
	if err != nil {
		fail("start", err)
		return
	}
	if _, err := o.store.StartRun(ctx, ar.run.ID, proc.PID(), staged.Dir); err != nil {
		proc.Stop(o.cfg.StopGrace) // still held: the reviewer never ran
		fail("record the start", err)
		return
	}
	if err := proc.Release(); err != nil {
		log.Warn("reviewer process not released", "err", err)
	}
	ar.mu.Lock()
	ar.proc, ar.started, ar.lastActivity = proc, true, o.cfg.Clock.Now()
	ar.lastReport = ar.lastActivity
	ar.mu.Unlock()
	o.Wake()
	res := o.await(ar, proc, parser)
	ar.mu.Lock()
	verdict, stopped, pause := ar.verdict, ar.endReason, ar.pause
	ar.mu.Unlock()
	o.mu.Lock()
	delete(o.reviewFails, fmt.Sprintf("%s:%d", t.ID, v.Attempt))
	o.mu.Unlock()
	switch {
	case verdict == nil && pause != nil:
		// The reviewer's provider refuses work: it rests until the reset
		// and the review waits for it; the task uses no retry.
		at := o.cfg.Clock.Now().Add(o.cfg.PauseDelay)
		if pause.ResetAt != nil && pause.ResetAt.After(o.cfg.Clock.Now()) {
			at = *pause.ResetAt
		}
		closeRun(models.RunOutcomePaused, fmt.Sprintf("%s until %s", pauseWhat(pause), at.UTC().Format(time.RFC3339)))
		o.rest(ctx, ar.agent.ID, at, restReason(pause, t.ID))
	case verdict == nil:
		msg := "the reviewer " + ar.agent.ID + " ended without a verdict (" + exitText(res) + ")"
		if stopped != "" {
			msg = "the review by " + ar.agent.ID + " was stopped: " + stopped
		}
		closeRun(models.RunOutcomeFailed, msg)
		if ctx.Err() != nil || stopped != "" && ar.endEvent == models.EventRecovery {
			return // shutting down: the next life reviews again
		}
		o.landing.ReviewFailed(ctx, t, v, "review", errors.New(msg), nil)
	case verdict.Verdict == models.VerdictReject:
		closeRun(models.RunOutcomeRejected, verdict.Text)
		o.landing.ReviewFailed(ctx, t, v, "review by "+ar.agent.ID, errors.New(verdict.Text), verdict)
	default:
		closeRun(models.RunOutcomeApproved, "")
		// The delivery runs as any verification does (one at a time,
		// stopped at shutdown, resumed after a restart).
		o.landing.ReviewApproved(ctx, t, v, ar.agent.ID, verdict.Text)
	}
}

// maxReviewFailures is how many reviews in a row may fail to start before
// the verification fails.
const maxReviewFailures = 3

func defaultBranch(p models.Project) string {
	if p.Repo == nil {
		return ""
	}
	return p.Repo.DefaultBranch
}

// Verdict records a reviewer's approve or reject; only a review run may
// give one, and only its first counts.
func (o *Orchestrator) Verdict(ctx context.Context, run models.Run, approve bool, reasons string) error {
	ar, err := o.touch(ctx, run)
	if err != nil {
		return err
	}
	if run.Kind != models.RunReview {
		return models.Errorf(models.CodeConflict, "only a review run may approve or reject; this run works on task %s", run.TaskID)
	}
	verdict := models.VerdictReject
	if approve {
		verdict = models.VerdictApprove
	}
	if strings.TrimSpace(reasons) == "" && !approve {
		return models.Errorf(models.CodeInvalid, "reasons: say what must change")
	}
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if ar.verdict != nil {
		if ar.verdict.Verdict == verdict {
			return nil
		}
		return models.Errorf(models.CodeConflict, "the review already ended with %s", ar.verdict.Verdict)
	}
	ar.verdict = &models.Feedback{Source: "reviewer " + run.AgentID, Verdict: verdict, Text: strings.TrimSpace(reasons)}
	o.log.Info("review verdict", "task_id", run.TaskID, "run_id", run.ID, "verdict", verdict)
	return nil
}
