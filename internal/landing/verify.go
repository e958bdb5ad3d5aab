package landing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
)

// This file carries a VERIFYING task's verification from its recorded
// phase: the checks of AUTO_TEST, the delivery of the branch (or its pull
// request, or the wait for a person's approval), a landing that waits,
// and a failed verification. A person's decision is in approval.go, the
// dispatch of reviews in review.go.

// maxCheckOutput is how much of a failing check's output is kept.
const maxCheckOutput = 4096

// goVerify runs a task's verification in its own goroutine.
func (l *Lander) goVerify(taskID string) {
	if !l.track() {
		return // shutting down: the recorded phase is resumed at the next start
	}
	go func() {
		defer l.wg.Done()
		l.verify(taskID, nil)
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

// verifyRun is one verification of a task under way.
type verifyRun struct {
	// cancel ends its context.
	cancel context.CancelFunc
	// done is closed when it has ended.
	done chan struct{}
	// out is what it did, for the caller waiting for it; a verification
	// that waited for another starts with what that one did, so that it
	// still says so when it finds nothing left to do (the task failed).
	out outcome
}

// outcome is what a verification did that its task's state does not say
// by itself: that it failed the task's work, and why.
type outcome struct {
	// failed is the reason the work failed its verification or could not
	// be merged ("" when it did not).
	failed string
	// conflict, when the failure is a merge conflict, names the files.
	conflict *models.ConflictError
}

// noteFailure records on the verification of taskID under way, if any,
// that it failed the task's work: why, and the conflict when it is one.
func (l *Lander) noteFailure(taskID, reason string, conflict *models.ConflictError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if run, ok := l.verifying[taskID]; ok {
		run.out = outcome{failed: reason, conflict: conflict}
	}
}

// verify carries a VERIFYING task's verification as far as it can go
// without waiting: it stages the task branch, runs the checks of AUTO_TEST
// and lands the work, or records that a reviewer or a person is awaited.
// One goroutine verifies a task at a time; a second call waits for the
// first to end, then verifies. then, when not nil, is called at the end
// with what the verification did, while it still holds the task: no other
// verification of the task has started, so the task's state is as this
// one left it. Its context ends at shutdown, or when an admin event takes
// the task out of VERIFYING; the store is written without it, so that
// what was decided is recorded.
func (l *Lander) verify(taskID string, then func(outcome)) {
	l.mu.Lock()
	var before outcome
	for {
		run, busy := l.verifying[taskID]
		if !busy {
			break
		}
		// One verification per task: wait for the one under way, then look
		// again (it may have read the task before a decision this caller
		// waits for).
		l.mu.Unlock()
		<-run.done
		l.mu.Lock()
		before = run.out
	}
	ctx, cancel := context.WithCancel(l.vctx)
	run := &verifyRun{cancel: cancel, done: make(chan struct{}), out: before}
	l.verifying[taskID] = run
	l.mu.Unlock()
	defer func() {
		if then != nil {
			l.mu.Lock()
			out := run.out
			l.mu.Unlock()
			then(out)
		}
		l.mu.Lock()
		delete(l.verifying, taskID)
		l.mu.Unlock()
		cancel()
		close(run.done)
		if l.afterVerify != nil {
			l.afterVerify(taskID)
		}
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
	tests := p.Settings.TestCommandsFor(t)
	if t.VerificationType == models.VerifyAutoTest && len(tests) == 0 {
		// Nothing to run: the merge itself is the only check left.
		l.land(ctx, p, t, v, models.EventVerifyPassed, checksReason(tests))
		return
	}
	staged, err := l.ws.Stage(ctx, p, t, v.Source)
	if err != nil {
		if refused(log, "stage", err) {
			return
		}
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
		if err := l.store.Notify(sctx, fmt.Sprintf("approval:%s:%d", t.ID, v.Attempt), models.NewApprovalNeededNotice(t.ProjectID,
			models.ApprovalNeededNotice{TaskID: t.ID, Title: t.Title, Files: staged.Files})); err != nil {
			log.Warn("notify approval needed", "err", err)
		}
		return
	}
	if msg, ok, err := l.runChecks(ctx, t, tests, v, staged.Dir); !ok {
		if ctx.Err() != nil || refused(log, "checks", err) {
			return // shutting down, taken away or fenced: a later verification runs the checks again
		}
		l.verifyFailed(sctx, t, v, "checks", errors.New(msg), nil)
		return
	}
	l.land(ctx, p, t, v, models.EventVerifyPassed, checksReason(tests))
}

// errNoChanges is why the verification of a run that changed nothing,
// without its agent saying so, fails.
const errNoChanges = "the agent made no changes: nothing was committed on the task branch and the checkout was clean. " +
	"An agent that finds nothing to change completes with `agentqueued agent complete --no-changes` " +
	"(the complete tool's no_changes)"

// noChanges returns errNoChanges when a task of a project with a
// repository completed without changing anything and its agent did not say
// so (its result names no changed file, no no_changes and no outputs, and
// it proposed no plan), else "". What the agent's CLI refused (a write its
// sandbox rejected, kept on the completed run) comes first: it is why.
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
	run, ok, err := l.store.LastWorkRun(ctx, t.ID)
	if err != nil {
		l.log.Warn("read the task's last run", "task_id", t.ID, "err", err)
	}
	if ok && run.Outcome == models.RunOutcomeCompleted && run.Error != "" {
		return run.Error + "; " + errNoChanges
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

// checksReason says what the checks of a verified task were: its test
// commands (the task's own, else its project's).
func checksReason(tests []string) string {
	if len(tests) == 0 {
		return "no test commands"
	}
	return fmt.Sprintf("%d test command(s) passed", len(tests))
}

// verification reads a VERIFYING task, its project and its recorded
// verification (a task verified before phases were recorded starts at the
// checks, in its last run's checkout), and returns once what it read is
// on disk: what is done next with it (checks, a merge, a push, a pull
// request, a reviewer started) acts outside the daemon.
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
	if err := l.store.WaitDurable(ctx); err != nil {
		return t, p, v, err
	}
	return t, p, v, nil
}

// runChecks runs the test commands of task t (its own, else its
// project's) one by one in dir, each with the check timeout; it returns the
// failure's description and false at the first one that fails. Each
// command starts only once the lease is confirmed (the verification
// checkout may be another daemon's now): a refusal returns false with the
// fence's error, the checks undecided.
func (l *Lander) runChecks(ctx context.Context, t models.Task, tests []string, v models.Verification, dir string) (string, bool, error) {
	for i, cmd := range tests {
		if err := l.store.ConfirmLease(ctx); err != nil {
			return "", false, err
		}
		logPath := filepath.Join(l.cfg.RunDir, t.ID, fmt.Sprintf("%d.check-%d.log", v.Attempt, i+1))
		tail := &lineTail{max: maxCheckOutput}
		proc, err := agent.Start(agent.Spec{Argv: []string{"/bin/sh", "-c", "exec 2>&1\n" + cmd}, Dir: dir,
			Env: agent.Environment(l.cfg.Environ, nil, map[string]string{"AQ_TASK_ID": t.ID}), LogPath: logPath,
			OnLine: tail.add})
		if err != nil {
			return fmt.Sprintf("test command %q could not start: %v", cmd, err), false, nil
		}
		var res agent.Result
		select {
		case <-proc.Done():
			res, _ = proc.Wait(context.Background())
		case <-l.cfg.Clock.After(l.cfg.CheckTimeout):
			res = proc.Stop(l.cfg.StopGrace)
			return fmt.Sprintf("test command %q ran longer than %s; its output ends:\n%s", cmd, l.cfg.CheckTimeout, tail), false, nil
		case <-ctx.Done():
			proc.Stop(l.cfg.StopGrace)
			return "shutting down", false, nil
		}
		if res.ExitCode != 0 {
			return fmt.Sprintf("test command %q failed (%s); its output ends:\n%s", cmd, exitStatus(res), tail), false, nil
		}
	}
	return "", true, nil
}

// refused reports whether err is the refusal of the lease's fence (see
// models.Fenced), logging it: the verification is left as recorded, for
// this daemon once its lease is renewed or for the daemon that took the
// database over, and decides nothing.
func refused(log *slog.Logger, step string, err error) bool {
	if err == nil || !models.Fenced(err) {
		return false
	}
	log.Warn("verification left for later: the lease's fence refused its "+step, "err", err)
	return true
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
	l.noteFailure(t.ID, reason, conflict)
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
		if ctx.Err() != nil || refused(l.log.With("task_id", t.ID), "merge", err) {
			return // shutting down, taken away or fenced: a later verification delivers
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

// landingWaits records that a task's verified (or approved) work waits to
// land because its LINK repository's default branch is checked out with
// local changes: the verification moves to the landing phase (its detail
// kept, so that the landing resumes as it would have gone on), the task's
// waiting reason says why and what finishes it, and a notice
// tells the project's channel once per attempt. The task keeps its status
// (VERIFYING, or AWAITING_APPROVAL approved): nothing claims a merge, and
// its dependents wait for it. The watcher (WatchLandings), woken here,
// retries once the tree is clean; `agentqueued land PROJECT` (Land) at
// once.
func (l *Lander) landingWaits(ctx context.Context, p models.Project, t models.Task, v models.Verification,
	status models.TaskStatus, waiting string) {
	why := fmt.Sprintf("%s; it lands by itself once the working tree allows it (`agentqueued land %s` tries at once)",
		waiting, p.ID)
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
	l.pokeLandings()
	if err := l.store.Notify(ctx, fmt.Sprintf("landing:%s:%d", t.ID, v.Attempt), models.NewLandingWaitsNotice(t.ProjectID,
		models.LandingWaitsNotice{TaskID: t.ID, Title: t.Title, Reason: why})); err != nil {
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
// which tasks landed, which still wait (with why) and which failed: their
// merge conflicts now (the default branch moved; the files are named and
// the task runs again with them to resolve) or could not be made. Each is
// answered as its own verification left it. A landing being retried at
// that moment (by the daemon, or another Land) counts: it is waited for.
// A project with no waiting landing answers with the three lists empty.
func (l *Lander) Land(ctx context.Context, projectID string) (models.LandResult, error) {
	if _, err := l.store.GetProject(ctx, projectID); err != nil {
		return models.LandResult{}, err
	}
	// A retry under way records the phase it merges in (deliver, or
	// approved for approved work) and the task keeps its waiting code
	// until it lands or waits again.
	vs, err := l.store.Verifications(ctx, models.PhaseLanding, models.PhaseDeliver, models.PhaseApproved)
	if err != nil {
		return models.LandResult{}, err
	}
	res := models.LandResult{ProjectID: projectID, Landed: []models.LandTask{}, Waiting: []models.LandTask{},
		Failed: []models.LandTask{}}
	for _, v := range vs {
		t, err := l.store.GetTask(ctx, v.TaskID)
		if err != nil || t.ProjectID != projectID || (v.Phase != models.PhaseLanding && t.WaitingCode != models.WaitingLanding) {
			continue
		}
		var (
			entry models.LandTask
			kind  landKind
		)
		if err := l.awaitVerify(ctx, t.ID, func(out outcome) { entry, kind = l.landed(ctx, t.ID, out) }); err != nil {
			return res, fmt.Errorf("land project %s: %w", projectID, err)
		}
		switch kind {
		case landLanded:
			res.Landed = append(res.Landed, entry)
		case landWaiting:
			res.Waiting = append(res.Waiting, entry)
		case landFailed:
			res.Failed = append(res.Failed, entry)
		}
	}
	return res, nil
}

// landKind is the list of a LandResult a retried landing belongs to.
type landKind int

const (
	landGone landKind = iota // the task was deleted meanwhile
	landLanded
	landWaiting
	landFailed
)

// landed describes a task whose landing was retried, as the retry (whose
// outcome is out) left it, and the list it belongs to.
func (l *Lander) landed(ctx context.Context, taskID string, out outcome) (models.LandTask, landKind) {
	now, err := l.store.GetTask(ctx, taskID)
	if err != nil {
		return models.LandTask{}, landGone
	}
	switch {
	case now.WaitingCode == models.WaitingLanding:
		return models.LandTask{TaskID: now.ID, Status: now.Status, Reason: now.WaitingReason}, landWaiting
	case out.conflict != nil:
		c := out.conflict
		what := strings.Join(c.Files, ", ") + " conflict"
		if len(c.Files) == 0 {
			what = c.Error()
		}
		return models.LandTask{TaskID: now.ID, Status: now.Status, Files: c.Files,
			Reason: fmt.Sprintf("%s moved: %s; the task runs again with the conflict to resolve", c.Into, what)}, landFailed
	case out.failed != "":
		return models.LandTask{TaskID: now.ID, Status: now.Status, Reason: out.failed}, landFailed
	case now.Status != models.StatusCompleted && now.Status != models.StatusAwaitingApproval && now.Status != models.StatusVerifying:
		// Ended by a verification that finished before this one started
		// (or taken away meanwhile): it did not land.
		return models.LandTask{TaskID: now.ID, Status: now.Status, Reason: now.StatusReason}, landFailed
	}
	return models.LandTask{TaskID: now.ID, Status: now.Status, Reason: now.StatusReason}, landLanded
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
// for it, or for ctx to end (the verification goes on, and ctx's error is
// returned). then is called with what the verification did while it still
// holds the task (see verify): an answer computed there reads the task as
// this verification left it, not as a later one (started meanwhile by the
// loop or another request) has it in the middle of its work. When no
// verification can start (the Lander is shutting down: the next start
// resumes the recorded decision), then is called at once with an empty
// outcome.
func (l *Lander) awaitVerify(ctx context.Context, taskID string, then func(outcome)) error {
	done := make(chan struct{})
	if !l.track() {
		then(outcome{})
		return nil
	}
	go func() {
		defer l.wg.Done()
		defer close(done)
		l.verify(taskID, then)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
