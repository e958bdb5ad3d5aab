package landing

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

// This file is the VERIFYING phase: checks (AUTO_TEST), reviews by a QA
// agent (QA_AGENT), a person's decision (HUMAN), delivery of the branch,
// and plan approval.

// maxCheckOutput is how much of a failing check's output is kept.
const maxCheckOutput = 4096

// goVerify runs a task's verification in its own goroutine.
func (l *Lander) goVerify(taskID string) {
	if !l.track() {
		return // shutting down: the recorded phase is resumed at the next start
	}
	go func() {
		defer l.wg.Done()
		l.verify(taskID)
	}()
}

// resumeVerifications starts the verification of every task in the checks
// or deliver phase that no goroutine verifies: one whose goroutine gave up
// on an error the store may not repeat, or that a decision left to deliver.
func (l *Lander) resumeVerifications(ctx context.Context) {
	vs, err := l.store.Verifications(ctx, models.PhaseChecks, models.PhaseDeliver, models.PhaseRejected,
		models.PhaseApproval, models.PhaseApproved)
	if err != nil {
		l.log.Error("list verifications", "err", err)
		return
	}
	for _, v := range vs {
		l.mu.Lock()
		_, busy := l.verifying[v.TaskID]
		l.mu.Unlock()
		// A run's goroutine verifies its own task once the run ends.
		if !busy && !l.host.RunningFor(v.TaskID) {
			l.goVerify(v.TaskID)
		}
	}
}

// verify carries a VERIFYING task's verification as far as it can go
// without waiting: it stages the task branch, runs the checks of AUTO_TEST
// and lands the work, or records that a reviewer or a person is awaited.
// One goroutine verifies a task at a time; a second call returns at once.
// Its context ends at shutdown, or when an admin event takes the task out
// of VERIFYING; the store is written without it, so that what was decided
// is recorded.
func (l *Lander) verify(taskID string) {
	l.mu.Lock()
	for {
		_, busy := l.verifying[taskID]
		if !busy {
			break
		}
		// One verification per task: wait for the one under way, then look
		// again (it may have read the task before a decision this caller
		// waits for).
		wait := l.verifyDone[taskID]
		l.mu.Unlock()
		<-wait
		l.mu.Lock()
	}
	ctx, cancel := context.WithCancel(l.vctx)
	done := make(chan struct{})
	l.verifying[taskID], l.verifyDone[taskID] = cancel, done
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.verifying, taskID)
		delete(l.verifyDone, taskID)
		l.mu.Unlock()
		cancel()
		close(done)
	}()
	sctx := context.WithoutCancel(ctx)
	t, p, v, err := l.verification(sctx, taskID)
	if err != nil {
		l.log.Warn("verification not resumed", "task_id", taskID, "err", err)
		return
	}
	if t.Status == models.StatusAwaitingApproval {
		// A person's decision on work waiting for approval, given but not
		// yet carried out (the daemon may have stopped in between).
		switch v.Phase {
		case models.PhaseApproved, models.PhaseLanding:
			l.deliverApproved(ctx, p, t, v)
		case models.PhaseRejected:
			l.returnRejected(sctx, p, t, v)
		}
		return
	}
	if t.Status != models.StatusVerifying {
		return
	}
	log := l.log.With("task_id", t.ID, "project_id", t.ProjectID)
	switch v.Phase {
	case models.PhaseHuman, models.PhaseReview:
		return // awaiting a verdict; DispatchReviews starts the review
	case models.PhaseDeliver, models.PhaseLanding:
		l.land(ctx, p, t, v, v.Event, cmp.Or(v.Text, "verified"))
		return
	case models.PhaseApproval:
		// Recorded, but the daemon stopped before APPROVAL_REQUESTED applied.
		l.land(ctx, p, t, v, models.EventVerifyPassed, cmp.Or(v.Text, "verified"))
		return
	case models.PhaseRejected:
		// A person's rejection that VERIFY_FAILED has not yet applied.
		l.verifyFailed(sctx, t, v, "rejected by "+v.Actor, errors.New(v.Text),
			&models.Feedback{Source: v.Actor, Verdict: models.VerdictReject, Text: v.Text})
		return
	case models.PhaseChecks:
	default:
		return
	}
	if msg := l.noChanges(sctx, p, t); msg != "" {
		l.verifyFailed(sctx, t, v, "verify", errors.New(msg), nil)
		return
	}
	if t.VerificationType == models.VerifyAutoTest && len(t.TestCommands) == 0 {
		// Nothing to run: the merge itself is the only check left.
		l.land(ctx, p, t, v, models.EventVerifyPassed, checksReason(t))
		return
	}
	staged, err := l.ws.Stage(ctx, p, t, v.Source)
	if err != nil {
		if ctx.Err() == nil {
			l.verifyFailed(sctx, t, v, "stage", err, nil)
		}
		return
	}
	if ctx.Err() != nil || !l.stillCurrent(sctx, t, v) {
		return
	}
	switch t.VerificationType {
	case models.VerifyQAAgent:
		v.Phase, v.VerificationNote = models.PhaseReview, models.VerificationNote{}
		if err := l.store.SetVerification(sctx, v); err != nil {
			log.Warn("record review phase", "err", err)
		}
		l.host.Wake()
		return
	case models.VerifyHuman:
		v.Phase, v.VerificationNote = models.PhaseHuman, models.VerificationNote{Text: "waiting for a person to approve or reject"}
		if err := l.store.SetVerification(sctx, v); err != nil {
			log.Warn("record human phase", "err", err)
			return
		}
		if err := l.store.Notify(sctx, fmt.Sprintf("approval:%s:%d", t.ID, v.Attempt), "task.approval_needed", t.ProjectID, t.ID,
			map[string]any{"task_id": t.ID, "title": t.Title, "files": staged.Files}); err != nil {
			log.Warn("notify approval needed", "err", err)
		}
		return
	}
	if msg, ok := l.runChecks(ctx, t, v, staged.Dir); !ok {
		if ctx.Err() != nil {
			return // shutting down or taken away: a later verification runs the checks again
		}
		l.verifyFailed(sctx, t, v, "checks", errors.New(msg), nil)
		return
	}
	l.land(ctx, p, t, v, models.EventVerifyPassed, checksReason(t))
}

