package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Queries of retention: each selects at most a batch, oldest first.
const (
	// A finished task is archivable when nothing live still needs it: no
	// unfinished dependent waits on an edge it has not satisfied, no task
	// is its subtask, no agent holds it, no run of it is open and its
	// workflow run has ended.
	archivable = `t.status IN ('COMPLETED', 'BLOCKED')
		AND NOT EXISTS (SELECT 1 FROM task_dependencies d JOIN tasks dn ON dn.id = d.downstream
			WHERE d.upstream = t.id AND d.resolution != 'SATISFIED' AND dn.status != 'COMPLETED')
		AND NOT EXISTS (SELECT 1 FROM tasks c WHERE c.parent_task_id = t.id)
		AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.current_task_id = t.id)
		AND NOT EXISTS (SELECT 1 FROM task_runs r WHERE r.task_id = t.id AND r.ended_at IS NULL)
		AND NOT EXISTS (SELECT 1 FROM workflow_runs w WHERE w.id = t.workflow_run_id AND w.status IN ('pending', 'running'))`
	qArchivableTasks = `SELECT t.id FROM tasks t INDEXED BY tasks_finished
		WHERE t.updated_at < ?1 AND ` + archivable + ` ORDER BY t.updated_at LIMIT ?2`
	// Which tasks of a batch read for the archive are still archivable,
	// with what says whether they changed since: their status, last change
	// and last event (see stillArchivable). The batch's ids lead the join:
	// left to itself, the planner walks every finished task by status.
	qStillArchivable = `SELECT t.id, t.status, t.updated_at,
		coalesce((SELECT max(e.id) FROM task_events e WHERE e.task_id = t.id), 0)
		FROM json_each(?1) b CROSS JOIN tasks t ON t.id = b.value WHERE ` + archivable
	qInsertArchived = `INSERT INTO archived_tasks (id, project_id, status, created_at, updated_at, archived_at, task, detail,
		run_id, step_name) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// The deletes of a batch archived, its ids in ?1 as a JSON array.
	qDeleteArchivedChats = "DELETE FROM chat_threads WHERE task_id " + inBatch
	qDeleteArchivedTasks = "DELETE FROM tasks WHERE id " + inBatch
	qArchivedDetail      = "SELECT detail, archived_at FROM archived_tasks WHERE id = ?"
	// Notices delivered (or given up) before the cutoff, and those never
	// delivered that were made before it (a daemon without Discord
	// delivers none), but none a consumer of task events (event_cursors)
	// has still to read while an enabled hook fires on events: without
	// one, the hooks' cursor stands still, and is moved to the newest event
	// when one is made (startHookCursor).
	qPruneOutbox = `DELETE FROM outbox WHERE id IN (SELECT id FROM outbox
		WHERE coalesce(delivered_at, created_at) < ?1
		AND (NOT (` + qAnyEventHook + `)
			OR id <= coalesce((SELECT min(last_id) FROM event_cursors), 9223372036854775807))
		ORDER BY id LIMIT ?2)`
	// Finished hook runs, but never a hook's newest run that counts for its
	// cooldown nor its newest scheduled firing (what catch-up reads).
	qPruneHookRuns = `DELETE FROM hook_runs WHERE rowid IN (SELECT h.rowid FROM hook_runs h INDEXED BY hook_runs_started
		WHERE h.status != 'running' AND h.started_at < ?1
		AND h.started_at < coalesce((SELECT max(l.started_at) FROM hook_runs l
			WHERE l.hook_id = h.hook_id AND l.status != 'skipped'), 9223372036854775807)
		AND (h.scheduled_at IS NULL OR h.scheduled_at < (SELECT max(l.scheduled_at) FROM hook_runs l
			WHERE l.hook_id = h.hook_id AND l.scheduled_at IS NOT NULL))
		ORDER BY h.started_at LIMIT ?2)`
	// Ended workflow runs none of whose tasks is left in the working
	// tables, but never a workflow's newest run.
	qPruneWorkflowRuns = `DELETE FROM workflow_runs WHERE id IN (SELECT w.id FROM workflow_runs w INDEXED BY workflow_runs_ended
		WHERE w.ended_at IS NOT NULL AND w.ended_at < ?1 AND w.status IN ('success', 'failed', 'cancelled')
		AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.workflow_run_id = w.id)
		AND w.created_at < (SELECT max(l.created_at) FROM workflow_runs l WHERE l.workflow = w.workflow)
		ORDER BY w.ended_at LIMIT ?2)`
	qPruneArchive = `DELETE FROM archived_tasks WHERE rowid IN (SELECT rowid FROM archived_tasks INDEXED BY archived_tasks_at
		WHERE archived_at < ?1 ORDER BY archived_at LIMIT ?2)`
	qRunFilesDue = `SELECT id, task_id, attempt, kind FROM task_runs INDEXED BY task_runs_files
		WHERE files_pruned_at IS NULL AND ended_at IS NOT NULL AND ended_at < ? ORDER BY ended_at LIMIT ?`
)

// RunFiles names one ended run whose files on disk are due to be deleted.
type RunFiles struct {
	RunID   int64
	TaskID  string
	Attempt int
	// Kind is models.RunWork or models.RunReview.
	Kind string
}

// ArchiveTasks moves at most limit finished tasks last changed before
// before out of the working tables: each task's detail as GetTaskDetail
// shows it goes to the archive, and the task with its edges, events, runs,
// questions, results, verification and pull request leaves the working
// tables. The token ledger keeps its rows. Which tasks are finished enough
// is in qArchivableTasks: a task something live still needs stays. It is
// ReadArchiveBatch then WriteArchiveBatch, and returns the ids archived
// (none: nothing is due, or all of it changed in between).
func (s *Store) ArchiveTasks(ctx context.Context, before time.Time, limit int) ([]string, error) {
	b, err := s.ReadArchiveBatch(ctx, before, limit)
	if err != nil || b.Len() == 0 {
		return nil, err
	}
	ids, _, err := s.WriteArchiveBatch(ctx, b)
	return ids, err
}

// ArchiveBatch is a batch of tasks to archive, read and encoded by
// ReadArchiveBatch for WriteArchiveBatch.
type ArchiveBatch struct {
	entries []archiveEntry
}

// Len is the number of tasks read.
func (b ArchiveBatch) Len() int { return len(b.entries) }

// ReadArchiveBatch reads at most limit archivable tasks last changed
// before before, and their details, on one read snapshot, and encodes
// their archive rows: the work of archiving that does not need the
// writer.
func (s *Store) ReadArchiveBatch(ctx context.Context, before time.Time, limit int) (ArchiveBatch, error) {
	entries, err := s.readArchiveBatch(ctx, before, limit)
	if err != nil {
		return ArchiveBatch{}, fmt.Errorf("archive tasks: %w", err)
	}
	return ArchiveBatch{entries: entries}, nil
}

// WriteArchiveBatch archives the tasks of b in one write transaction that
// only checks that each is still archivable and unchanged since it was
// read (one that changed stays, for a later batch to read again), inserts
// their archive rows and deletes them from the working tables. It returns
// the ids archived and about how long the transaction held the writer
// (from after the lease's check to its commit, on the store's clock; the
// wait for the writer is not in it).
//
// What the check compares — status, last change, last event, edges — is
// what every status change, edit and edge change moves. A few writes move
// none of them (an agent removed clears its runs' session ids; a late
// usage report on an ended run): one that lands between the read and the
// write leaves the archive with the detail as of the read, as if the task
// had been archived first.
func (s *Store) WriteArchiveBatch(ctx context.Context, b ArchiveBatch) ([]string, time.Duration, error) {
	batch := b.entries
	if len(batch) == 0 {
		return nil, 0, nil
	}
	if s.afterArchiveRead != nil {
		s.afterArchiveRead()
	}
	var (
		ids   []string
		begun time.Time
	)
	err := s.withRedoableTx(ctx, func(tx *sql.Tx) error {
		begun = s.now()
		ids = ids[:0]
		x := s.newTxn(ctx, tx)
		keep, err := stillArchivable(ctx, x, batch)
		if err != nil {
			return err
		}
		for _, e := range batch {
			if !keep[e.id] {
				continue
			}
			if _, err := x.ExecContext(ctx, qInsertArchived, e.id, e.projectID, e.status, e.createdAt,
				e.updatedAt, e.archivedAt, e.task, e.detail, emptyToNull(e.runID), e.stepName); err != nil {
				return fmt.Errorf("archive task %s: %w", e.id, err)
			}
			ids = append(ids, e.id)
		}
		if len(ids) == 0 {
			return nil
		}
		// One statement each for the whole batch: the foreign keys'
		// cascades take the rest.
		arg := batchArg(ids)
		for _, del := range []string{qDeleteArchivedChats, qDeleteArchivedTasks} {
			if _, err := x.ExecContext(ctx, del, arg); err != nil {
				return fmt.Errorf("delete archived tasks: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("archive tasks: %w", err)
	}
	return ids, s.now().Sub(begun), nil
}

// archiveEntry is one task of a batch to archive, read and encoded before
// the write transaction, with what tells whether it changed since.
type archiveEntry struct {
	id, projectID        string
	runID, stepName      string
	status               models.TaskStatus
	createdAt, updatedAt int64
	archivedAt           int64
	task, detail         string
	// lastEvent is the task's newest event; dependencies and dependents
	// its edges both ways, encoded (edgeKeys).
	lastEvent                int64
	dependencies, dependents string
}

// readArchiveBatch reads at most limit archivable tasks last changed
// before before, and their details, on one read snapshot, and encodes
// their archive rows.
func (s *Store) readArchiveBatch(ctx context.Context, before time.Time, limit int) ([]archiveEntry, error) {
	// The statements the read missed are prepared once its connection is
	// given back (deferred first, run last).
	defer s.rdb.cache.fill(ctx)
	rtx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer rtx.Rollback() //nolint:errcheck // read-only
	q := readTx{tx: rtx, c: s.rdb.cache}
	ids, err := queryIDs(ctx, q, qArchivableTasks, toNanos(before), limit)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	details, err := batchDetails(ctx, q, ids)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]archiveEntry, 0, len(details))
	for _, d := range details {
		d.ArchivedAt = &now
		e := archiveEntry{id: d.Task.ID, projectID: d.Task.ProjectID, runID: d.Task.RunID, stepName: d.Task.StepName, status: d.Task.Status,
			createdAt: toNanos(d.Task.CreatedAt), updatedAt: toNanos(d.Task.UpdatedAt), archivedAt: toNanos(now)}
		if n := len(d.Events); n > 0 {
			e.lastEvent = d.Events[n-1].ID
		}
		if e.dependencies, e.dependents, err = edgeKeys(d.Dependencies, d.Dependents); err != nil {
			return nil, fmt.Errorf("encode task %s: %w", e.id, err)
		}
		task, err := json.Marshal(d.Task)
		if err != nil {
			return nil, fmt.Errorf("encode task %s: %w", e.id, err)
		}
		detail, err := json.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("encode task %s: %w", e.id, err)
		}
		e.task, e.detail = string(task), string(detail)
		out = append(out, e)
	}
	return out, nil
}

// edgeKeys encodes a task's edges both ways for comparison; none is an
// empty list, as a detail holds it.
func edgeKeys(deps, dependents []models.Dependency) (string, string, error) {
	if deps == nil {
		deps = []models.Dependency{}
	}
	if dependents == nil {
		dependents = []models.Dependency{}
	}
	a, err := json.Marshal(deps)
	if err != nil {
		return "", "", err
	}
	b, err := json.Marshal(dependents)
	return string(a), string(b), err
}

// stillArchivable says which tasks of batch are, in the write transaction
// q, still archivable and as they were read: the same status, last change
// and last event, and the same edges both ways (an edge changes without
// its task's row: a new dependent, an edge withdrawn or resolved).
func stillArchivable(ctx context.Context, q queryer, batch []archiveEntry) (map[string]bool, error) {
	type state struct {
		status                   models.TaskStatus
		updatedAt, lastEvent     int64
		dependencies, dependents []models.Dependency
		archivable               bool
	}
	ids := make([]string, len(batch))
	current := make(map[string]*state, len(batch))
	for i, e := range batch {
		ids[i] = e.id
		current[e.id] = &state{}
	}
	arg := batchArg(ids)
	rows, err := q.QueryContext(ctx, qStillArchivable, arg)
	if err != nil {
		return nil, fmt.Errorf("check the batch: %w", err)
	}
	for rows.Next() {
		var (
			id string
			st state
		)
		if err := rows.Scan(&id, &st.status, &st.updatedAt, &st.lastEvent); err != nil {
			rows.Close()
			return nil, fmt.Errorf("check the batch: %w", err)
		}
		st.archivable = true
		*current[id] = st
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("check the batch: %w", err)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("check the batch: %w", err)
	}
	for _, side := range []struct {
		q   string
		add func(models.Dependency)
	}{
		{qBatchDependencies, func(e models.Dependency) {
			current[e.Downstream].dependencies = append(current[e.Downstream].dependencies, e)
		}},
		{qBatchDependents, func(e models.Dependency) { current[e.Upstream].dependents = append(current[e.Upstream].dependents, e) }},
	} {
		edges, err := queryAll(ctx, q, scanEdge, side.q, arg)
		if err != nil {
			return nil, fmt.Errorf("check the batch: %w", err)
		}
		for _, e := range edges {
			side.add(e)
		}
	}
	keep := make(map[string]bool, len(batch))
	for _, e := range batch {
		st := current[e.id]
		if !st.archivable || st.status != e.status || st.updatedAt != e.updatedAt || st.lastEvent != e.lastEvent {
			continue
		}
		deps, dependents, err := edgeKeys(st.dependencies, st.dependents)
		if err != nil {
			return nil, fmt.Errorf("check the batch: %w", err)
		}
		keep[e.id] = deps == e.dependencies && dependents == e.dependents
	}
	return keep, nil
}

// archivedDetail reads an archived task's detail; ok is false when id was
// never archived.
func archivedDetail(ctx context.Context, q queryer, id string) (models.TaskDetail, bool, error) {
	var (
		raw string
		at  int64
	)
	err := q.QueryRowContext(ctx, qArchivedDetail, id).Scan(&raw, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return models.TaskDetail{}, false, nil
	}
	if err != nil {
		return models.TaskDetail{}, false, fmt.Errorf("archived task %s: %w", id, err)
	}
	var d models.TaskDetail
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		return models.TaskDetail{}, false, fmt.Errorf("archived task %s: %w", id, err)
	}
	archived := fromNanos(at)
	d.ArchivedAt = &archived
	return d, true, nil
}

// listArchivedTasks lists archived tasks for ListTasks, in the order they
// were archived.
func (s *Store) listArchivedTasks(ctx context.Context, f models.TaskFilter) ([]models.Task, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	var (
		where []string
		args  []any
	)
	if f.ProjectID != "" {
		where = append(where, "project_id = ?")
		args = append(args, f.ProjectID)
	}
	if len(f.Statuses) > 0 {
		where = append(where, "status IN ("+strings.TrimSuffix(strings.Repeat("?,", len(f.Statuses)), ",")+")")
		for _, st := range f.Statuses {
			if !st.Valid() {
				return nil, models.Errorf(models.CodeInvalid, "status: unknown task status %q", st)
			}
			args = append(args, st)
		}
	}
	if f.AfterID != "" {
		var n int
		if err := s.rdb.QueryRowContext(ctx, "SELECT count(*) FROM archived_tasks WHERE id = ?", f.AfterID).Scan(&n); err != nil {
			return nil, fmt.Errorf("list archived tasks: %w", err)
		}
		if n == 0 {
			return nil, models.Errorf(models.CodeInvalid, "after: no archived task %q to continue after", f.AfterID)
		}
		where = append(where, "rowid > (SELECT rowid FROM archived_tasks WHERE id = ?)")
		args = append(args, f.AfterID)
	}
	q := "SELECT task FROM archived_tasks"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY rowid LIMIT ?"
	args = append(args, limit)
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list archived tasks: %w", err)
	}
	defer rows.Close()
	out := []models.Task{}
	for rows.Next() {
		var raw string
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("list archived tasks: %w", err)
		}
		var t models.Task
		if err := json.Unmarshal([]byte(raw), &t); err != nil {
			return nil, fmt.Errorf("list archived tasks: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// archivedUpstream says whether id names an archived task, and whether it
// was archived COMPLETED (a dependency on it is met).
func archivedUpstream(ctx context.Context, q queryer, id string) (exists, completed bool, err error) {
	var status string
	err = q.QueryRowContext(ctx, "SELECT status FROM archived_tasks WHERE id = ?", id).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("archived task %s: %w", id, err)
	}
	return true, status == string(models.StatusCompleted), nil
}

// PruneOutbox deletes at most limit notices delivered (or given up) before
// before, or never delivered and made before it, in one transaction,
// keeping those the hooks have not read yet while a hook fires on events.
// It returns how many it deleted.
func (s *Store) PruneOutbox(ctx context.Context, before time.Time, limit int) (int64, error) {
	return s.prune(ctx, "prune outbox", qPruneOutbox, before, limit)
}

// PruneHookRuns deletes at most limit hook runs finished and started before
// before, in one transaction, keeping each hook's newest run that counts
// for its cooldown and its newest scheduled firing.
func (s *Store) PruneHookRuns(ctx context.Context, before time.Time, limit int) (int64, error) {
	return s.prune(ctx, "prune hook runs", qPruneHookRuns, before, limit)
}

// PruneWorkflowRuns deletes at most limit workflow runs ended before before
// whose tasks have all left the working tables (archived), keeping each
// workflow's newest run.
func (s *Store) PruneWorkflowRuns(ctx context.Context, before time.Time, limit int) (int64, error) {
	return s.prune(ctx, "prune workflow runs", qPruneWorkflowRuns, before, limit)
}

// PruneArchive deletes for good at most limit tasks archived before
// before. Their token ledger rows stay.
func (s *Store) PruneArchive(ctx context.Context, before time.Time, limit int) (int64, error) {
	return s.prune(ctx, "prune the archive", qPruneArchive, before, limit)
}

func (s *Store) prune(ctx context.Context, op, q string, before time.Time, limit int) (int64, error) {
	var n int64
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q, toNanos(before), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return n, nil
}

// RunFilesDue returns at most limit runs ended before before whose files
// have not been pruned, oldest first. What it returns is durable (see
// WaitDurable): their files are deleted for it.
func (s *Store) RunFilesDue(ctx context.Context, before time.Time, limit int) ([]RunFiles, error) {
	out, err := queryAll(ctx, s.rdb, func(row scanner) (RunFiles, error) {
		var r RunFiles
		err := row.Scan(&r.RunID, &r.TaskID, &r.Attempt, &r.Kind)
		return r, err
	}, qRunFilesDue, toNanos(before), limit)
	if err != nil {
		return nil, fmt.Errorf("runs whose files are due: %w", err)
	}
	if err := s.WaitDurable(ctx); err != nil {
		return nil, fmt.Errorf("runs whose files are due: %w", err)
	}
	return out, nil
}

// MarkRunFilesPruned records that the files of runs ids are gone.
func (s *Store) MarkRunFilesPruned(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	args := []any{toNanos(s.now())}
	for _, id := range ids {
		args = append(args, id)
	}
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE task_runs SET files_pruned_at = ? WHERE id IN ("+
			strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")+")", args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("mark run files pruned: %w", err)
	}
	return nil
}
