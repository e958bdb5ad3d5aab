package orchestrator

import (
	"context"
	"fmt"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file is the agents' side of the orchestrator (the agent RPC service)
// and the humans' side of questions and admin events.

// active returns the supervised run with id.
func (o *Orchestrator) active(id int64) (*activeRun, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r, ok := o.runs[id]
	if !ok {
		return nil, models.Errorf(models.CodeConflict, "run %d is not running under this daemon", id)
	}
	return r, nil
}

// Authenticate returns the open run a run token belongs to.
func (o *Orchestrator) Authenticate(ctx context.Context, token string) (models.Run, error) {
	return o.store.RunByToken(ctx, token)
}

// touch records a report of a run over the agent RPC: it keeps the idle
// and heartbeat timeouts away.
func (o *Orchestrator) touch(ctx context.Context, run models.Run) (*activeRun, error) {
	ar, err := o.active(run.ID)
	if err != nil {
		return nil, err
	}
	select {
	case <-ar.stop:
		return nil, models.Errorf(models.CodeConflict, "run %d is being stopped", run.ID)
	default:
	}
	ar.reported(o.cfg.Clock.Now())
	if err := o.store.TouchRun(ctx, run.ID); err != nil {
		return nil, err
	}
	return ar, nil
}

// Heartbeat tells the daemon the agent is alive.
func (o *Orchestrator) Heartbeat(ctx context.Context, run models.Run) error {
	_, err := o.touch(ctx, run)
	return err
}

// Progress records an agent's progress report: its counts of processed
// items on the task (cumulative for the task's current run; see
// Store.SetTaskProgress), and its message as a line for the task's thread.
func (o *Orchestrator) Progress(ctx context.Context, run models.Run, p models.TaskProgress) error {
	if _, err := o.touch(ctx, run); err != nil {
		return err
	}
	msg := p.Message
	if p.HasCounts() {
		t, err := o.store.SetTaskProgress(ctx, run.ID, p.Succeeded, p.Failed)
		if err != nil {
			return err
		}
		o.log.Info("progress counts", "task_id", run.TaskID, "run_id", run.ID, "succeeded", t.SuccessCount,
			"failed", t.FailureCount, "expected", t.ExpectedCount)
		counts := fmt.Sprintf("%d succeeded, %d failed", t.SuccessCount, t.FailureCount)
		if t.ExpectedCount > 0 {
			counts += fmt.Sprintf(" of %d", t.ExpectedCount)
		}
		if msg == "" {
			msg = counts
		} else {
			msg += " (" + counts + ")"
		}
	}
	o.log.Info("progress", "task_id", run.TaskID, "run_id", run.ID, "message", msg)
	if run.Kind == models.RunWork {
		o.logProgress(run, msg)
	}
	key := fmt.Sprintf("progress:%d:%d", run.ID, o.cfg.Clock.Now().UnixNano())
	return o.store.Notify(ctx, key, models.NewProgressNotice(run.ProjectID, models.ProgressNotice{
		TaskID: run.TaskID, RunID: run.ID, Message: msg}))
}

// Ask puts the task in WAITING_INPUT and blocks until a person answers,
// the question expires, the run is stopped, or ctx ends (the agent went
// away). While it waits, the run's time limits are suspended. Whatever
// ends the call, the question stays recorded: a call the agent gave up on
// ends the run, and the task waits on for the answer without it.
func (o *Orchestrator) Ask(ctx context.Context, run models.Run, ask models.Ask) (string, error) {
	if err := ask.Validate(); err != nil {
		return "", err
	}
	ar, err := o.touch(ctx, run)
	if err != nil {
		return "", err
	}
	// Waiting is not idling: mark it before the question is visible, so no
	// round can take the quiet for a hung agent.
	ar.beginWait(o.cfg.Clock.Now())
	defer func() { ar.endWait(o.cfg.Clock.Now()) }()
	// The question is written, and read back, whatever the caller does
	// meanwhile: a call given up half way must still end as abandoned.
	wctx := context.WithoutCancel(ctx)
	q, asked, err := o.openQuestionOf(wctx, run, ask, resumingAsk(ctx))
	if err != nil {
		return "", err
	}
	if !asked {
		if q, err = o.store.AskQuestionWith(wctx, run.ID, ask, o.cfg.InputTimeout); err != nil {
			return "", err
		}
	}
	ch := make(chan askResult, 1)
	o.mu.Lock()
	o.asks[q.ID] = ch
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		delete(o.asks, q.ID)
		o.mu.Unlock()
	}()
	if asked {
		o.log.Info("a question asked before the daemon restarted is waited for again", "task_id", run.TaskID,
			"run_id", run.ID, "question_id", q.ID)
	} else {
		o.log.Info("question asked", "task_id", run.TaskID, "run_id", run.ID, "question_id", q.ID, "expires_at", q.ExpiresAt)
		o.Wake() // arm the expiry
		if o.afterAsk != nil {
			o.afterAsk(q)
		}
	}
	// An answer may have come before the waiter was registered.
	cur, err := o.store.GetQuestion(wctx, q.ID)
	if err != nil {
		o.abandoned(ar, q, "its question could not be read back")
		return "", err
	}
	if cur.Answer != nil {
		return *cur.Answer, nil
	}
	if !cur.Open() {
		return "", models.Errorf(models.CodeConflict, "question %d is not open any more", q.ID)
	}
	select {
	case r := <-ch:
		return r.answer, r.err
	case <-ar.stop:
		return "", models.Errorf(models.CodeConflict, "the run was stopped while waiting for an answer")
	case <-ctx.Done():
		o.abandoned(ar, q, "the agent gave up waiting for the answer")
		return "", ctx.Err()
	}
}