// errNoChanges is why the verification of a run that changed nothing,
// without its agent saying so, fails.
const errNoChanges = "the agent made no changes: nothing was committed on the task branch and the checkout was clean. " +
	"An agent that finds nothing to change completes with `agentqueued agent complete --no-changes` " +
	"(the complete tool's no_changes)"

// noChanges returns errNoChanges when a task of a project with a
// repository completed without changing anything and its agent did not say
// so (its result names no changed file, no no_changes and no outputs, and
// it proposed no plan), else "".
func (l *Lander) noChanges(ctx context.Context, p models.Project, t models.Task) string {
	if p.Repo == nil {
		return "" // no repository: nothing to change by nature
	}
	c, ok, err := l.store.TaskResult(ctx, t.ID)
	if err != nil {
		l.log.Warn("read the task's result", "task_id", t.ID, "err", err)
		return ""
	}
	if !ok || len(c.FilesChanged) > 0 || c.NoChanges || !models.EmptyJSON(string(c.Outputs)) {
		return "" // outputs for its dependents are work done (a discovery step)
	}
	if _, pending, err := l.store.PendingPlan(ctx, t.ID); err != nil || pending {
		return "" // its work was the plan it proposed
	}
	return errNoChanges
}

// landedReason adds to a verified task's reason what its delivery did:
// its note, the merge, or that there was nothing to merge (a completion
// without changes); it never claims a merge that did not happen.
func (l *Lander) landedReason(ctx context.Context, p models.Project, t models.Task, d models.Delivery, reason string) string {
	switch {
	case d.Note != "":
		return reason + "; " + d.Note
	case !d.Merged || p.Repo == nil:
		return reason
	}
	if c, ok, err := l.store.TaskResult(ctx, t.ID); err == nil && ok && len(c.FilesChanged) == 0 {
		if c.NoChanges {
			return reason + "; the agent made no changes, as it said: nothing to merge"
		}
		return reason + "; no changes: nothing to merge"
	}
	return reason + "; merged into " + p.Repo.DefaultBranch
}

