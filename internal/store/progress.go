package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentqueued/agentqueued/internal/models"
)

// SetTaskProgress records an agent's progress counts on the task of an open
// run: success_count and failure_count become the counts given (cumulative
// totals, not increments; nil keeps a count as it is). The run must still be
// open. Counts whose sum exceeds the task's expected_count are refused,
// naming the numbers. It answers the task as it now is and, since less
// remaining work may let a task under a Capacity rule start, wakes the
// scheduler when a count changed.
func (s *Store) SetTaskProgress(ctx context.Context, runID int64, succeeded, failed *int) (models.Task, error) {
	var t models.Task
	changed := false
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		var taskID string
		err := tx.QueryRowContext(ctx, "SELECT task_id FROM task_runs WHERE id = ? AND ended_at IS NULL", runID).Scan(&taskID)
		if errors.Is(err, sql.ErrNoRows) {
			return models.Errorf(models.CodeConflict, "run %d is not open", runID)
		}
		if err != nil {
			return err
		}
		if t, err = getTask(ctx, tx, taskID); err != nil {
			return err
		}
		ok, fail := t.SuccessCount, t.FailureCount
		if succeeded != nil {
			ok = *succeeded
		}
		if failed != nil {
			fail = *failed
		}
		if err := models.CheckProgressCounts(t.ExpectedCount, ok, fail); err != nil {
			return err
		}
		if ok == t.SuccessCount && fail == t.FailureCount {
			return nil
		}
		if _, err := tx.ExecContext(ctx, "UPDATE tasks SET success_count = ?, failure_count = ? WHERE id = ?",
			ok, fail, taskID); err != nil {
			return err
		}
		t.SuccessCount, t.FailureCount, changed = ok, fail, true
		return nil
	})
	if err != nil {
		return models.Task{}, fmt.Errorf("record progress of run %d: %w", runID, err)
	}
	if changed {
		s.changed()
	}
	return t, nil
}