// openQuestionOf returns, when resuming (a relayed ask sent again after
// the daemon restarted while applying it), the question that ask made:
// the run's last question, when it asks the same and is still open or
// answered. asked is then true, and the ask waits for it rather than
// asking again. A daemon that died before the question was written left
// none of that text as the run's last: the ask is then asked anew, and an
// earlier question's answer is never taken for this one's.
func (o *Orchestrator) openQuestionOf(ctx context.Context, run models.Run, ask models.Ask, resuming bool) (q models.Question, asked bool, err error) {
	if !resuming {
		return models.Question{}, false, nil
	}
	qs, err := o.store.TaskQuestions(ctx, run.TaskID)
	if err != nil {
		return models.Question{}, false, err
	}
	var last *models.Question
	for i := range qs {
		if qs[i].RunID == run.ID {
			last = &qs[i]
		}
	}
	if last == nil || last.Text != ask.Question || !last.Open() && last.Answer == nil {
		return models.Question{}, false, nil
	}
	return *last, true, nil
}

// abandoned handles an ask whose caller went away before the answer: the
// agent's CLI gave up on the call (a tool timeout, a closed connection).
// That is no expiry: the question stays open for a person, and the run,
// which would go on without the answer, is ended; its task waits on for
// the answer in WAITING_INPUT without a run (see Store.FinishRun), and the
// answer runs it again with the answer in its prompt. A run being stopped
// anyway changes nothing.
func (o *Orchestrator) abandoned(ar *activeRun, q models.Question, why string) {
	select {
	case <-ar.stop:
		return // the run is ending anyway (stopped, shutting down)
	default:
	}
	o.log.Info(why+"; the question stays open and the task waits for it without a run",
		"task_id", q.TaskID, "run_id", q.RunID, "question_id", q.ID, "expires_at", q.ExpiresAt)
	o.endRuns([]int64{ar.run.ID}, fmt.Sprintf("%s to question %d", why, q.ID))
}

// askResult is what a waiting ask receives: an answer or an error.
type askResult struct {
	answer string
	err    error
}

// answered hands an answer (or an error) to the ask waiting for question id.
func (o *Orchestrator) answered(id int64, answer string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if c, ok := o.asks[id]; ok {
		select {
		case c <- askResult{answer, err}:
		default:
		}
	}
}

// AnswerQuestion records a person's answer and hands it to the waiting
// agent; a task whose run ended while it waited runs again with it (the
// store made it READY: the next round starts it).
func (o *Orchestrator) AnswerQuestion(ctx context.Context, id int64, answer, by string) (models.Question, error) {
	q, err := o.store.AnswerQuestion(ctx, id, answer, by)
	if err != nil {
		return q, err
	}
	o.answered(id, answer, nil)
	o.Wake()
	return q, nil
}

// OpenQuestions lists the questions waiting for a human.
func (o *Orchestrator) OpenQuestions(ctx context.Context) ([]models.Question, error) {
	return o.store.OpenQuestions(ctx)
}

// Complete records the agent's completion; the run's end applies it. A
// second complete of the same run changes nothing.
func (o *Orchestrator) Complete(ctx context.Context, run models.Run, c models.Completion) error {
	ar, err := o.touch(ctx, run)
	if err != nil {
		return err
	}
	ar.mu.Lock()
	if ar.completion == nil {
		ar.completion = &c
	}
	ar.mu.Unlock()
	o.log.Info("agent reported completion", "task_id", run.TaskID, "run_id", run.ID)
	return nil
}

// Fail records the agent's failure; the run's end applies it.
func (o *Orchestrator) Fail(ctx context.Context, run models.Run, message string) error {
	ar, err := o.touch(ctx, run)
	if err != nil {
		return err
	}
	ar.mu.Lock()
	if ar.failure == "" {
		ar.failure = message
	}
	ar.mu.Unlock()
	return nil
}

// Usage adds the run's token use to the ledger.
func (o *Orchestrator) Usage(ctx context.Context, run models.Run, u models.TokenUsage) error {
	if _, err := o.touch(ctx, run); err != nil {
		return err
	}
	u.ProjectID, u.TaskID, u.AgentID = run.ProjectID, run.TaskID, run.AgentID
	return o.store.RecordTokenUsage(ctx, u)
}