// stillCurrent reports whether v is the verification of the task's current
// attempt and the task still VERIFYING: a verification overtaken by an
// admin event and a new attempt must not decide the new one.
func (l *Lander) stillCurrent(ctx context.Context, t models.Task, v models.Verification) bool {
	cur, err := l.store.GetTask(ctx, t.ID)
	if err != nil || cur.Status != models.StatusVerifying {
		return false
	}
	run, ok, err := l.store.LastWorkRun(ctx, t.ID)
	if err != nil || !ok || run.Attempt != v.Attempt {
		l.log.Info("verification overtaken by a later attempt", "task_id", t.ID, "attempt", v.Attempt)
		return false
	}
	return true
}

func checksReason(t models.Task) string {
	if len(t.TestCommands) == 0 {
		return "no test commands"
	}
	return fmt.Sprintf("%d test command(s) passed", len(t.TestCommands))
}

// verification reads a VERIFYING task, its project and its recorded
// verification (a task verified before phases were recorded starts at the
// checks, in its last run's checkout).
func (l *Lander) verification(ctx context.Context, taskID string) (models.Task, models.Project, models.Verification, error) {
	t, err := l.store.GetTask(ctx, taskID)
	if err != nil {
		return t, models.Project{}, models.Verification{}, err
	}
	p, err := l.store.GetProject(ctx, t.ProjectID)
	if err != nil {
		return t, p, models.Verification{}, err
	}
	v, ok, err := l.store.GetVerification(ctx, taskID)
	if err != nil {
		return t, p, v, err
	}
	if !ok || v.Source == "" {
		run, found, err := l.store.LastWorkRun(ctx, taskID)
		if err != nil {
			return t, p, v, err
		}
		if found {
			v.Source, v.Attempt = run.CheckoutPath, run.Attempt
		}
		if v.Phase == "" {
			v.Phase = models.PhaseChecks
		}
	}
	return t, p, v, nil
}

// runChecks runs the task's test commands one by one in dir, each with
// the check timeout; it returns the failure's description and false at the
// first one that fails.
func (l *Lander) runChecks(ctx context.Context, t models.Task, v models.Verification, dir string) (string, bool) {
	for i, cmd := range t.TestCommands {
		logPath := filepath.Join(l.cfg.RunDir, t.ID, fmt.Sprintf("%d.check-%d.log", v.Attempt, i+1))
		tail := &lineTail{max: maxCheckOutput}
		proc, err := agent.Start(agent.Spec{Argv: []string{"/bin/sh", "-c", "exec 2>&1\n" + cmd}, Dir: dir,
			Env: agent.Environment(l.cfg.Environ, nil, map[string]string{"AQ_TASK_ID": t.ID}), LogPath: logPath,
			OnLine: tail.add})
		if err != nil {
			return fmt.Sprintf("test command %q could not start: %v", cmd, err), false
		}
		var res agent.Result
		select {
		case <-proc.Done():
			res, _ = proc.Wait(context.Background())
		case <-l.cfg.After(l.cfg.CheckTimeout):
			res = proc.Stop(l.cfg.StopGrace)
			return fmt.Sprintf("test command %q ran longer than %s; its output ends:\n%s", cmd, l.cfg.CheckTimeout, tail), false
		case <-ctx.Done():
			proc.Stop(l.cfg.StopGrace)
			return "shutting down", false
		}
		if res.ExitCode != 0 {
			return fmt.Sprintf("test command %q failed (%s); its output ends:\n%s", cmd, exitStatus(res), tail), false
		}
	}
	return "", true
}

// exitStatus describes how a check's process ended.
func exitStatus(r agent.Result) string {
	if r.Signal != "" {
		return "killed by signal " + r.Signal
	}
	return fmt.Sprintf("exit status %d", r.ExitCode)
}

