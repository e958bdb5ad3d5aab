package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// A workflow run's archived tasks are still its tasks: the run counts
// them, lists them (marked archived), reads its steps' progress and its
// upstream outputs from them, and a retry refuses to reopen a run that
// would need one of them to run again (archived tasks never change).
const (
	// qArchivedRunCounts counts a run's archived tasks by status.
	qArchivedRunCounts = "SELECT status, count(*) FROM archived_tasks WHERE run_id = ? GROUP BY status"
	// qArchivedRunStepCounts counts them by step and status.
	qArchivedRunStepCounts = "SELECT step_name, status, count(*) FROM archived_tasks WHERE run_id = ? GROUP BY step_name, status"
	qArchivedRunTasks      = "SELECT task, archived_at FROM archived_tasks WHERE run_id = ?"
	// qArchivedStepTaskIDs lists the archived tasks of a run's step in
	// their order in it.
	qArchivedStepTaskIDs = `SELECT id FROM archived_tasks WHERE run_id = ? AND step_name = ?
		ORDER BY coalesce(json_extract(task, '$.parallel_index'), 0)`
	// qArchivedRunOutputs reads the outputs of the archived tasks of a run
	// that were their step's only task.
	qArchivedRunOutputs = `SELECT step_name, detail -> '$.result.outputs' FROM archived_tasks
		WHERE run_id = ? AND coalesce(json_extract(task, '$.parallel_count'), 0) = 0`
	// qArchivedBlockedRunTasks lists a run's tasks archived BLOCKED, oldest
	// first.
	qArchivedBlockedRunTasks = "SELECT task FROM archived_tasks WHERE run_id = ? AND status = 'BLOCKED' ORDER BY rowid"
	// qRunStepsMade lists the steps of a run that made tasks, with how
	// many, and how many of them are left, live or archived.
	qRunStepsMade = `SELECT s.step, s.task_count,
		(SELECT count(*) FROM tasks t WHERE t.workflow_run_id = s.run_id AND t.step_name = s.step)
		+ (SELECT count(*) FROM archived_tasks a WHERE a.run_id = s.run_id AND a.step_name = s.step)
		FROM workflow_run_steps s WHERE s.run_id = ? AND s.task_count > 0 ORDER BY s.expanded_at, s.step`
)

// addArchivedCounts adds the counts of a run's archived tasks to counts
// and returns how many there are.
func addArchivedCounts(ctx context.Context, q queryer, runID string, counts map[models.TaskStatus]int) (int, error) {
	rows, err := q.QueryContext(ctx, qArchivedRunCounts, runID)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	total := 0
	for rows.Next() {
		var (
			st models.TaskStatus
			n  int
		)
		if err := rows.Scan(&st, &n); err != nil {
			return 0, err
		}
		counts[st] += n
		total += n
	}
	return total, rows.Err()
}

// archivedRunTasks reads a run's archived tasks, each marked with when it
// was archived.
func archivedRunTasks(ctx context.Context, q queryer, runID string) ([]models.RunTask, error) {
	return queryAll(ctx, q, func(row scanner) (models.RunTask, error) {
		var (
			raw string
			at  int64
			t   models.Task
		)
		if err := row.Scan(&raw, &at); err != nil {
			return models.RunTask{}, err
		}
		if err := json.Unmarshal([]byte(raw), &t); err != nil {
			return models.RunTask{}, fmt.Errorf("archived task: %w", err)
		}
		archived := fromNanos(at)
		return models.RunTask{Task: t, Name: t.RunName(), ArchivedAt: &archived}, nil
	}, qArchivedRunTasks, runID)
}

// sortRunTasks puts a run's tasks, live and archived, in step order: by
// creation, step and index in the step.
func sortRunTasks(ts []models.RunTask) {
	slices.SortStableFunc(ts, func(a, b models.RunTask) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		if c := strings.Compare(a.StepName, b.StepName); c != 0 {
			return c
		}
		return a.ParallelIndex - b.ParallelIndex
	})
}

// retryRefusal says why run r cannot be retried, or returns nil: a task
// of it archived BLOCKED would have to run again, which an archived task
// never does; or a step's tasks are gone altogether (dropped from the
// archive after its window, or deleted), so that nothing tells what they
// did. Either way, a retry would report what did not happen; a new run
// does the work again.
func (x *txn) retryRefusal(r models.WorkflowRun) error {
	again := fmt.Sprintf("start a new run of workflow %s instead (ctl workflow run %s, or POST /api/v1/workflows/%s/runs)",
		r.Workflow, r.Workflow, r.Workflow)
	blocked, err := queryAll(x.ctx, x, func(row scanner) (string, error) {
		var raw string
		if err := row.Scan(&raw); err != nil {
			return "", err
		}
		var t models.Task
		if err := json.Unmarshal([]byte(raw), &t); err != nil {
			return "", fmt.Errorf("archived task: %w", err)
		}
		return fmt.Sprintf("%s (%s)", t.ID, t.RunName()), nil
	}, qArchivedBlockedRunTasks, r.ID)
	if err != nil {
		return err
	}
	if len(blocked) > 0 {
		return models.Errorf(models.CodeConflict, "run %s cannot be retried: its tasks %s were archived BLOCKED, and an "+
			"archived task never runs again; %s", r.ID, nameList(blocked), again)
	}
	rows, err := x.QueryContext(x.ctx, qRunStepsMade, r.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	var gone []string
	for rows.Next() {
		var (
			step        string
			made, found int
		)
		if err := rows.Scan(&step, &made, &found); err != nil {
			return err
		}
		if found == 0 {
			gone = append(gone, fmt.Sprintf("%s (%d)", step, made))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(gone) > 0 {
		return models.Errorf(models.CodeConflict, "run %s cannot be retried: the tasks of its steps %s are gone (dropped "+
			"from the archive after its window, or deleted), so what they did is not known; %s", r.ID, nameList(gone), again)
	}
	return nil
}

// archivedStepTaskIDs returns the ids of the archived tasks of a run's
// step.
func (x *txn) archivedStepTaskIDs(runID, step string) ([]string, error) {
	return queryIDs(x.ctx, x, qArchivedStepTaskIDs, runID, step)
}

// addArchivedOutputs adds to out the outputs of a run's archived tasks
// that were their step's only task.
func (x *txn) addArchivedOutputs(runID string, out map[string]json.RawMessage) error {
	rows, err := x.QueryContext(x.ctx, qArchivedRunOutputs, runID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			step    string
			outputs sql.NullString
		)
		if err := rows.Scan(&step, &outputs); err != nil {
			return err
		}
		if outputs.Valid && outputs.String != "" && outputs.String != "null" {
			out[step] = json.RawMessage(outputs.String)
		}
	}
	return rows.Err()
}
