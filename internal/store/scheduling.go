package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds what a scheduling round reads besides SchedulingState:
// pages of READY tasks, the waiting reasons it writes, and the due timers.

// readyColumns are the columns of a READY task a scheduling round uses
// (scanReadyTask): not its text (title, description, criteria, tests).
const readyColumns = `id, project_id, priority, status, kind, metadata, created_by, not_before, expected_count,
	success_count, failure_count, created_at, workflow_run_id, step_name, step_concurrency, rules, waiting_code,
	waiting_reason, agent_type, prefer_agent_id, submission_seq, runner_labels`

// scanReadyTask reads a row of readyColumns.
func scanReadyTask(row scanner) (models.Task, error) {
	var (
		t                   models.Task
		runID               sql.NullString
		notBefore           sql.NullInt64
		meta, rules, labels string
		created             int64
	)
	if err := row.Scan(&t.ID, &t.ProjectID, &t.Priority, &t.Status, &t.Kind, &meta, &t.CreatedBy, &notBefore,
		&t.ExpectedCount, &t.SuccessCount, &t.FailureCount, &created, &runID, &t.StepName, &t.StepConcurrency, &rules,
		&t.WaitingCode, &t.WaitingReason, &t.AgentType, &t.PreferAgentID, &t.SubmissionSeq, &labels); err != nil {
		return models.Task{}, err
	}
	if err := decodeJSONColumn(labels, &t.RunnerLabels); err != nil {
		return models.Task{}, fmt.Errorf("task %s runner_labels: %w", t.ID, err)
	}
	t.NotBefore, t.CreatedAt, t.RunID = fromNullNanos(notBefore), fromNanos(created), runID.String
	if err := decodeJSONColumn(meta, &t.Metadata); err != nil {
		return models.Task{}, fmt.Errorf("task %s metadata: %w", t.ID, err)
	}
	if err := decodeJSONColumn(rules, &t.Rules); err != nil {
		return models.Task{}, fmt.Errorf("task %s rules: %w", t.ID, err)
	}
	return t, nil
}

// qReadyPage reads a project's READY tasks that can start at a time, in
// start order; callers append a cursor, exclusions, the order and a limit.
const qReadyPage = `SELECT ` + readyColumns + ` FROM tasks INDEXED BY tasks_ready_order
	WHERE project_id = +? AND status = 'READY' AND (not_before IS NULL OR not_before <= +?)`

// qSlotHolders reads the tasks in running statuses, each with whether it
// holds a slot: an agent or a process of the daemon works for it (its own
// run or a review run is open, or it is VERIFYING while its checks run or
// its work is merged). A task waiting for a person's decision or answer
// (WAITING_INPUT once the run that asked has ended), for its reviewer to
// become free, for its pull request or for a linked checkout to be clean
// before its work lands holds none.
const qSlotHolders = `SELECT ` + taskColumns + `, ` + slotHeld + `
	FROM tasks WHERE status IN ('ASSIGNED', 'IN_PROGRESS', 'WAITING_INPUT', 'VERIFYING', 'AWAITING_APPROVAL') ORDER BY submission_seq`

// slotHeld is true for a task (a row of tasks) that holds a slot.
const slotHeld = `(status IN ('ASSIGNED', 'IN_PROGRESS')
	 OR EXISTS (SELECT 1 FROM task_runs r WHERE r.task_id = tasks.id AND r.ended_at IS NULL)
	 OR (status = 'VERIFYING' AND coalesce((SELECT phase FROM verifications v WHERE v.task_id = tasks.id), '')
	     NOT IN ('human', 'review', 'landing')))`

// qSlotsHeld counts the slots a project's tasks hold.
const qSlotsHeld = `SELECT count(*) FROM tasks WHERE project_id = ?
	AND status IN ('ASSIGNED', 'IN_PROGRESS', 'WAITING_INPUT', 'VERIFYING', 'AWAITING_APPROVAL') AND ` + slotHeld

// SlotsHeld counts the slots the tasks of project projectID hold now (see
// SchedulingState): what a review compares with the project's
// max_concurrent_agents before its reviewer starts.
func (s *Store) SlotsHeld(ctx context.Context, projectID string) (int, error) {
	var n int
	if err := s.rdb.QueryRowContext(ctx, qSlotsHeld, projectID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count slots of project %s: %w", projectID, err)
	}
	return n, nil
}

// qNextReadyRules is the next distinct own-rules text of a project's READY
// tasks after a given one, read from the tasks_ready_rules index.
const qNextReadyRules = `SELECT min(rules) FROM tasks INDEXED BY tasks_ready_rules
	WHERE project_id = +? AND status = 'READY' AND rules <> '[]' AND rules > +?`