// lineTail keeps the last lines of an output, up to max bytes.
type lineTail struct {
	max   int
	lines []string
	size  int
}

func (l *lineTail) add(line []byte) {
	l.lines = append(l.lines, string(line))
	l.size += len(line) + 1
	for l.size > l.max && len(l.lines) > 1 {
		l.size -= len(l.lines[0]) + 1
		l.lines = l.lines[1:]
	}
}

func (l *lineTail) String() string { return strings.Join(l.lines, "\n") }

// verifyFailed ends a verification with VERIFY_FAILED: the reason (for a
// conflict, the files and what the next attempt must do) is kept for the
// next attempt, with the reviewer's feedback when there is some. A
// verification overtaken by a later attempt decides nothing.
func (l *Lander) verifyFailed(ctx context.Context, t models.Task, v models.Verification, step string, err error, fb *models.Feedback) {
	ctx = context.WithoutCancel(ctx)
	if !l.stillCurrent(ctx, t, v) {
		return
	}
	reason := step + ": " + models.ReasonOf(err)
	var conflict *models.ConflictError
	if errors.As(err, &conflict) {
		reason = fmt.Sprintf("%s: %s. The next attempt starts with %s merged into its branch and these files in conflict: resolve them and commit.",
			step, conflict.Error(), conflict.Into)
	}
	if fb != nil {
		reason = step + ": " + fb.Text
	}
	if err := l.store.RecordTaskFailure(ctx, t.ID, models.RunOutcomeVerifyFailed, reason); err != nil {
		l.log.Warn("record verification failure", "task_id", t.ID, "err", err)
	}
	l.log.Info("verification failed", "task_id", t.ID, "step", step, "reason", reason)
	l.apply(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventVerifyFailed, ExpectFrom: models.StatusVerifying,
		Actor: "system", Reason: reason, Feedback: fb})
	if p, err := l.store.GetProject(ctx, t.ProjectID); err == nil {
		if err := l.ws.Cleanup(ctx, p, t, "", false); err != nil {
			l.log.Warn("clean up verification checkout", "task_id", t.ID, "err", err)
		}
	}
}