// RateLimited pauses the task until the reported reset (no retry is used)
// and ends the run.
func (o *Orchestrator) RateLimited(ctx context.Context, run models.Run, r models.RateLimit) error {
	ar, err := o.touch(ctx, run)
	if err != nil {
		return err
	}
	ar.mu.Lock()
	ar.pause = &r
	ar.mu.Unlock()
	ar.requestStop()
	return nil
}

// ProposePlan validates the run's subtasks as one batch and keeps them as
// the task's pending plan: they are created when the task completes (after
// a person's approval when the project requires it). Entries without
// dependencies run in the order given. The answer lists the entries by
// local id, with no task ids yet.
func (o *Orchestrator) ProposePlan(ctx context.Context, run models.Run, plan models.TaskBatch) ([]models.BatchResult, error) {
	if _, err := o.touch(ctx, run); err != nil {
		return nil, err
	}
	if run.Kind != models.RunWork {
		return nil, models.Errorf(models.CodeConflict, "a review run cannot propose a plan")
	}
	for i := range plan.Tasks {
		if plan.Tasks[i].CreatedBy == "" {
			plan.Tasks[i].CreatedBy = "agent:" + run.AgentID
		}
	}
	p, err := o.store.SavePlan(ctx, run.TaskID, fmt.Sprintf("task %s, run %d", run.TaskID, run.ID), plan.Tasks)
	if err != nil {
		return nil, err
	}
	out := make([]models.BatchResult, len(p.Tasks))
	for i, bt := range p.Tasks {
		out[i] = models.BatchResult{LocalID: bt.LocalID}
	}
	o.log.Info("plan proposed", "task_id", run.TaskID, "run_id", run.ID, "subtasks", len(out))
	return out, nil
}

// ApplyAdminEvent applies a person's event (ADMIN_STOP, ADMIN_CANCEL, ADMIN_RESTART,
// ADMIN_SKIP) and ends the task's run when the event took it away from it.
func (o *Orchestrator) ApplyAdminEvent(ctx context.Context, req models.TransitionRequest) (models.TransitionResult, error) {
	// The runs the event takes the task away from are those under way now:
	// a run the event lets start right after (the task READY again) is not.
	before := o.runIDsOf(req.TaskID)
	res, err := o.store.ApplyEvent(ctx, req)
	if err != nil || res.Duplicate {
		return res, err
	}
	if !res.To.Running() {
		o.endRuns(before, fmt.Sprintf("%s by %s", req.Event, req.Actor))
	}
	if res.From == models.StatusVerifying || res.From == models.StatusAwaitingApproval {
		o.landing.Cancel(req.TaskID) // its checks or merge belong to the attempt just taken away
	}
	return res, nil
}

// TaskDiff returns the change a task's branch makes against its project's
// default branch, from the checkout of the task's last run. For a task
// whose work has landed (COMPLETED) it is the change the landing brought to
// the default branch (the diff of the merge, or of the pull request's
// squashed commit, against its first parent): the branch is deleted once
// merged. A landed task whose landing commit is not found falls back to
// its branch; a landing that merged nothing changes nothing.
func (o *Orchestrator) TaskDiff(ctx context.Context, taskID string) (string, error) {
	t, err := o.store.GetTask(ctx, taskID)
	if err != nil {
		return "", err
	}
	p, err := o.store.GetProject(ctx, t.ProjectID)
	if err != nil {
		return "", err
	}
	landed := t.Status == models.StatusCompleted && p.Repo != nil
	if landed {
		pr := 0
		if got, ok, err := o.store.PullRequestOf(ctx, t.ID); err != nil {
			return "", err
		} else if ok && got.State == models.PRMerged {
			pr = got.Number
		}
		text, commit, err := o.ws.LandedDiff(ctx, p, t, pr)
		if err != nil {
			return "", err
		}
		if commit != "" {
			return text, nil
		}
	}
	run, ok, err := o.store.LastWorkRun(ctx, t.ID)
	if err != nil {
		return "", err
	}
	if !ok || run.CheckoutPath == "" {
		return "", models.Errorf(models.CodeConflict, "task %s has not run yet: there is no change to show", t.ID)
	}
	text, err := o.ws.Diff(ctx, p, t, run.CheckoutPath)
	if landed && models.ErrorCodeOf(err) == models.CodeNotFound {
		if res, ok, rerr := o.store.TaskResult(ctx, t.ID); rerr == nil && ok && len(res.FilesChanged) == 0 {
			return "", nil // landed with nothing to merge
		}
		return "", models.Errorf(models.CodeNotFound, "task %s landed, but no commit on %s names it "+
			"(a rebased pull request leaves none) and its branch was deleted: there is no change to show",
			t.ID, p.Repo.DefaultBranch)
	}
	return text, err
}
