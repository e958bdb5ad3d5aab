package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

const workflowColumns = `name, project_id, definition, source, origin, schedule, timezone, schedule_enabled,
	schedule_from, next_run, created_at, updated_at`

func scanWorkflow(row scanner) (models.Workflow, error) {
	var (
		w                       models.Workflow
		def                     string
		enabled                 int
		from, created, updated  int64
		next                    sql.NullInt64
		source, origin, sch, tz string
	)
	if err := row.Scan(&w.Name, &w.ProjectID, &def, &source, &origin, &sch, &tz, &enabled, &from, &next, &created,
		&updated); err != nil {
		return models.Workflow{}, err
	}
	if err := json.Unmarshal([]byte(def), &w); err != nil {
		return models.Workflow{}, fmt.Errorf("workflow %s: stored definition: %w", w.Name, err)
	}
	w.Source, w.Origin, w.Schedule, w.Timezone, w.ScheduleEnabled = source, origin, sch, tz, enabled != 0
	w.ScheduleFrom, w.NextRun, w.CreatedAt, w.UpdatedAt = fromNanos(from), fromNullNanos(next), fromNanos(created), fromNanos(updated)
	return w, nil
}

// definitionOf is the stored form of a workflow's steps and settings.
func definitionOf(w models.Workflow) (string, error) {
	w.Source, w.NextRun = "", nil
	b, err := json.Marshal(w)
	return string(b), err
}

// SaveWorkflow creates a workflow or replaces the one of the same name.
// A replaced workflow keeps its creation time, and its schedule position
// unless its schedule changed. Runs under way keep the definition they
// started from.
func (s *Store) SaveWorkflow(ctx context.Context, w models.Workflow) (models.Workflow, error) {
	if err := workflow.Validate(w); err != nil {
		return models.Workflow{}, err
	}
	if w.Origin != models.WorkflowFromFile && w.Origin != models.WorkflowFromAPI {
		return models.Workflow{}, fmt.Errorf("save workflow %s: origin %q", w.Name, w.Origin)
	}
	now := s.now()
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		var st string
		if err := tx.QueryRowContext(ctx, qProjectStatus, w.ProjectID).Scan(&st); errors.Is(err, sql.ErrNoRows) {
			return notFound("project", w.ProjectID)
		} else if err != nil {
			return err
		}
		w.CreatedAt, w.UpdatedAt, w.ScheduleFrom = now, now, now
		old, err := scanWorkflow(tx.QueryRowContext(ctx, "SELECT "+workflowColumns+" FROM workflows WHERE name = ?", w.Name))
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		default:
			w.CreatedAt = old.CreatedAt
			if old.Schedule == w.Schedule && old.Timezone == w.Timezone && old.ScheduleEnabled == w.ScheduleEnabled {
				w.ScheduleFrom, w.NextRun = old.ScheduleFrom, old.NextRun
			}
		}
		def, err := definitionOf(w)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO workflows (`+workflowColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)
			ON CONFLICT (name) DO UPDATE SET project_id = excluded.project_id, definition = excluded.definition,
			source = excluded.source, origin = excluded.origin, schedule = excluded.schedule, timezone = excluded.timezone,
			schedule_enabled = excluded.schedule_enabled, schedule_from = excluded.schedule_from,
			next_run = excluded.next_run, updated_at = excluded.updated_at`,
			w.Name, w.ProjectID, def, w.Source, w.Origin, w.Schedule, w.Timezone, w.ScheduleEnabled,
			toNanos(w.ScheduleFrom), nullNanos(w.NextRun), toNanos(w.CreatedAt), toNanos(w.UpdatedAt))
		return err
	})
	if err != nil {
		return models.Workflow{}, fmt.Errorf("save workflow %s: %w", w.Name, err)
	}
	return s.GetWorkflow(ctx, w.Name)
}

// GetWorkflow returns a workflow.
func (s *Store) GetWorkflow(ctx context.Context, name string) (models.Workflow, error) {
	w, err := scanWorkflow(s.rdb.QueryRowContext(ctx, "SELECT "+workflowColumns+" FROM workflows WHERE name = ?", name))
	if errors.Is(err, sql.ErrNoRows) {
		return models.Workflow{}, notFound("workflow", name)
	}
	if err != nil {
		return models.Workflow{}, fmt.Errorf("get workflow %s: %w", name, err)
	}
	return w, nil
}