// land finishes a verified task. A task that lands through a pull request
// (pr_mode always, or requires_approval with pr_mode when_required) gets
// one. A task that requires approval and gets no pull request (pr_mode
// never, no GitHub configured, a repository not on GitHub) waits unmerged
// in AWAITING_APPROVAL for a person (APPROVAL_REQUESTED), unless a person
// approved this attempt already (event HUMAN_APPROVED: its HUMAN
// verification). Otherwise its branch is merged and event (VERIFY_PASSED or
// HUMAN_APPROVED) completes it, or APPROVAL_REQUESTED parks it when its
// plan awaits a person. The merge stops with ctx (shutdown, an admin
// event); the store is written without it.
func (l *Lander) land(ctx context.Context, p models.Project, t models.Task, v models.Verification, event models.TaskEvent, reason string) {
	sctx := context.WithoutCancel(ctx)
	if event == "" {
		event = models.EventVerifyPassed
	}
	if !l.stillCurrent(sctx, t, v) {
		return
	}
	noPR := ""
	switch {
	case p.Settings.NeedsPR(t) && (l.cfg.PullRequests != nil || !t.RequiresApproval):
		if noPR = l.openPR(ctx, p, t, v, reason); noPR == "" {
			return
		}
	case t.RequiresApproval && p.Settings.PRMode == models.PRNever:
		noPR = "the project's pr_mode is never"
	case t.RequiresApproval:
		noPR = "no GitHub is configured"
	}
	if t.RequiresApproval && event != models.EventHumanApproved {
		l.requestApproval(sctx, p, t, v, reason, noPR)
		return
	}
	v.Phase, v.VerificationNote = models.PhaseDeliver, models.VerificationNote{Event: event, Text: reason}
	// The phase is recorded before a merge, so that a verification resumed
	// after a crash delivers again instead of checking again. Without a
	// repository there is nothing to merge: the event below is the only
	// write, and a crash before it resumes from the phase recorded before.
	if p.Repo != nil {
		if err := l.store.SetVerification(sctx, v); err != nil {
			l.log.Warn("record delivery phase", "task_id", t.ID, "err", err)
		}
	}
	d, err := l.ws.Deliver(ctx, p, t, v.Source)
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down or taken away: a later verification delivers
		}
		l.verifyFailed(sctx, t, v, "merge", err, nil)
		return
	}
	if d.Waiting != "" {
		l.landingWaits(sctx, p, t, v, models.StatusVerifying, d.Waiting)
		return
	}
	reason = l.landedReason(sctx, p, t, d, reason)
	if _, pending, err := l.store.PendingPlan(sctx, t.ID); err != nil {
		l.log.Warn("read pending plan", "task_id", t.ID, "err", err)
	} else if pending && p.Settings.RequirePlanApproval {
		event, reason = models.EventApprovalRequested, reason+"; its plan awaits approval"
	}
	l.apply(sctx, models.TransitionRequest{TaskID: t.ID, Event: event, ExpectFrom: models.StatusVerifying, Actor: "system",
		Reason: reason})
	if err := l.ws.Cleanup(sctx, p, t, v.Source, d.Merged); err != nil {
		l.log.Warn("clean up after delivery", "task_id", t.ID, "err", err)
	}
}

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
		if ctx.Err() != nil {
			return // shutting down or taken away: the recorded approval is carried out later
		}
		var conflict *models.ConflictError
		if errors.As(err, &conflict) {
			msg := fmt.Sprintf("%s, but %s. The next attempt starts with %s merged into its branch and these files in conflict: resolve them and commit.",
				reason, conflict.Error(), conflict.Into)
			if err := l.store.RecordTaskFailure(sctx, t.ID, models.RunOutcomeVerifyFailed, msg); err != nil {
				l.log.Warn("record merge conflict", "task_id", t.ID, "err", err)
			}
			l.apply(sctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventAdminRestart,
				ExpectFrom: models.StatusAwaitingApproval, Actor: "system", Reason: msg})
			if err := l.ws.Cleanup(sctx, p, t, "", false); err != nil {
				l.log.Warn("clean up verification checkout", "task_id", t.ID, "err", err)
			}
			return
		}
		l.log.Warn("approved change not merged", "task_id", t.ID, "err", models.RedactURL(err.Error()))
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

// landingWaits records that a task's verified (or approved) work waits to
// land because its LINK repository's default branch is checked out with
// local changes: the verification moves to the landing phase (its detail
// kept, so that the landing resumes as it would have gone on), the task's
// waiting reason says why and which command finishes it, and a notice
// tells the project's channel once per attempt. The task keeps its status
// (VERIFYING, or AWAITING_APPROVAL approved): nothing claims a merge, and
// its dependents wait for it. `agentqueued land PROJECT` (Land) retries.
func (l *Lander) landingWaits(ctx context.Context, p models.Project, t models.Task, v models.Verification,
	status models.TaskStatus, waiting string) {
	why := fmt.Sprintf("%s; then run `agentqueued land %s`", waiting, p.ID)
	if v.Phase != models.PhaseLanding {
		var err error
		if status == models.StatusAwaitingApproval {
			_, err = l.store.SwitchApproval(ctx, t.ID, v.Attempt, v.Phase, models.PhaseLanding, v.VerificationNote)
		} else {
			v.Phase = models.PhaseLanding
			err = l.store.SetVerification(ctx, v)
		}
		if err != nil {
			l.log.Warn("record waiting landing", "task_id", t.ID, "err", err)
			return
		}
	}
	if _, err := l.store.SetLandingWaiting(ctx, t.ID, status, why); err != nil {
		l.log.Warn("record waiting landing", "task_id", t.ID, "err", err)
	}
	l.log.Info("landing waits", "task_id", t.ID, "project_id", p.ID, "reason", waiting)
	if err := l.store.Notify(ctx, fmt.Sprintf("landing:%s:%d", t.ID, v.Attempt), "task.landing_waits", t.ProjectID, t.ID,
		map[string]any{"task_id": t.ID, "title": t.Title, "reason": why}); err != nil {
		l.log.Warn("notify waiting landing", "task_id", t.ID, "err", err)
	}
	// The merge is made again when it lands: the verification checkout
	// is not needed meanwhile; the task branch stays.
	if err := l.ws.Cleanup(ctx, p, t, "", false); err != nil {
		l.log.Warn("clean up verification checkout", "task_id", t.ID, "err", err)
	}
}

