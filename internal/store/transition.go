package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/statemachine"
)

// change is one event to apply to one task inside a transaction.
type change struct {
	taskID      string
	event       models.TaskEvent
	expectFrom  models.TaskStatus
	reason      string
	actor       string
	agentID     string
	resumeAfter *time.Time
	// followUp marks a change derived from another: it is re-checked when
	// applied and silently dropped when it no longer holds.
	followUp bool
	// countsRetry uses one of the task's retries (a question's expiry):
	// retry_count + 1, refused when none is left.
	countsRetry bool
}

// Follow-up kinds: evaluate a DEFINED task's edges (DEPS_MET or
// UPSTREAM_FAILED), or reopen a cascade-blocked task (UPSTREAM_REOPENED).
const (
	evalEvent   models.TaskEvent = "evaluate"
	reopenEvent models.TaskEvent = "reopen"
)

// The reason and actor of a promotion (DEPS_MET), as its event and the
// task's status_reason record them.
const (
	depsMetReason = "all dependencies satisfied"
	systemActor   = "system"
)

// txn applies a change and the follow-ups it causes in one transaction.
type txn struct {
	ctx context.Context
	tx  *sql.Tx
	s   *Store
	now time.Time
	// promoted, blocked and reopened collect the follow-ups applied.
	promoted, blocked, reopened []string
	// changed is set when any status changed.
	changed bool
	// rootChanged is set by a reopen check that left a task blocked under a
	// new root cause; its cascade-blocked dependents are checked in turn.
	rootChanged string
	// stmts caches the transaction's prepared statements: a cascade runs
	// the same few statements for every task it reaches.
	stmts map[string]*sql.Stmt
	// touchedRuns are the workflow runs whose tasks changed (true: one
	// finished), advanced and settled when the outermost run ends; depth
	// counts the runs of the engine under way.
	touchedRuns map[string]bool
	depth       int
	// allColumns makes a batch insert every column of each new task,
	// narrow or not (see insertTaskChunk): the reference a test holds
	// the narrow insert to.
	allColumns bool
}

// stmt returns q prepared in the transaction; the transaction closes it.
// A statement the writer has prepared already (the store's cache) is used
// through the transaction without being parsed again; one it has not is
// prepared for this transaction and, after it, for the cache.
func (x *txn) stmt(q string) (*sql.Stmt, error) {
	if st, ok := x.stmts[q]; ok {
		return st, nil
	}
	var st *sql.Stmt
	if cached := x.s.wcache.lookup(q); cached != nil {
		st = x.tx.StmtContext(x.ctx, cached)
	} else {
		var err error
		if st, err = x.tx.PrepareContext(x.ctx, q); err != nil {
			return nil, err
		}
	}
	if x.stmts == nil {
		x.stmts = map[string]*sql.Stmt{}
	}
	x.stmts[q] = st
	return st, nil
}

// counted tells Store.onStatement, when set, of a statement run.
func (x *txn) counted() {
	if f := x.s.onStatement; f != nil {
		f()
	}
}