// ListWorkflows returns the workflows of a project, or of all projects
// when projectID is empty, by name.
func (s *Store) ListWorkflows(ctx context.Context, projectID string) ([]models.Workflow, error) {
	return queryAll(ctx, s.rdb, scanWorkflow, "SELECT "+workflowColumns+` FROM workflows WHERE ?1 = '' OR project_id = ?1
		ORDER BY name`, projectID)
}

// DeleteWorkflow deletes a workflow; its runs and their tasks stay.
func (s *Store) DeleteWorkflow(ctx context.Context, name string) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM workflows WHERE name = ?", name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("workflow", name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete workflow %s: %w", name, err)
	}
	return nil
}

// SetWorkflowSchedule turns a workflow's schedule on or off; turned on, it
// counts from now (no catch-up for the time it was off).
func (s *Store) SetWorkflowSchedule(ctx context.Context, name string, enabled bool) (models.Workflow, error) {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE workflows SET schedule_enabled = ?1,
			schedule_from = CASE WHEN ?1 AND NOT schedule_enabled THEN ?2 ELSE schedule_from END,
			next_run = CASE WHEN ?1 THEN next_run ELSE NULL END, updated_at = ?2 WHERE name = ?3`,
			enabled, toNanos(s.now()), name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("workflow", name)
		}
		return nil
	})
	if err != nil {
		return models.Workflow{}, fmt.Errorf("schedule of workflow %s: %w", name, err)
	}
	return s.GetWorkflow(ctx, name)
}

// SetWorkflowNextRun records a workflow's next scheduled time.
func (s *Store) SetWorkflowNextRun(ctx context.Context, name string, next *time.Time) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE workflows SET next_run = ? WHERE name = ?", nullNanos(next), name)
		return err
	})
	if err != nil {
		return fmt.Errorf("next run of workflow %s: %w", name, err)
	}
	return nil
}

// LastScheduledRuns returns, for every workflow with a scheduled run, the
// latest scheduled time it ran for.
func (s *Store) LastScheduledRuns(ctx context.Context) (map[string]time.Time, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT workflow, max(scheduled_at) FROM workflow_runs
		WHERE scheduled_at IS NOT NULL GROUP BY workflow`)
	if err != nil {
		return nil, fmt.Errorf("last scheduled runs: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var (
			name string
			at   int64
		)
		if err := rows.Scan(&name, &at); err != nil {
			return nil, fmt.Errorf("last scheduled runs: %w", err)
		}
		out[name] = fromNanos(at)
	}
	return out, rows.Err()
}

const wfRunColumns = `id, workflow, project_id, status, trigger, triggered_by, scheduled_at, definition, reason,
	created_at, updated_at, ended_at`

func scanWorkflowRun(row scanner) (models.WorkflowRun, error) {
	var (
		r                models.WorkflowRun
		scheduled, ended sql.NullInt64
		def              string
		created, updated int64
	)
	if err := row.Scan(&r.ID, &r.Workflow, &r.ProjectID, &r.Status, &r.Trigger, &r.TriggeredBy, &scheduled, &def,
		&r.Reason, &created, &updated, &ended); err != nil {
		return models.WorkflowRun{}, err
	}
	r.ScheduledAt, r.EndedAt = fromNullNanos(scheduled), fromNullNanos(ended)
	r.CreatedAt, r.UpdatedAt = fromNanos(created), fromNanos(updated)
	r.Definition = json.RawMessage(def)
	return r, nil
}