// ReadyRuleSets returns the distinct own rules (each as its stored text) of
// project projectID's READY tasks, at most limit of them, in text order. It
// reads one index entry per set, not the tasks.
func (s *Store) ReadyRuleSets(ctx context.Context, projectID string, limit int) ([]string, error) {
	var out []string
	after := ""
	for len(out) < limit {
		var next sql.NullString
		if err := s.rdb.QueryRowContext(ctx, qNextReadyRules, projectID, after).Scan(&next); err != nil {
			return nil, fmt.Errorf("read own rules of project %s: %w", projectID, err)
		}
		if !next.Valid {
			break
		}
		out = append(out, next.String)
		after = next.String
	}
	return out, nil
}

// qNextNotBefore is the earliest not_before of a READY task after a time.
const qNextNotBefore = `SELECT min(not_before) FROM tasks INDEXED BY tasks_ready_not_before
	WHERE status = 'READY' AND not_before > ?`

// qReadyGeneration reads the count of changes to READY tasks (migration
// 0019): it moves whenever a task becomes READY or a READY task changes
// otherwise than by having its waiting reason written.
const qReadyGeneration = `SELECT n FROM ready_generation WHERE id = 1`

// ReadyTasks reads one page of a project's READY tasks that can start at
// q.Now (not_before passed), in start order (priority, then submission), after
// q.After, leaving out those of q.Exclude. It reads only the rows it
// returns and the index entries it passes over. Each task has the fields
// a scheduling round uses — id, project, priority, status, kind, metadata,
// creator, not_before, counts, creation time, workflow step, own rules and
// waiting reason — and no others (GetTask reads a whole task).
func (s *Store) ReadyTasks(ctx context.Context, q models.ReadyQuery) ([]models.Task, error) {
	var b strings.Builder
	b.WriteString(qReadyPage)
	args := []any{q.ProjectID, toNanos(q.Now)}
	if q.After != nil {
		b.WriteString(" AND (priority, submission_seq) > (?, ?)")
		args = append(args, q.After.Priority, q.After.SubmissionSeq)
	}
	for _, e := range q.Exclude {
		pred, pargs := exclusionSQL(e)
		b.WriteString(" AND NOT " + pred)
		args = append(args, pargs...)
	}
	b.WriteString(" ORDER BY priority, submission_seq LIMIT +?")
	args = append(args, max(q.Limit, 1))
	out, err := queryAll(ctx, s.rdb, scanReadyTask, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("read READY tasks of project %s: %w", q.ProjectID, err)
	}
	return out, nil
}

