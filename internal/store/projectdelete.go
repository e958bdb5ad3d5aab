package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Queries of DeleteProject.
const (
	qProjectLiveTasks = `SELECT id FROM tasks WHERE project_id = ?
		AND status IN ('ASSIGNED', 'IN_PROGRESS', 'WAITING_INPUT', 'VERIFYING') ORDER BY id`
	qProjectOpenRuns = `SELECT DISTINCT r.task_id FROM task_runs r JOIN tasks t ON t.id = r.task_id
		WHERE t.project_id = ? AND r.ended_at IS NULL ORDER BY r.task_id`
	qProjectHeldTasks = `SELECT a.id FROM agents a JOIN tasks t ON t.id = a.current_task_id
		WHERE t.project_id = ? ORDER BY a.id`
	qProjectLiveWorkflowRuns  = `SELECT id FROM workflow_runs WHERE project_id = ? AND status IN ('pending', 'running') ORDER BY id`
	qProjectOutsideDependents = `SELECT DISTINCT d.downstream FROM task_dependencies d
		JOIN tasks up ON up.id = d.upstream JOIN tasks down ON down.id = d.downstream
		WHERE up.project_id = ? AND down.project_id <> ? ORDER BY d.downstream`
	qProjectOutsideChildren = `SELECT c.id FROM tasks c JOIN tasks p ON p.id = c.parent_task_id
		WHERE p.project_id = ? AND c.project_id <> ? ORDER BY c.id`
	qProjectLedgerTokens = `SELECT count(*) FROM token_ledger WHERE project_id = ?`
)

// DeleteProject deletes a project with its tasks (and their events, runs,
// questions, results and pull request records), its archived tasks, its
// repository configuration, hooks, workflows and workflow runs, and its
// usage counts. It refuses (CodeConflict, naming them) while the project's work
// is live: a task being worked on, a run not ended, an agent holding one
// of its tasks, a workflow run pending or running; when a task of another
// project depends on, or descends from, one of its tasks; and when the
// project has recorded token use, which the append-only token ledger
// keeps (archive such a project instead).
func (s *Store) DeleteProject(ctx context.Context, id string) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		var exists int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM projects WHERE id = ?", id).Scan(&exists); err != nil {
			return err
		}
		if exists == 0 {
			return notFound("project", id)
		}
		for _, c := range []struct {
			query string
			args  []any
			msg   string
		}{
			{qProjectLiveTasks, []any{id}, "its tasks %s are being worked on: stop or cancel them first"},
			{qProjectOpenRuns, []any{id}, "its tasks %s have runs that have not ended: try again when they have"},
			{qProjectHeldTasks, []any{id}, "agents %s hold its tasks: try again when they are free"},
			{qProjectLiveWorkflowRuns, []any{id}, "its workflow runs %s are live: cancel them first"},
			{qProjectOutsideDependents, []any{id, id}, "tasks of other projects (%s) depend on its tasks: remove those dependencies first"},
			{qProjectOutsideChildren, []any{id, id}, "tasks of other projects (%s) are subtasks of its tasks: delete them first"},
		} {
			ids, err := queryIDs(ctx, tx, c.query, c.args...)
			if err != nil {
				return err
			}
			if len(ids) > 0 {
				return models.Errorf(models.CodeConflict, "project %s: "+c.msg, id, nameList(ids))
			}
		}
		var entries int
		if err := tx.QueryRowContext(ctx, qProjectLedgerTokens, id).Scan(&entries); err != nil {
			return err
		}
		if entries > 0 {
			return models.Errorf(models.CodeConflict, "project %s has recorded token use (%d ledger entries), which the "+
				"token ledger keeps: archive it instead", id, entries)
		}
		for _, q := range []string{
			"DELETE FROM chat_threads WHERE task_id IN (SELECT id FROM tasks WHERE project_id = ?)",
			"UPDATE tasks SET parent_task_id = NULL WHERE project_id = ?",
			"DELETE FROM tasks WHERE project_id = ?",
			"DELETE FROM archived_tasks WHERE project_id = ?",
			"DELETE FROM workflow_runs WHERE project_id = ?",
			"DELETE FROM usage_buckets WHERE project_id = ?",
			"DELETE FROM hook_runs WHERE project_id = ?",
			"DELETE FROM desk_marks WHERE project_id = ?",
			"DELETE FROM projects WHERE id = ?",
		} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete project %s: %w", id, err)
	}
	s.changed()
	return nil
}