// Land retries the waiting landings of a project (verification phase
// landing), oldest first, each as its verification would, and answers
// which tasks landed and which still wait, with why. A project with no
// waiting landing answers with both lists empty.
func (l *Lander) Land(ctx context.Context, projectID string) (models.LandResult, error) {
	if _, err := l.store.GetProject(ctx, projectID); err != nil {
		return models.LandResult{}, err
	}
	vs, err := l.store.Verifications(ctx, models.PhaseLanding)
	if err != nil {
		return models.LandResult{}, err
	}
	res := models.LandResult{ProjectID: projectID, Landed: []models.LandTask{}, Waiting: []models.LandTask{}}
	for _, v := range vs {
		t, err := l.store.GetTask(ctx, v.TaskID)
		if err != nil || t.ProjectID != projectID {
			continue
		}
		l.awaitVerify(ctx, t.ID)
		if err := ctx.Err(); err != nil {
			return res, err
		}
		now, err := l.store.GetTask(ctx, t.ID)
		if err != nil {
			continue // deleted meanwhile
		}
		if now.WaitingCode == models.WaitingLanding {
			res.Waiting = append(res.Waiting, models.LandTask{TaskID: now.ID, Status: now.Status, Reason: now.WaitingReason})
		} else {
			res.Landed = append(res.Landed, models.LandTask{TaskID: now.ID, Status: now.Status, Reason: now.StatusReason})
		}
	}
	return res, nil
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
		l.awaitVerify(ctx, t.ID)
		return l.after(ctx, t)
	case t.Status == models.StatusAwaitingApproval && v.Phase == models.PhaseApproval:
		// Decided once (compare-and-set of the phase); the merge runs as a
		// verification does, and the answer waits for it.
		if err := l.decide(ctx, t, v, models.PhaseApproved, models.VerificationNote{Actor: actor, Text: note}); err != nil {
			return models.TransitionResult{}, err
		}
		l.awaitVerify(ctx, t.ID)
		if cur, found, err := l.store.GetVerification(ctx, t.ID); err == nil && found && cur.Attempt == v.Attempt &&
			cur.Phase == models.PhaseLanding && l.stillAwaiting(ctx, t.ID) {
			now, _ := l.store.GetTask(ctx, t.ID)
			return models.TransitionResult{}, models.Errorf(models.CodeConflict, "task %s is approved, and its change waits to land: %s",
				t.ID, now.WaitingReason)
		}
		if cur, found, err := l.store.GetVerification(ctx, t.ID); err == nil && found && cur.Attempt == v.Attempt &&
			cur.Phase == models.PhaseApproval && l.stillAwaiting(ctx, t.ID) {
			// The person who approved is told why, and may approve again.
			return models.TransitionResult{}, models.Errorf(models.CodeConflict, "task %s: %s; it still awaits approval: approve it again",
				t.ID, cur.Detail())
		}
		return l.after(ctx, t)
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
		l.awaitVerify(ctx, t.ID)
		return l.after(ctx, t)
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

// track adds a goroutine to the ones Wait waits for, unless the Lander
// is shutting down.
func (l *Lander) track() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopping {
		return false
	}
	l.wg.Add(1)
	return true
}

// awaitVerify runs the task's verification in its own goroutine and waits
// for it, or for ctx to end (the verification goes on).
func (l *Lander) awaitVerify(ctx context.Context, taskID string) {
	done := make(chan struct{})
	if !l.track() {
		return // shutting down: the next start resumes the recorded decision
	}
	go func() {
		defer l.wg.Done()
		defer close(done)
		l.verify(taskID)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
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
