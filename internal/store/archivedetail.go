package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Reads of the details of a batch of tasks to archive, their ids in ?1 as
// a JSON array: one statement per table for the whole batch, in the order
// taskDetail reads one task's. Their text does not depend on the batch's
// size, so each is prepared once for the store.
const (
	inBatch            = "IN (SELECT value FROM json_each(?1))"
	qBatchTasks        = "SELECT " + taskColumns + " FROM tasks WHERE id " + inBatch
	qBatchDependencies = "SELECT " + edgeColumns + " FROM task_dependencies WHERE downstream " + inBatch + " ORDER BY downstream, upstream"
	qBatchDependents   = "SELECT " + edgeColumns + " FROM task_dependencies WHERE upstream " + inBatch + " ORDER BY upstream, downstream"
	qBatchEvents       = `SELECT id, task_id, from_status, to_status, event, reason, actor, created_at
		FROM task_events WHERE task_id ` + inBatch + ` ORDER BY id`
	qBatchResults = "SELECT task_id, summary, files_changed, outputs, no_changes FROM task_results WHERE task_id " + inBatch
	// The latest models.TaskDetailRuns runs of each task, oldest first.
	qBatchRuns = "SELECT " + runColumns + ` FROM (SELECT *, row_number() OVER (PARTITION BY task_id ORDER BY id DESC) AS latest
		FROM task_runs WHERE task_id ` + inBatch + `) WHERE latest <= ?2 ORDER BY id`
	qBatchPendingPlans = `SELECT task_id, id, source, tasks, status, created_at FROM plans
		WHERE task_id ` + inBatch + ` AND status = 'pending' ORDER BY id DESC`
)

// batchArg is the argument ?1 of the batch statements: ids as a JSON array.
func batchArg(ids []string) string {
	b, _ := json.Marshal(ids) // strings always encode
	return string(b)
}

// batchDetails reads the details of tasks ids, as taskDetail reads each,
// with one statement per table for them all. A task whose detail shows its
// verification (VERIFYING, AWAITING_APPROVAL: never one archived) is read
// by taskDetail.
func batchDetails(ctx context.Context, q queryer, ids []string) ([]models.TaskDetail, error) {
	in := batchArg(ids)
	byID := make(map[string]*models.TaskDetail, len(ids))
	tasks, err := queryAll(ctx, q, scanTask, qBatchTasks, in)
	if err != nil {
		return nil, fmt.Errorf("get tasks: %w", err)
	}
	for _, t := range tasks {
		byID[t.ID] = &models.TaskDetail{Task: t, Dependencies: []models.Dependency{}, Dependents: []models.Dependency{},
			Events: []models.EventRecord{}, Runs: []models.Run{}}
	}
	for _, id := range ids {
		if byID[id] == nil {
			return nil, fmt.Errorf("get task %s: %w", id, models.Errorf(models.CodeNotFound, "task %s not found", id))
		}
	}
	deps, err := queryAll(ctx, q, scanEdge, qBatchDependencies, in)
	if err != nil {
		return nil, fmt.Errorf("get dependencies: %w", err)
	}
	for _, e := range deps {
		byID[e.Downstream].Dependencies = append(byID[e.Downstream].Dependencies, e)
	}
	dependents, err := queryAll(ctx, q, scanEdge, qBatchDependents, in)
	if err != nil {
		return nil, fmt.Errorf("get dependents: %w", err)
	}
	for _, e := range dependents {
		byID[e.Upstream].Dependents = append(byID[e.Upstream].Dependents, e)
	}
	events, err := queryAll(ctx, q, scanEvent, qBatchEvents, in)
	if err != nil {
		return nil, fmt.Errorf("get events: %w", err)
	}
	for _, e := range events {
		byID[e.TaskID].Events = append(byID[e.TaskID].Events, e)
	}
	if err := batchResults(ctx, q, in, byID); err != nil {
		return nil, err
	}
	runs, err := queryAll(ctx, q, scanRun, qBatchRuns, in, models.TaskDetailRuns)
	if err != nil {
		return nil, fmt.Errorf("get runs: %w", err)
	}
	for _, r := range runs {
		byID[r.TaskID].Runs = append(byID[r.TaskID].Runs, r)
	}
	if err := batchPendingPlans(ctx, q, in, byID); err != nil {
		return nil, err
	}
	out := make([]models.TaskDetail, len(ids))
	for i, id := range ids {
		if st := byID[id].Task.Status; st == models.StatusVerifying || st == models.StatusAwaitingApproval {
			if out[i], err = taskDetail(ctx, q, id); err != nil {
				return nil, err
			}
			continue
		}
		out[i] = *byID[id]
	}
	return out, nil
}

// batchResults sets the results of the tasks of byID, as taskResult reads
// one.
func batchResults(ctx context.Context, q queryer, in string, byID map[string]*models.TaskDetail) error {
	rows, err := q.QueryContext(ctx, qBatchResults, in)
	if err != nil {
		return fmt.Errorf("get results: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, files, outputs string
			c                  models.Completion
		)
		if err := rows.Scan(&id, &c.Summary, &files, &outputs, &c.NoChanges); err != nil {
			return fmt.Errorf("get results: %w", err)
		}
		if err := decodeJSONColumn(files, &c.FilesChanged); err != nil {
			return fmt.Errorf("result of task %s: %w", id, err)
		}
		if outputs != "" {
			c.Outputs = json.RawMessage(outputs)
		}
		byID[id].Result = &c
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("get results: %w", err)
	}
	return nil
}

// batchPendingPlans sets the latest pending plan of the tasks of byID, as
// pendingPlan reads one.
func batchPendingPlans(ctx context.Context, q queryer, in string, byID map[string]*models.TaskDetail) error {
	rows, err := q.QueryContext(ctx, qBatchPendingPlans, in)
	if err != nil {
		return fmt.Errorf("get pending plans: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			p     models.Plan
			tasks string
			at    int64
		)
		if err := rows.Scan(&p.TaskID, &p.ID, &p.Source, &tasks, &p.Status, &at); err != nil {
			return fmt.Errorf("get pending plans: %w", err)
		}
		d := byID[p.TaskID]
		if d.Plan != nil {
			continue // an older one
		}
		p.CreatedAt = fromNanos(at)
		if err := json.Unmarshal([]byte(tasks), &p.Tasks); err != nil {
			return fmt.Errorf("pending plan of %s: %w", p.TaskID, err)
		}
		d.Plan = &p
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("get pending plans: %w", err)
	}
	return nil
}