// StartWorkflowRun creates a run of a workflow and its tasks, as one
// batch: the tasks of every step known from the start. A step that fans
// out over an upstream's output gets its tasks when that upstream is
// done; the steps after it wait for them. A request whose key was used
// already answers the run it made, with duplicate set.
func (s *Store) StartWorkflowRun(ctx context.Context, req models.RunRequest) (run models.WorkflowRun, duplicate bool, err error) {
	if req.FireKey == "" {
		return models.WorkflowRun{}, false, fmt.Errorf("start run of %s: no fire key", req.Workflow)
	}
	var changed bool
	err = s.withTx(ctx, func(tx *sql.Tx) error {
		w, err := scanWorkflow(tx.QueryRowContext(ctx, "SELECT "+workflowColumns+" FROM workflows WHERE name = ?", req.Workflow))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("workflow", req.Workflow)
		}
		if err != nil {
			return err
		}
		prev, err := scanWorkflowRun(tx.QueryRowContext(ctx, "SELECT "+wfRunColumns+" FROM workflow_runs WHERE workflow = ? AND fire_key = ?",
			w.Name, req.FireKey))
		if err == nil {
			run, duplicate = prev, true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM workflow_runs WHERE workflow = ?", w.Name).Scan(&n); err != nil {
			return err
		}
		def, err := definitionOf(w)
		if err != nil {
			return err
		}
		x := s.newTxn(ctx, tx)
		run = models.WorkflowRun{Workflow: w.Name, ProjectID: w.ProjectID, Status: models.RunPending, Trigger: req.Trigger,
			TriggeredBy: req.TriggeredBy, ScheduledAt: req.ScheduledAt, Definition: json.RawMessage(def),
			CreatedAt: x.now, UpdatedAt: x.now}
		for {
			n++
			run.ID = fmt.Sprintf("%s-%d", w.Name, n)
			_, err = tx.ExecContext(ctx, `INSERT INTO workflow_runs (id, workflow, project_id, status, trigger, triggered_by,
				fire_key, scheduled_at, definition, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
				run.ID, run.Workflow, run.ProjectID, run.Status, run.Trigger, run.TriggeredBy, req.FireKey,
				nullNanos(run.ScheduledAt), def, toNanos(x.now), toNanos(x.now))
			if !isUniqueViolation(err) {
				break
			}
		}
		if err != nil {
			return err
		}
		if err := x.createRunTasks(run.ID, w); err != nil {
			return err
		}
		if err := x.settleRuns(); err != nil {
			return err
		}
		changed = x.changed
		return nil
	})
	if err != nil {
		return models.WorkflowRun{}, false, fmt.Errorf("start run of workflow %s: %w", req.Workflow, err)
	}
	if changed {
		s.changed()
	}
	if !duplicate {
		run, err = s.GetWorkflowRun(ctx, run.ID)
	}
	return run, duplicate, err
}

// createRunTasks creates the tasks of every step whose tasks are known at
// the start: steps that do not fan out over an output, whatever comes
// before them. A task of a step after a step not yet expanded waits, for
// now, on that step's own upstream tasks.
func (x *txn) createRunTasks(runID string, w models.Workflow) error {
	var batch []models.BatchTask
	local := map[string][]string{} // step → local ids of its tasks, or of what stands for them
	for _, name := range workflow.Order(w) {
		st, _ := workflow.StepByName(w, name)
		// One edge per upstream task, required when any path to it is.
		var deps []models.BatchDependency
		at := map[string]int{}
		for _, d := range st.DependsOn {
			req := d.Required()
			for _, id := range local[d.Step] {
				if k, ok := at[id]; ok {
					r := req || deps[k].Required()
					deps[k].RequiresSuccess = &r
					continue
				}
				at[id] = len(deps)
				deps = append(deps, models.BatchDependency{ID: id, RequiresSuccess: &req})
			}
		}
		if workflow.Deferred(st) {
			// Stands in for its tasks until it expands: its own upstreams.
			seen := map[string]bool{}
			for _, d := range deps {
				if !seen[d.ID] {
					seen[d.ID] = true
					local[name] = append(local[name], d.ID)
				}
			}
			continue
		}
		_, count, err := workflow.FanOut(st, nil)
		if err != nil {
			return err
		}
		tasks, err := workflow.StepTasks(w, st, runID, nil, count, nil)
		if err != nil {
			return err
		}
		for i := range tasks {
			tasks[i].Dependencies = deps
			local[name] = append(local[name], tasks[i].LocalID)
		}
		batch = append(batch, tasks...)
		if _, err := x.ExecContext(x.ctx, "INSERT INTO workflow_run_steps (run_id, step, task_count, expanded_at) VALUES (?,?,?,?)",
			runID, name, len(tasks), toNanos(x.now)); err != nil {
			return err
		}
	}
	entries, err := prepareBatch(models.TaskBatch{ProjectID: w.ProjectID, CreatedBy: "workflow:" + w.Name, Tasks: batch})
	if err != nil {
		return err
	}
	_, err = x.createBatch(entries)
	return err
}

// runTasks returns the tasks of a run's step, by parallel index.
func (x *txn) runTasks(runID, step string) ([]models.Task, error) {
	return queryAll(x.ctx, x, scanTask, "SELECT "+taskColumns+` FROM tasks WHERE workflow_run_id = ? AND step_name = ?
		ORDER BY parallel_index`, runID, step)
}

// expanded reports whether a run's step has its tasks.
func (x *txn) expanded(runID, step string) (bool, error) {
	var n int
	err := x.QueryRowContext(x.ctx, "SELECT count(*) FROM workflow_run_steps WHERE run_id = ? AND step = ?", runID, step).Scan(&n)
	return n > 0, err
}

// loadRun reads a run and the definition it started from.
func (x *txn) loadRun(runID string) (models.WorkflowRun, models.Workflow, error) {
	r, err := scanWorkflowRun(x.QueryRowContext(x.ctx, "SELECT "+wfRunColumns+" FROM workflow_runs WHERE id = ?", runID))
	if err != nil {
		return r, models.Workflow{}, err
	}
	var w models.Workflow
	if err := json.Unmarshal(r.Definition, &w); err != nil {
		return r, w, fmt.Errorf("run %s: stored definition: %w", runID, err)
	}
	return r, w, nil
}

// workflowEffects expands the steps after a task of a workflow run that
// finished, when their upstream steps are done, and marks the run for its
// status to be settled.
func (x *txn) workflowEffects(a applied) error {
	t := a.task
	if t.RunID == "" {
		return nil
	}
	x.touchRun(t.RunID)
	if t.Status != models.StatusCompleted && t.Status != models.StatusBlocked {
		return nil
	}
	run, w, err := x.loadRun(t.RunID)
	if err != nil {
		return err
	}
	if run.Status == models.RunCancelled {
		return nil
	}
	for _, next := range workflow.Downstream(w, t.StepName) {
		if err := x.tryExpand(run, w, next); err != nil {
			return err
		}
	}
	return nil
}

// tryExpand creates the tasks of a dynamic step once its upstream steps
// are done: one per item of the output it fans out over, or as many as
// the count it names. Each depends on every task of the step's upstream
// steps; every task waiting on the step gets edges to the new tasks. An
// output that cannot be read blocks one task standing for the step, with
// the reason. A step that expands to no task lets the steps after it go
// on.
func (x *txn) tryExpand(run models.WorkflowRun, w models.Workflow, name string) error {
	st, ok := workflow.StepByName(w, name)
	if !ok || !workflow.Deferred(st) {
		return nil
	}
	if done, err := x.expanded(run.ID, name); err != nil || done {
		return err
	}
	var upstream []models.BatchDependency
	for _, d := range st.DependsOn {
		if done, err := x.expanded(run.ID, d.Step); err != nil || !done {
			return err
		}
		tasks, err := x.runTasks(run.ID, d.Step)
		if err != nil {
			return err
		}
		req := d.Required()
		for _, ut := range tasks {
			switch {
			case ut.Status == models.StatusCompleted:
			case ut.Status == models.StatusBlocked && !req:
			default:
				return nil // not done yet, or failed for good: the step never expands
			}
			upstream = append(upstream, models.BatchDependency{ID: ut.ID, RequiresSuccess: &req})
		}
	}
	outputs, err := x.runOutputs(run.ID, w)
	if err != nil {
		return err
	}
	items, count, ferr := workflow.FanOut(st, outputs)
	var tasks []models.BatchTask
	if ferr == nil {
		tasks, ferr = workflow.StepTasks(w, st, run.ID, items, count, outputs)
	}
	if ferr != nil {
		// One task stands for the step, stopped with the reason: the run
		// shows why, and the steps after it are blocked behind it.
		tasks = []models.BatchTask{{LocalID: name, Title: fmt.Sprintf("%s: fan-out failed", name),
			Description: models.ErrorMessageOf(ferr), Kind: st.Kind,
			Metadata: map[string]string{"workflow": w.Name, "workflow_run": run.ID, "step": name},
			Workflow: &models.TaskPlace{RunID: run.ID, Step: name}}}
	}
	for i := range tasks {
		tasks[i].Dependencies = upstream
	}
	ids := make([]string, 0, len(tasks))
	if len(tasks) > 0 {
		entries, err := prepareBatch(models.TaskBatch{ProjectID: w.ProjectID, CreatedBy: "workflow:" + w.Name, Tasks: tasks})
		if err != nil {
			return fmt.Errorf("expand step %s of run %s: %w", name, run.ID, err)
		}
		res, err := x.createBatch(entries)
		if err != nil {
			return fmt.Errorf("expand step %s of run %s: %w", name, run.ID, err)
		}
		for _, r := range res {
			ids = append(ids, r.TaskID)
		}
	}
	if _, err := x.ExecContext(x.ctx, "INSERT INTO workflow_run_steps (run_id, step, task_count, expanded_at) VALUES (?,?,?,?)",
		run.ID, name, len(ids), toNanos(x.now)); err != nil {
		return err
	}
	if ferr != nil {
		if _, err := x.run(change{taskID: ids[0], event: models.EventRunStopped, actor: "workflow",
			reason: "fan-out failed: " + models.ErrorMessageOf(ferr)}); err != nil {
			return err
		}
	}
	// The tasks waiting on this step, directly or through steps not yet
	// expanded, now wait on its tasks.
	if err := x.linkWaiting(run, w, name, name, ids); err != nil {
		return err
	}
	if len(ids) == 0 {
		for _, next := range workflow.Downstream(w, name) {
			if err := x.tryExpand(run, w, next); err != nil {
				return err
			}
		}
	}
	return nil
}

// linkWaiting adds edges from the tasks of the steps after step (through
// steps not yet expanded) to the tasks ids of expanded.
func (x *txn) linkWaiting(run models.WorkflowRun, w models.Workflow, expanded, step string, ids []string) error {
	for _, next := range workflow.Downstream(w, step) {
		st, _ := workflow.StepByName(w, next)
		done, err := x.expanded(run.ID, next)
		if err != nil {
			return err
		}
		if !done {
			if workflow.Deferred(st) {
				if err := x.linkWaiting(run, w, expanded, next, ids); err != nil {
					return err
				}
			}
			continue
		}
		req := true
		for _, d := range st.DependsOn {
			if d.Step == step {
				req = d.Required()
			}
		}
		tasks, err := x.runTasks(run.ID, next)
		if err != nil {
			return err
		}
		for _, t := range tasks {
			for _, up := range ids {
				if _, err := x.ExecContext(x.ctx, qInsertEdge, t.ID, req, req, toNanos(x.now), up); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// runOutputs returns the outputs of the run's steps that made one task.
func (x *txn) runOutputs(runID string, w models.Workflow) (map[string]json.RawMessage, error) {
	rows, err := x.QueryContext(x.ctx, `SELECT t.step_name, r.outputs FROM tasks t JOIN task_results r ON r.task_id = t.id
		WHERE t.workflow_run_id = ? AND t.parallel_count = 0`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]json.RawMessage{}
	for rows.Next() {
		var (
			step    string
			outputs sql.NullString
		)
		if err := rows.Scan(&step, &outputs); err != nil {
			return nil, err
		}
		if outputs.Valid && outputs.String != "" {
			out[step] = json.RawMessage(outputs.String)
		}
	}
	return out, rows.Err()
}

// touchRun marks a run whose status must be settled before the transaction ends.
func (x *txn) touchRun(id string) {
	if x.touchedRuns == nil {
		x.touchedRuns = map[string]bool{}
	}
	x.touchedRuns[id] = true
}

// settleRuns brings the status of every run touched in the transaction up
// to date with its tasks, with a notice when a run ends.
func (x *txn) settleRuns() error {
	for id := range x.touchedRuns {
		if err := x.settleRun(id); err != nil {
			return fmt.Errorf("settle run %s: %w", id, err)
		}
	}
	x.touchedRuns = nil
	return nil
}

// settleRun derives a run's status from its tasks: success when every step
// has its tasks and all are COMPLETED; failed when every task has finished
// (COMPLETED or BLOCKED) and one is BLOCKED: nothing can go on; pending
// while no task has left DEFINED or READY; running otherwise. A cancelled
// run stays cancelled.
func (x *txn) settleRun(id string) error {
	run, w, err := x.loadRun(id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if run.Status == models.RunCancelled {
		return nil
	}
	rows, err := x.QueryContext(x.ctx, "SELECT status, count(*) FROM tasks WHERE workflow_run_id = ? GROUP BY status", id)
	if err != nil {
		return err
	}
	counts := map[models.TaskStatus]int{}
	total := 0
	for rows.Next() {
		var (
			st models.TaskStatus
			n  int
		)
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return err
		}
		counts[st] += n
		total += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var expandedSteps int
	if err := x.QueryRowContext(x.ctx, "SELECT count(*) FROM workflow_run_steps WHERE run_id = ?", id).Scan(&expandedSteps); err != nil {
		return err
	}
	finished := counts[models.StatusCompleted] + counts[models.StatusBlocked]
	status, reason := run.Status, ""
	switch {
	case expandedSteps == len(w.Steps) && counts[models.StatusCompleted] == total:
		status = models.RunSuccess
	case finished == total && counts[models.StatusBlocked] > 0:
		status = models.RunFailed
		var tid, why string
		if err := x.QueryRowContext(x.ctx, `SELECT id, status_reason FROM tasks WHERE workflow_run_id = ? AND status = 'BLOCKED'
			AND cascade_root_id = '' ORDER BY updated_at, id LIMIT 1`, id).Scan(&tid, &why); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		reason = fmt.Sprintf("%d of %d tasks are BLOCKED", counts[models.StatusBlocked], total)
		if tid != "" {
			reason = fmt.Sprintf("task %s is BLOCKED (%s); %s", tid, why, reason)
		}
	case run.Status == models.RunPending && counts[models.StatusDefined]+counts[models.StatusReady] == total:
	default:
		status = models.RunRunning
	}
	if status == run.Status && reason == run.Reason {
		return nil
	}
	var ended sql.NullInt64
	if status == models.RunSuccess || status == models.RunFailed {
		ended = sql.NullInt64{Int64: toNanos(x.now), Valid: true}
	}
	if _, err := x.ExecContext(x.ctx, "UPDATE workflow_runs SET status = ?, reason = ?, updated_at = ?, ended_at = ? WHERE id = ?",
		status, reason, toNanos(x.now), ended, id); err != nil {
		return err
	}
	if status != run.Status && ended.Valid {
		return x.s.enqueueOutbox(x.ctx, x.tx, fmt.Sprintf("run_%s:%s:%d", status, id, toNanos(x.now)), "run."+status,
			run.ProjectID, "", map[string]any{"run_id": id, "workflow": run.Workflow, "project_id": run.ProjectID,
				"status": status, "reason": reason})
	}
	return nil
}

// GetWorkflowRun returns a run with its tasks counted by status.
func (s *Store) GetWorkflowRun(ctx context.Context, id string) (models.WorkflowRun, error) {
	r, err := scanWorkflowRun(s.rdb.QueryRowContext(ctx, "SELECT "+wfRunColumns+" FROM workflow_runs WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return models.WorkflowRun{}, notFound("run", id)
	}
	if err != nil {
		return models.WorkflowRun{}, fmt.Errorf("get run %s: %w", id, err)
	}
	rows, err := s.rdb.QueryContext(ctx, "SELECT status, count(*) FROM tasks WHERE workflow_run_id = ? GROUP BY status", id)
	if err != nil {
		return models.WorkflowRun{}, fmt.Errorf("get run %s: %w", id, err)
	}
	defer rows.Close()
	r.Tasks = map[models.TaskStatus]int{}
	for rows.Next() {
		var (
			st models.TaskStatus
			n  int
		)
		if err := rows.Scan(&st, &n); err != nil {
			return models.WorkflowRun{}, fmt.Errorf("get run %s: %w", id, err)
		}
		r.Tasks[st] = n
	}
	return r, rows.Err()
}

// ListWorkflowRuns returns runs, newest first.
func (s *Store) ListWorkflowRuns(ctx context.Context, f models.RunFilter) ([]models.WorkflowRun, error) {
	switch {
	case f.Limit <= 0:
		f.Limit = DefaultListLimit
	case f.Limit > MaxListLimit:
		f.Limit = MaxListLimit
	}
	rs, err := queryAll(ctx, s.rdb, scanWorkflowRun, "SELECT "+wfRunColumns+` FROM workflow_runs
		WHERE (?1 = '' OR workflow = ?1) AND (?2 = '' OR project_id = ?2) AND (?3 = '' OR status = ?3)
		ORDER BY created_at DESC, rowid DESC LIMIT ?4`, f.Workflow, f.ProjectID, f.Status, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	for i := range rs {
		rs[i].Definition = nil
	}
	return rs, nil
}

// RunTasks returns a run's tasks in step order, each named in the run.
func (s *Store) RunTasks(ctx context.Context, runID string) ([]models.RunTask, error) {
	if _, err := s.GetWorkflowRun(ctx, runID); err != nil {
		return nil, err
	}
	ts, err := queryAll(ctx, s.rdb, scanTask, "SELECT "+taskColumns+` FROM tasks WHERE workflow_run_id = ?
		ORDER BY created_at, step_name, parallel_index`, runID)
	if err != nil {
		return nil, fmt.Errorf("tasks of run %s: %w", runID, err)
	}
	out := make([]models.RunTask, len(ts))
	for i, t := range ts {
		out[i] = models.RunTask{Task: t, Name: t.RunName()}
	}
	return out, nil
}

// CancelWorkflowRun marks a run cancelled and returns its unfinished
// tasks, which the caller stops (RUN_STOPPED). Cancelling a run that has
// ended is a conflict; cancelling it again answers its tasks again.
func (s *Store) CancelWorkflowRun(ctx context.Context, id, by string) ([]models.Task, error) {
	var out []models.Task
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		r, err := scanWorkflowRun(tx.QueryRowContext(ctx, "SELECT "+wfRunColumns+" FROM workflow_runs WHERE id = ?", id))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("run", id)
		}
		if err != nil {
			return err
		}
		switch r.Status {
		case models.RunSuccess, models.RunFailed:
			return models.Errorf(models.CodeConflict, "run %s has ended (%s): there is nothing to cancel", id, r.Status)
		case models.RunPending, models.RunRunning:
			now := toNanos(s.now())
			if _, err := tx.ExecContext(ctx, `UPDATE workflow_runs SET status = 'cancelled', reason = ?, updated_at = ?,
				ended_at = ? WHERE id = ?`, "cancelled by "+by, now, now, id); err != nil {
				return err
			}
			if err := s.enqueueOutbox(ctx, tx, "run_cancelled:"+id+":"+fmt.Sprint(now), "run.cancelled", r.ProjectID, "",
				map[string]any{"run_id": id, "workflow": r.Workflow, "project_id": r.ProjectID, "status": models.RunCancelled,
					"reason": "cancelled by " + by}); err != nil {
				return err
			}
		}
		out, err = queryAll(ctx, tx, scanTask, "SELECT "+taskColumns+` FROM tasks WHERE workflow_run_id = ?
			AND status NOT IN ('COMPLETED', 'BLOCKED') ORDER BY created_at, step_name, parallel_index`, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cancel run %s: %w", id, err)
	}
	return out, nil
}

// RetryWorkflowRun reopens a failed or cancelled run and returns the
// tasks to start again, upstream first: its FAILED tasks and the BLOCKED
// ones that are not blocked only because an upstream was (those are
// reopened by their root's restart). The caller asks RetryEvent for each,
// in this order, as it goes: what a task needs depends on what was
// restarted before it.
func (s *Store) RetryWorkflowRun(ctx context.Context, id string) ([]models.Task, error) {
	var out []models.Task
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		x := s.newTxn(ctx, tx)
		r, w, err := x.loadRun(id)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("run", id)
		}
		if err != nil {
			return err
		}
		if r.Status == models.RunSuccess {
			return models.Errorf(models.CodeConflict, "run %s succeeded: there is nothing to retry", id)
		}
		ts, err := queryAll(ctx, tx, scanTask, "SELECT "+taskColumns+` FROM tasks WHERE workflow_run_id = ?
			AND (status = 'FAILED' OR (status = 'BLOCKED' AND cascade_root_id = '')) ORDER BY parallel_index`, id)
		if err != nil {
			return err
		}
		if len(ts) == 0 && r.Status != models.RunCancelled {
			return models.Errorf(models.CodeConflict, "run %s has no failed or blocked task to retry", id)
		}
		rank := map[string]int{}
		for i, name := range workflow.Order(w) {
			rank[name] = i
		}
		sort.SliceStable(ts, func(i, j int) bool { return rank[ts[i].StepName] < rank[ts[j].StepName] })
		out = ts
		_, err = tx.ExecContext(ctx, "UPDATE workflow_runs SET status = 'running', reason = '', ended_at = NULL, updated_at = ? WHERE id = ?",
			toNanos(s.now()), id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("retry run %s: %w", id, err)
	}
	return out, nil
}

// RetryEvent says how a task of a retried run starts again, as things are
// now: ADMIN_RESTART when it FAILED, or is BLOCKED with every upstream
// COMPLETED; UPSTREAM_REOPENED (back to waiting) when it is BLOCKED and an
// upstream has not completed; nothing (ok false) when it has moved on.
func (s *Store) RetryEvent(ctx context.Context, taskID, reason string) (req models.TransitionRequest, ok bool, err error) {
	t, err := s.GetTask(ctx, taskID)
	if err != nil {
		return req, false, err
	}
	req = models.TransitionRequest{TaskID: t.ID, Event: models.EventAdminRestart, ExpectFrom: t.Status, Reason: reason}
	switch {
	case t.Status == models.StatusFailed:
		return req, true, nil
	case t.Status != models.StatusBlocked || t.CascadeRootID != "":
		return req, false, nil
	}
	var waiting int
	if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM task_dependencies d JOIN tasks u ON u.id = d.upstream
		WHERE d.downstream = ? AND u.status != 'COMPLETED'`, taskID).Scan(&waiting); err != nil {
		return req, false, fmt.Errorf("retry of task %s: %w", taskID, err)
	}
	if waiting > 0 {
		req.Event = models.EventUpstreamReopened
	}
	return req, true, nil
}

// FinishCancels returns the unfinished tasks of cancelled runs, which a
// stop may have left: the caller stops them.
func (s *Store) FinishCancels(ctx context.Context) ([]models.Task, error) {
	ts, err := queryAll(ctx, s.rdb, scanTask, "SELECT "+taskColumns+` FROM tasks WHERE workflow_run_id IN
		(SELECT id FROM workflow_runs WHERE status = 'cancelled') AND status NOT IN ('COMPLETED', 'BLOCKED')`)
	if err != nil {
		return nil, fmt.Errorf("tasks of cancelled runs: %w", err)
	}
	return ts, nil
}

// RunTaskByName returns the task of a run with a name such as "build" or
// "upgrade[2]".
func (s *Store) RunTaskByName(ctx context.Context, runID, name string) (models.Task, error) {
	ts, err := s.RunTasks(ctx, runID)
	if err != nil {
		return models.Task{}, err
	}
	var names []string
	for _, t := range ts {
		if t.Name == name {
			return t.Task, nil
		}
		names = append(names, t.Name)
	}
	return models.Task{}, models.Errorf(models.CodeNotFound, "run %s has no task %q (tasks: %s)", runID, name, strings.Join(names, ", "))
}
