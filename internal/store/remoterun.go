package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentqueued/agentqueued/internal/models"
)

// SaveRemoteRun records a run on a runner: the number of the last report
// taken up, its answer (nil while it is being applied) and the run's state.
// A run that has ended is a CodeConflict error.
func (s *Store) SaveRemoteRun(ctx context.Context, runID, seq int64, answer json.RawMessage, st models.RemoteRunState) error {
	state, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("save remote run %d: %w", runID, err)
	}
	var ans any
	if answer != nil {
		ans = string(answer)
	}
	var n int64
	err = s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE task_runs SET report_seq = ?, report_answer = ?, remote_state = ? "+
			"WHERE id = ? AND ended_at IS NULL", seq, ans, string(state), runID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("save remote run %d: %w", runID, err)
	}
	if n == 0 {
		return models.Errorf(models.CodeConflict, "run %d has ended", runID)
	}
	return nil
}

// RemoteRun reads what SaveRemoteRun recorded of a run; ok is false for a
// run that is not a runner's (or was never saved).
func (s *Store) RemoteRun(ctx context.Context, runID int64) (seq int64, answer json.RawMessage, st models.RemoteRunState, ok bool, err error) {
	var (
		ans, state sql.NullString
	)
	err = s.rdb.QueryRowContext(ctx, "SELECT report_seq, report_answer, remote_state FROM task_runs WHERE id = ?", runID).
		Scan(&seq, &ans, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, st, false, models.Errorf(models.CodeNotFound, "run %d not found", runID)
	}
	if err != nil {
		return 0, nil, st, false, fmt.Errorf("read remote run %d: %w", runID, err)
	}
	if !state.Valid {
		return seq, nil, st, false, nil
	}
	if err := json.Unmarshal([]byte(state.String), &st); err != nil {
		return 0, nil, st, false, fmt.Errorf("read remote run %d: %w", runID, err)
	}
	if ans.Valid {
		answer = json.RawMessage(ans.String)
	}
	return seq, answer, st, true, nil
}