// QueryRowContext runs q as a cached prepared statement.
func (x *txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	x.counted()
	st, err := x.stmt(q)
	if err != nil {
		// Unprepared, the transaction's own call reports the same error
		// through the returned Row.
		return x.tx.QueryRowContext(ctx, q, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// QueryContext runs q as a cached prepared statement.
func (x *txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	x.counted()
	st, err := x.stmt(q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// ExecContext runs q as a cached prepared statement.
func (x *txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	x.counted()
	st, err := x.stmt(q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (s *Store) newTxn(ctx context.Context, tx *sql.Tx) *txn {
	return &txn{ctx: ctx, tx: tx, s: s, now: s.now().UTC()}
}

// applied describes one transition that happened.
type applied struct {
	task      models.Task
	from      models.TaskStatus
	eventID   int64
	duplicate bool
	skipped   bool
	// event is the event applied.
	event models.TaskEvent
}

// run applies first and then, breadth first, every follow-up it causes.
func (x *txn) run(first change) (applied, error) {
	x.depth++
	defer func() { x.depth-- }()
	queue := []change{first}
	var head applied
	for i := 0; i < len(queue); i++ {
		a, err := x.apply(queue[i])
		if err != nil {
			return applied{}, err
		}
		if i == 0 {
			head = a
		}
		if x.rootChanged != "" {
			follow, err := x.cascadeDependents(x.rootChanged)
			if err != nil {
				return applied{}, err
			}
			x.rootChanged = ""
			queue = append(queue, follow...)
		}
		if a.skipped || a.duplicate {
			continue
		}
		follow, err := x.effects(a)
		if err != nil {
			return applied{}, fmt.Errorf("effects of %s on task %s: %w", queue[i].event, a.task.ID, err)
		}
		queue = append(queue, follow...)
	}
	if x.depth == 1 {
		if err := x.settleRuns(); err != nil {
			return applied{}, err
		}
	}
	return head, nil
}

// nested runs fn as part of one change: the runs of the engine it makes
// leave workflow runs to be advanced and settled once, after it.
func (x *txn) nested(fn func() error) error {
	x.depth++
	err := fn()
	x.depth--
	if err != nil {
		return err
	}
	if x.depth == 0 {
		return x.settleRuns()
	}
	return nil
}

func (x *txn) edgeCounts(taskID string) (broken, unsatisfied int, err error) {
	err = x.QueryRowContext(x.ctx, qEdgeCounts, taskID).Scan(&broken, &unsatisfied)
	return broken, unsatisfied, err
}

// resolveFollowUp turns a follow-up into a concrete event, or reports that it
// no longer applies.
func (x *txn) resolveFollowUp(c change, cur models.Task) (change, bool, error) {
	broken, unsatisfied, err := x.edgeCounts(cur.ID)
	if err != nil {
		return c, false, err
	}
	switch c.event {
	case evalEvent:
		if cur.Status != models.StatusDefined {
			return c, false, nil
		}
		if broken > 0 {
			root, reason, err := x.brokenRoot(cur.ID)
			if err != nil {
				return c, false, err
			}
			c.event, c.reason, c.actor = models.EventUpstreamFailed, reason, "system"
			c.expectFrom = models.StatusDefined
			c.agentID = root // carried to apply as the cascade root
			return c, true, nil
		}
		if unsatisfied == 0 {
			c.event, c.reason, c.actor = models.EventDepsMet, depsMetReason, systemActor
			c.expectFrom = models.StatusDefined
			return c, true, nil
		}
	case reopenEvent:
		if cur.Status != models.StatusBlocked || cur.CascadeRootID == "" {
			break
		}
		if broken == 0 {
			c.event, c.actor = models.EventUpstreamReopened, "system"
			c.expectFrom = models.StatusBlocked
			return c, true, nil
		}
		// Still blocked through another upstream: name the root cause
		// that remains, not the one just repaired.
		root, reason, err := x.brokenRoot(cur.ID)
		if err != nil {
			return c, false, err
		}
		if root != cur.CascadeRootID || reason != cur.StatusReason {
			_, err = x.ExecContext(x.ctx, "UPDATE tasks SET cascade_root_id = ?, status_reason = ?, updated_at = ? WHERE id = ?",
				root, reason, toNanos(x.now), cur.ID)
			if err != nil {
				return c, false, err
			}
			x.rootChanged = cur.ID
		}
	}
	return c, false, nil
}

// brokenRoot names the root cause of a task's first BROKEN edge.
func (x *txn) brokenRoot(taskID string) (root, reason string, err error) {
	var up, upRoot, upReason string
	err = x.QueryRowContext(x.ctx, qBrokenRoot,
		taskID).Scan(&up, &upRoot, &upReason)
	if err != nil {
		return "", "", err
	}
	if upRoot == "" {
		root = up
		reason = fmt.Sprintf("upstream %s is BLOCKED", up)
		if upReason != "" {
			reason += ": " + upReason
		}
		return root, reason, nil
	}
	var rootReason string
	if err := x.QueryRowContext(x.ctx, qStatusReason, upRoot).Scan(&rootReason); err != nil &&
		!errors.Is(err, sql.ErrNoRows) {
		return "", "", err
	}
	reason = fmt.Sprintf("upstream %s is BLOCKED; root cause %s", up, upRoot)
	if rootReason != "" {
		reason += ": " + rootReason
	}
	return upRoot, reason, nil
}

// isRepeat reports whether event was the last one applied to the task,
// from expectFrom when given, leaving it in its current status.
func (x *txn) isRepeat(cur models.Task, c change) (bool, error) {
	var ev, from, to string
	err := x.QueryRowContext(x.ctx, qLastEvent,
		cur.ID).Scan(&ev, &from, &to)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return ev == string(c.event) && to == string(cur.Status) && (c.expectFrom == "" || from == string(c.expectFrom)), nil
}

// apply applies one change: statemachine check, compare-and-set update and
// the event row.
func (x *txn) apply(c change) (applied, error) {
	cur, err := getTask(x.ctx, x, c.taskID)
	if err != nil {
		return applied{}, err
	}
	cascadeRoot := ""
	if c.followUp {
		var ok bool
		if c, ok, err = x.resolveFollowUp(c, cur); err != nil || !ok {
			return applied{task: cur, skipped: true}, err
		}
		if c.event == models.EventUpstreamFailed {
			cascadeRoot, c.agentID = c.agentID, ""
		}
	}
	if c.expectFrom != "" && cur.Status != c.expectFrom {
		if dup, err := x.isRepeat(cur, c); err != nil || dup {
			return applied{task: cur, from: c.expectFrom, duplicate: dup}, err
		}
		return applied{}, models.Errorf(models.CodeConflict, "task %s is %s, not %s", cur.ID, cur.Status, c.expectFrom)
	}
	to, err := statemachine.TaskTransition(cur.Status, c.event)
	if err != nil {
		if dup, derr := x.isRepeat(cur, c); derr != nil || dup {
			return applied{task: cur, from: cur.Status, duplicate: dup}, derr
		}
		if c.event == models.EventAdminCancel {
			return applied{}, cancelRefused(cur, err)
		}
		return applied{}, models.WrapError(models.CodeConflict, err, "%s", err.Error())
	}

	if c.event == models.EventAdminCancel && (cur.Status == models.StatusVerifying || cur.Status == models.StatusAwaitingApproval) {
		var phase models.VerificationPhase
		err := x.QueryRowContext(x.ctx, "SELECT phase FROM verifications WHERE task_id = ?", cur.ID).Scan(&phase)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return applied{}, err
		}
		if phase == models.PhaseDeliver || phase == models.PhaseApproved {
			return applied{}, models.Errorf(models.CodeConflict,
				"task %s: its change is being merged and cannot be cancelled now; cancel or restart it once it has landed", cur.ID)
		}
	}
	next := cur
	next.Status = to
	next.StatusReason = c.reason
	next.CascadeRootID = cascadeRoot
	next.UpdatedAt = x.now
	switch c.event {
	case models.EventAssigned:
		if c.agentID == "" {
			return applied{}, models.Errorf(models.CodeInvalid, "task %s: ASSIGNED needs an agent id", cur.ID)
		}
		next.AssignedAgentID = &c.agentID
	case models.EventRetry:
		if cur.RetryCount >= cur.MaxRetries {
			return applied{}, models.Errorf(models.CodeConflict,
				"task %s has used %d of %d retries: apply MAX_RETRIES instead of RETRY", cur.ID, cur.RetryCount, cur.MaxRetries)
		}
		next.RetryCount++
	case models.EventAdminRestart:
		next.RetryCount = 0
	}
	if c.countsRetry {
		if cur.RetryCount >= cur.MaxRetries {
			return applied{}, models.Errorf(models.CodeConflict,
				"task %s has used %d of %d retries: apply MAX_RETRIES instead of %s", cur.ID, cur.RetryCount, cur.MaxRetries, c.event)
		}
		next.RetryCount++
	}
	switch to {
	case models.StatusDefined, models.StatusReady, models.StatusPaused, models.StatusFailed,
		models.StatusBlocked, models.StatusCompleted:
		next.AssignedAgentID = nil
	}
	if to == models.StatusPaused {
		if c.resumeAfter == nil {
			return applied{}, models.Errorf(models.CodeInvalid, "task %s: %s needs resume_after", cur.ID, c.event)
		}
		next.ResumeAfter = c.resumeAfter
	} else {
		next.ResumeAfter = nil
	}
	if err := next.ValidateConstraints(); err != nil {
		return applied{}, err
	}

	res, err := x.ExecContext(x.ctx, qUpdateStatus,
		next.Status, nullString(next.AssignedAgentID), nullNanos(next.ResumeAfter), next.RetryCount,
		next.StatusReason, next.CascadeRootID, toNanos(x.now), cur.ID, cur.Status)
	if err != nil {
		return applied{}, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return applied{}, models.Errorf(models.CodeConflict, "task %s changed concurrently; %s not applied", cur.ID, c.event)
	}
	if c.event == models.EventAdminRestart && (cur.SuccessCount != 0 || cur.FailureCount != 0) {
		// The work is done again from the start: its remaining work is whole.
		if _, err := x.ExecContext(x.ctx, "UPDATE tasks SET success_count = 0, failure_count = 0 WHERE id = ?", cur.ID); err != nil {
			return applied{}, err
		}
		next.SuccessCount, next.FailureCount = 0, 0
	}
	ev, err := x.ExecContext(x.ctx, qInsertEvent, cur.ID, cur.Status, to, c.event, c.reason, c.actor, toNanos(x.now))
	if err != nil {
		return applied{}, err
	}
	eventID, err := ev.LastInsertId()
	if err != nil {
		return applied{}, err
	}
	if err := x.observeTransition(cur, to, c.event); err != nil {
		return applied{}, err
	}
	if to == models.StatusCompleted {
		if err := x.recordCompletion(cur.ProjectID); err != nil {
			return applied{}, err
		}
	}
	x.changed = true
	if c.followUp {
		switch c.event {
		case models.EventDepsMet:
			x.promoted = append(x.promoted, cur.ID)
		case models.EventUpstreamFailed:
			x.blocked = append(x.blocked, cur.ID)
		case models.EventUpstreamReopened:
			x.reopened = append(x.reopened, cur.ID)
		}
	}
	return applied{task: next, from: cur.Status, eventID: eventID, event: c.event}, nil
}

// cancelRefused explains why a finished task cannot be cancelled.
func cancelRefused(cur models.Task, err error) error {
	switch cur.Status {
	case models.StatusCompleted:
		return models.WrapError(models.CodeConflict, err,
			"task %s is COMPLETED: a completed task cannot be cancelled (ADMIN_RESTART runs it again)", cur.ID)
	case models.StatusBlocked:
		why := ""
		if cur.StatusReason != "" {
			why = " (" + cur.StatusReason + ")"
		}
		return models.WrapError(models.CodeConflict, err,
			"task %s is already BLOCKED%s: there is nothing to cancel", cur.ID, why)
	}
	return models.WrapError(models.CodeConflict, err, "%s", err.Error())
}

// effects updates the dependency facts a transition decides and returns the
// follow-ups to evaluate.
func (x *txn) effects(a applied) ([]change, error) {
	t, from := a.task, a.from
	var err error
	edgesChanged := true
	switch {
	case t.Status == models.StatusCompleted:
		_, err = x.ExecContext(x.ctx, qSatisfyEdges, toNanos(x.now), a.eventID, models.EdgeOutcomeOf(a.event, t.Status), t.ID)
	case t.Status == models.StatusBlocked:
		_, err = x.ExecContext(x.ctx, qBreakEdges, toNanos(x.now), a.eventID, models.EdgeOutcomeOf(a.event, t.Status), t.ID)
	case from == models.StatusBlocked || from == models.StatusCompleted:
		// The task will run again: its broken edges, and every decision
		// toward a dependent that has not started, wait for the new run.
		_, err = x.ExecContext(x.ctx, qWithdrawEdges, t.ID)
	default:
		edgesChanged = false
	}
	if err != nil {
		return nil, err
	}
	if a.event == models.EventAdminCancel || from == models.StatusWaitingInput {
		// Nobody waits for the answers of a task taken away from its
		// questions (answered and expired ones are not open any more).
		if err := x.closeQuestions(t.ID, a.event); err != nil {
			return nil, fmt.Errorf("close questions: %w", err)
		}
	}
	if err := x.planEffects(a); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	x.workflowEffects(a)
	var follow []change
	if t.Status == models.StatusDefined {
		follow = append(follow, change{taskID: t.ID, event: evalEvent, followUp: true})
	}
	if !edgesChanged {
		return follow, nil
	}
	more, err := x.dependentChecks(t.ID, fmt.Sprintf("upstream %s is no longer BLOCKED (%s)", t.ID, t.Status), true)
	return append(follow, more...), err
}

// cascadeDependents returns reopen checks for the cascade-blocked dependents
// of taskID.
func (x *txn) cascadeDependents(taskID string) ([]change, error) {
	return x.dependentChecks(taskID, fmt.Sprintf("upstream %s is no longer BLOCKED", taskID), false)
}

// dependentChecks returns follow-ups for taskID's dependents: evaluation of
// DEFINED ones (when withDefined) and reopen checks of cascade-blocked ones.
func (x *txn) dependentChecks(taskID, reason string, withDefined bool) ([]change, error) {
	rows, err := x.QueryContext(x.ctx, qDependentsToCheck, taskID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var follow []change
	for rows.Next() {
		var id string
		var st models.TaskStatus
		if err := rows.Scan(&id, &st); err != nil {
			return nil, err
		}
		switch {
		case st == models.StatusDefined && withDefined:
			follow = append(follow, change{taskID: id, event: evalEvent, followUp: true})
		case st == models.StatusBlocked:
			follow = append(follow, change{taskID: id, event: reopenEvent, followUp: true, reason: reason})
		}
	}
	return follow, rows.Err()
}

// notify writes the outbox rows of an applied transition: a notice when its
// new status is notable, and one chain.broken notice for a cascade.
func (s *Store) notify(ctx context.Context, tx *sql.Tx, a applied, blocked []string, event models.TaskEvent, reason, actor string) error {
	change := models.TransitionNotice{TaskID: a.task.ID, ProjectID: a.task.ProjectID, Title: a.task.Title, From: a.from,
		To: a.task.Status, Event: event, Reason: reason}
	withActor := change
	withActor.Actor = actor
	if n, ok := models.NewStatusNotice(withActor); ok && (a.task.Status != models.StatusInProgress || event == models.EventAgentStarted) {
		if err := s.enqueue(ctx, tx, fmt.Sprintf("task_event:%d", a.eventID), n); err != nil {
			return err
		}
	}
	if len(blocked) > 0 {
		change.Blocked = blocked
		if err := s.enqueue(ctx, tx, fmt.Sprintf("chain_broken:%d", a.eventID), models.NewChainBrokenNotice(change)); err != nil {
			return err
		}
	}
	return nil
}

// ApplyEvent applies one event to one task with every effect that belongs
// to it, in one transaction. An illegal transition is a conflict whose
// message is the statemachine's ("Invalid transition: (STATUS, EVENT)"); a
// repeat of the event just applied is answered with Duplicate set.
func (s *Store) ApplyEvent(ctx context.Context, req models.TransitionRequest) (models.TransitionResult, error) {
	if !req.Event.Valid() {
		return models.TransitionResult{}, models.Errorf(models.CodeInvalid, "event: unknown task event %q", req.Event)
	}
	if req.ExpectFrom != "" && !req.ExpectFrom.Valid() {
		return models.TransitionResult{}, models.Errorf(models.CodeInvalid, "expect_from: unknown task status %q", req.ExpectFrom)
	}
	if req.Event == models.EventAdminCancel {
		req.Reason = models.CancelReason(req.Actor, req.Reason)
	}
	var out models.TransitionResult
	var changed bool
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		x := s.newTxn(ctx, tx)
		a, err := x.run(change{taskID: req.TaskID, event: req.Event, expectFrom: req.ExpectFrom, reason: req.Reason,
			actor: req.Actor, agentID: req.AgentID, resumeAfter: req.ResumeAfter})
		if models.ErrorCodeOf(err) == models.CodeNotFound {
			// An archived task is shown (ctl task show) but takes no event:
			// say so rather than that it does not exist.
			if archived, _, aerr := archivedUpstream(ctx, x, req.TaskID); aerr != nil {
				return aerr
			} else if archived {
				return models.Errorf(models.CodeConflict, "task %s is archived: a finished task kept in the archive takes no %s "+
					"(create a new task to do its work again)", req.TaskID, req.Event)
			}
		}
		if err != nil {
			return err
		}
		out = models.TransitionResult{Task: a.task, From: a.from, To: a.task.Status, Duplicate: a.duplicate,
			Promoted: x.promoted, Blocked: x.blocked, Reopened: x.reopened}
		changed = x.changed
		if a.duplicate {
			return nil
		}
		if req.Feedback != nil {
			if err := x.addFeedback(a.task.ID, *req.Feedback); err != nil {
				return err
			}
		}
		if err := s.notify(ctx, tx, a, x.blocked, req.Event, req.Reason, req.Actor); err != nil {
			return err
		}
		if a.task.Status == models.StatusCompleted || len(x.promoted) > 0 {
			// Re-read the task so the answer shows what was committed.
			t, err := getTask(ctx, x, a.task.ID)
			if err != nil {
				return err
			}
			out.Task = t
		}
		return nil
	})
	if err != nil {
		return models.TransitionResult{}, fmt.Errorf("apply %s to task %s: %w", req.Event, req.TaskID, err)
	}
	if changed {
		s.changed()
	}
	return out, nil
}