// exclusionSQL returns a predicate on tasks matching e, with its arguments.
func exclusionSQL(e models.ReadyExclusion) (string, []any) {
	if e.RunID != "" {
		return "(workflow_run_id = ? AND step_name = ? AND step_concurrency > 0 AND step_concurrency <= ?)",
			[]any{e.RunID, e.Step, e.StepRunning}
	}
	parts := []string{"1"}
	var args []any
	if e.ProjectID != "" {
		parts, args = append(parts, "project_id = ?"), append(args, e.ProjectID)
	}
	if e.Rules != "" {
		parts, args = append(parts, "rules = ?"), append(args, e.Rules)
	}
	if e.Kind != "" {
		parts, args = append(parts, "kind = ?"), append(args, e.Kind)
	}
	for _, k := range sortedKeys(e.Fields) {
		var v any
		if p := e.Fields[k]; p != nil {
			v = *p
		}
		parts, args = append(parts, "json_extract(CASE WHEN json_valid(metadata) THEN metadata ELSE '{}' END, ?) IS ?"),
			append(args, `$."`+k+`"`, v)
	}
	if e.MaxRemaining != nil {
		parts = append(parts, "max(0, expected_count - success_count - failure_count) > ?")
		args = append(args, *e.MaxRemaining)
	}
	return "(" + strings.Join(parts, " AND ") + ")", args
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Insertion sort: a rule names a few fields.
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// qWaitingDiffers is true for a READY task whose waiting reason is not
// (?1, ?2); the statements that use it read the tasks_ready_waiting index.
const qWaitingDiffers = `(waiting_code < ?1 OR waiting_code > ?1 OR (waiting_code = ?1 AND (waiting_reason < ?2 OR waiting_reason > ?2)))`

// qWaitingAll writes (?1, ?2) on the READY tasks of project ?3 that do not
// have it, found as ranges of the tasks_ready_waiting index: tasks that
// have it already are not read.
const qWaitingAll = `UPDATE tasks SET waiting_code = ?1, waiting_reason = ?2 WHERE rowid IN (
	SELECT rowid FROM tasks INDEXED BY tasks_ready_waiting WHERE project_id = ?3 AND status = 'READY' AND waiting_code < ?1
	UNION ALL SELECT rowid FROM tasks INDEXED BY tasks_ready_waiting WHERE project_id = ?3 AND status = 'READY' AND waiting_code > ?1
	UNION ALL SELECT rowid FROM tasks INDEXED BY tasks_ready_waiting WHERE project_id = ?3 AND status = 'READY'
		AND waiting_code = ?1 AND waiting_reason < ?2
	UNION ALL SELECT rowid FROM tasks INDEXED BY tasks_ready_waiting WHERE project_id = ?3 AND status = 'READY'
		AND waiting_code = ?1 AND waiting_reason > ?2)`

// qWaitingFuture writes code ?1 and reason ?2 followed by the task's
// not_before on the READY tasks of project ?3 dated after ?4 that do not
// have the code, found in the index without reading the others. A task
// that has the code has its time: not_before cannot be edited.
const qWaitingFuture = `UPDATE tasks SET waiting_code = ?1,
	waiting_reason = ?2 || strftime('%Y-%m-%dT%H:%M:%SZ', not_before / 1000000000, 'unixepoch') WHERE rowid IN (
	SELECT rowid FROM tasks INDEXED BY tasks_ready_waiting WHERE project_id = ?3 AND status = 'READY' AND waiting_code < ?1
		AND not_before > ?4
	UNION ALL SELECT rowid FROM tasks INDEXED BY tasks_ready_waiting WHERE project_id = ?3 AND status = 'READY'
		AND waiting_code > ?1 AND not_before > ?4)`

// SetWaiting writes waiting reasons on READY tasks, each only where it is
// not written already, in one transaction; it returns how many tasks
// changed. It does not wake the scheduler: a reason changes nothing a
// round decides.
func (s *Store) SetWaiting(ctx context.Context, updates []models.WaitingUpdate) (int64, error) {
	if len(updates) == 0 {
		return 0, nil
	}
	var n int64
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		for _, u := range updates {
			q, args := waitingSQL(u)
			if q == "" {
				continue
			}
			res, err := tx.ExecContext(ctx, q, args...)
			if err != nil {
				return fmt.Errorf("project %s: %w", u.ProjectID, err)
			}
			c, _ := res.RowsAffected()
			n += c
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("write waiting reasons: %w", err)
	}
	return n, nil
}

// waitingSQL returns the statement of one WaitingUpdate.
func waitingSQL(u models.WaitingUpdate) (string, []any) {
	set := "UPDATE tasks INDEXED BY tasks_ready_waiting SET waiting_code = ?1, waiting_reason = ?2 WHERE status = 'READY'"
	args := []any{u.Code, u.Reason}
	canStart := " AND (not_before IS NULL OR not_before <= ?)"
	var b strings.Builder
	switch u.Scope {
	case models.WaitAll:
		return qWaitingAll, append(args, u.ProjectID)
	case models.WaitFuture:
		return qWaitingFuture, append(args, u.ProjectID, toNanos(u.Now))
	case models.WaitExcluded:
		if len(u.Exclude) == 0 {
			return "", nil
		}
		b.WriteString(set + " AND project_id = ?" + canStart + " AND " + qWaitingDiffers)
		args = append(args, u.ProjectID, toNanos(u.Now))
		pred, pargs := exclusionSQL(u.Exclude[0])
		b.WriteString(" AND " + pred)
		args = append(args, pargs...)
		for _, e := range u.Exclude[1:] {
			pred, pargs := exclusionSQL(e)
			b.WriteString(" AND NOT " + pred)
			args = append(args, pargs...)
		}
	case models.WaitTasks:
		if len(u.TaskIDs) == 0 {
			return "", nil
		}
		b.WriteString("UPDATE tasks SET waiting_code = ?1, waiting_reason = ?2 WHERE status = 'READY' AND " + qWaitingDiffers +
			" AND id IN (?" + strings.Repeat(",?", len(u.TaskIDs)-1) + ")")
		for _, id := range u.TaskIDs {
			args = append(args, id)
		}
	case models.WaitRest:
		b.WriteString(set + " AND project_id = ?" + canStart + " AND " + qWaitingDiffers)
		args = append(args, u.ProjectID, toNanos(u.Now))
		if u.After != nil {
			b.WriteString(" AND (priority, submission_seq) > (?, ?)")
			args = append(args, u.After.Priority, u.After.SubmissionSeq)
		}
		for _, e := range u.Exclude {
			pred, pargs := exclusionSQL(e)
			b.WriteString(" AND NOT " + pred)
			args = append(args, pargs...)
		}
	default:
		return "", nil
	}
	return b.String(), args
}

// qDuePaused reads PAUSED tasks whose resume time has come, by due time,
// after the position (?2, ?3), at most ?4.
const qDuePaused = `SELECT ` + taskColumns + ` FROM tasks INDEXED BY tasks_paused_due
	WHERE status = 'PAUSED' AND resume_after <= ?1 AND (resume_after, id) > (?2, ?3) ORDER BY resume_after, id LIMIT +?4`

// qNextPause is the earliest resume time after ?1.
const qNextPause = `SELECT min(resume_after) FROM tasks INDEXED BY tasks_paused_due WHERE status = 'PAUSED' AND resume_after > ?`

// DuePaused returns up to limit PAUSED tasks whose resume time is at or
// before now, by resume time then id, after the task at (afterAt, afterID)
// (zero values: from the start), and the earliest resume time after now
// (nil if none). It reads only due rows and one index entry beyond.
func (s *Store) DuePaused(ctx context.Context, now time.Time, afterAt time.Time, afterID string, limit int) ([]models.Task, *time.Time, error) {
	from := int64(-1 << 63)
	if !afterAt.IsZero() {
		from = toNanos(afterAt)
	}
	due, err := queryAll(ctx, s.rdb, scanTask, qDuePaused, toNanos(now), from, afterID, max(limit, 1))
	if err != nil {
		return nil, nil, fmt.Errorf("read due PAUSED tasks: %w", err)
	}
	var next sql.NullInt64
	if err := s.rdb.QueryRowContext(ctx, qNextPause, toNanos(now)).Scan(&next); err != nil {
		return nil, nil, fmt.Errorf("read next resume time: %w", err)
	}
	return due, fromNullNanos(next), nil
}

// qDueFailed reads FAILED tasks that are due: out of retries, or whose
// backoff (?2 doubled per retry, at most ?3: models.RetryBackoff, which
// TestDueFailedAgreesWithRetryAt holds equal) has passed at ?1; after the
// position (?4, ?5), at most ?6. A task failed longer than the largest
// backoff ago is always due, so the index range read holds the due ones
// and those failed within the largest backoff.
const qDueFailed = `SELECT ` + taskColumns + ` FROM tasks INDEXED BY tasks_failed_due
	WHERE status = 'FAILED' AND (updated_at, id) > (?4, ?5)
	AND (retry_count >= max_retries OR updated_at + min(?2 * (1 << min(retry_count, 62)), ?3) <= ?1)
	ORDER BY updated_at, id LIMIT +?6`

// qNextRetry is the earliest due time of a FAILED task not yet due at ?1:
// those failed within the largest backoff (?3).
const qNextRetry = `SELECT min(updated_at + min(?2 * (1 << min(retry_count, 62)), ?3)) FROM tasks INDEXED BY tasks_failed_due
	WHERE status = 'FAILED' AND updated_at > ?1 - ?3 AND retry_count < max_retries
	AND updated_at + min(?2 * (1 << min(retry_count, 62)), ?3) > ?1`

// DueFailed returns up to limit FAILED tasks that are due at now (out of
// retries, or their backoff — base doubled per retry, at most maxBackoff —
// passed), by failure time then id, after the task at (afterAt, afterID),
// and the earliest time another becomes due (nil if none).
func (s *Store) DueFailed(ctx context.Context, now time.Time, base, maxBackoff time.Duration, afterAt time.Time, afterID string, limit int) ([]models.Task, *time.Time, error) {
	from := int64(-1 << 63)
	if !afterAt.IsZero() {
		from = toNanos(afterAt)
	}
	due, err := queryAll(ctx, s.rdb, scanTask, qDueFailed, toNanos(now), int64(base), int64(maxBackoff), from, afterID, max(limit, 1))
	if err != nil {
		return nil, nil, fmt.Errorf("read due FAILED tasks: %w", err)
	}
	// The smaller of a backoff and maxBackoff is an integer: the product
	// turns real only past the range of int64, beyond maxBackoff. The shift
	// stops at 2^62, the largest power of two in int64: even a base of 1ns
	// doubled 62 times is 146 years, longer than any backoff.
	var next sql.NullInt64
	if err := s.rdb.QueryRowContext(ctx, qNextRetry, toNanos(now), int64(base), int64(maxBackoff)).Scan(&next); err != nil {
		return nil, nil, fmt.Errorf("read next retry time: %w", err)
	}
	return due, fromNullNanos(next), nil
}
