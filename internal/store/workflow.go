package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
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
// unless its schedule changed. A file's workflow read again (at each
// start) keeps the schedule switch a person set (SetWorkflowSchedule)
// while the file's own schedule_enabled is the one it had before: the
// file's value wins only when the file changes it. Runs under way keep
// the definition they started from.
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
		rs, err := readRuleSet(ctx, tx)
		if err != nil {
			return err
		}
		if err := workflow.CheckRules(w, rs.Rules); err != nil {
			return err
		}
		w.CreatedAt, w.UpdatedAt, w.ScheduleFrom = now, now, now
		// The stored definition keeps the document's schedule_enabled,
		// the column the switch in force.
		docEnabled := w.ScheduleEnabled
		old, err := scanWorkflow(tx.QueryRowContext(ctx, "SELECT "+workflowColumns+" FROM workflows WHERE name = ?", w.Name))
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		default:
			w.CreatedAt = old.CreatedAt
			if old.Origin == models.WorkflowFromFile && w.Origin == models.WorkflowFromFile {
				var prev struct {
					ScheduleEnabled bool `json:"schedule_enabled"`
				}
				var def string
				if err := tx.QueryRowContext(ctx, "SELECT definition FROM workflows WHERE name = ?", w.Name).Scan(&def); err != nil {
					return err
				}
				if err := json.Unmarshal([]byte(def), &prev); err != nil {
					return fmt.Errorf("stored definition: %w", err)
				}
				if prev.ScheduleEnabled == w.ScheduleEnabled {
					w.ScheduleEnabled = old.ScheduleEnabled // the person's switch
				}
			}
			if old.Schedule == w.Schedule && old.Timezone == w.Timezone && old.ScheduleEnabled == w.ScheduleEnabled {
				w.ScheduleFrom, w.NextRun = old.ScheduleFrom, old.NextRun
			}
		}
		enabled := w.ScheduleEnabled
		w.ScheduleEnabled = docEnabled
		def, err := definitionOf(w)
		if err != nil {
			return err
		}
		w.ScheduleEnabled = enabled
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
	created_at, updated_at, ended_at, inputs`

func scanWorkflowRun(row scanner) (models.WorkflowRun, error) {
	var (
		r                models.WorkflowRun
		scheduled, ended sql.NullInt64
		def, inputs      string
		created, updated int64
	)
	if err := row.Scan(&r.ID, &r.Workflow, &r.ProjectID, &r.Status, &r.Trigger, &r.TriggeredBy, &scheduled, &def,
		&r.Reason, &created, &updated, &ended, &inputs); err != nil {
		return models.WorkflowRun{}, err
	}
	if inputs != "" && inputs != "{}" {
		if err := json.Unmarshal([]byte(inputs), &r.Inputs); err != nil {
			return models.WorkflowRun{}, fmt.Errorf("run %s: stored inputs: %w", r.ID, err)
		}
	}
	r.ScheduledAt, r.EndedAt = fromNullNanos(scheduled), fromNullNanos(ended)
	r.CreatedAt, r.UpdatedAt = fromNanos(created), fromNanos(updated)
	r.Definition = json.RawMessage(def)
	return r, nil
}

// StartWorkflowRun creates a run of a workflow and, as one batch, the
// tasks of every step known from the start: the steps that do not fan out
// over an output (nor name one), nor come after one that does. The other
// steps get their tasks when the steps they depend on are done (see
// advanceRun). The request's inputs are checked against the workflow's and
// completed with their defaults (workflow.ResolveInputs), and kept with the
// run. A request whose key was used already answers the run it made, with
// duplicate set.
func (s *Store) StartWorkflowRun(ctx context.Context, req models.RunRequest) (run models.WorkflowRun, duplicate bool, err error) {
	if req.FireKey == "" {
		return models.WorkflowRun{}, false, fmt.Errorf("start run of %s: no fire key", req.Workflow)
	}
	if !req.Trigger.Valid() {
		return models.WorkflowRun{}, false, fmt.Errorf("start run of %s: trigger %q", req.Workflow, req.Trigger)
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
		rs, err := readRuleSet(ctx, tx)
		if err != nil {
			return err
		}
		if err := workflow.CheckRules(w, rs.Rules); err != nil {
			return rulesRefuseRun(w, err)
		}
		inputs, err := workflow.ResolveInputs(w, req.Inputs)
		if err != nil {
			return err
		}
		inputsJSON, err := json.Marshal(inputs)
		if err != nil {
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
			Inputs: inputs, CreatedAt: x.now, UpdatedAt: x.now}
		for {
			n++
			run.ID = fmt.Sprintf("%s-%d", w.Name, n)
			_, err = tx.ExecContext(ctx, `INSERT INTO workflow_runs (id, workflow, project_id, status, trigger, triggered_by,
				fire_key, scheduled_at, definition, created_at, updated_at, inputs) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
				run.ID, run.Workflow, run.ProjectID, run.Status, run.Trigger, run.TriggeredBy, req.FireKey,
				nullNanos(run.ScheduledAt), def, toNanos(x.now), toNanos(x.now), string(inputsJSON))
			if !isUniqueViolation(err) {
				break
			}
		}
		if err != nil {
			return err
		}
		if err := x.nested(func() error { return x.createInitial(run.ID, w, inputs, rs.Rules) }); err != nil {
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

// rulesRefuseRun is the refusal of a run of w whose tasks the rules in
// force refuse (err says how).
func rulesRefuseRun(w models.Workflow, err error) error {
	return models.WrapError(models.CodeConflict, err, "the rules in force refuse the tasks of workflow %s:\n%s\n"+
		"give its steps an expected_count (ctl workflow add, or POST /api/v1/workflows), or change the rules",
		w.Name, models.ErrorMessageOf(err))
}

// createInitial creates, as one batch, the tasks of the steps known from
// the start (workflow.InitialPlan), each depending on the tasks of its
// upstream steps. Their expected counts known, they are checked against
// rules: a run whose tasks they refuse does not start.
func (x *txn) createInitial(runID string, w models.Workflow, inputs map[string]string, rules []models.Rule) error {
	plan, err := workflow.InitialPlan(w, runID, inputs)
	if err != nil {
		return err
	}
	var batch []models.BatchTask
	for _, p := range plan {
		if err := workflow.CheckTaskRules(p.Tasks, w.ProjectID, rules); err != nil {
			return rulesRefuseRun(w, err)
		}
		batch = append(batch, p.Tasks...)
		if _, err := x.ExecContext(x.ctx, "INSERT INTO workflow_run_steps (run_id, step, task_count, expanded_at) VALUES (?,?,?,?)",
			runID, p.Step, len(p.Tasks), toNanos(x.now)); err != nil {
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

// readProgress reads what a run's steps are, in three queries: its
// archived tasks count too.
func (x *txn) readProgress(runID string) (workflow.Progress, error) {
	p := workflow.Progress{Expanded: map[string]bool{}, Counts: map[string]map[models.TaskStatus]int{}}
	rows, err := x.QueryContext(x.ctx, "SELECT step FROM workflow_run_steps WHERE run_id = ?", runID)
	if err != nil {
		return p, err
	}
	for rows.Next() {
		var step string
		if err := rows.Scan(&step); err != nil {
			rows.Close()
			return p, err
		}
		p.Expanded[step] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return p, err
	}
	// A step's archived tasks count as its live ones do.
	for _, q := range []string{qRunStepCounts, qArchivedRunStepCounts} {
		if err := x.addStepCounts(p, q, runID); err != nil {
			return p, err
		}
	}
	return p, nil
}

// addStepCounts adds to p the counts by step and status query q reads.
func (x *txn) addStepCounts(p workflow.Progress, q, runID string) error {
	rows, err := x.QueryContext(x.ctx, q, runID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			step string
			st   models.TaskStatus
			n    int
		)
		if err := rows.Scan(&step, &st, &n); err != nil {
			return err
		}
		if p.Counts[step] == nil {
			p.Counts[step] = map[models.TaskStatus]int{}
		}
		p.Counts[step][st] += n
	}
	return rows.Err()
}

// advanceRun makes the tasks of every step of a run that is due
// (workflow.DueSteps), upstream first, until no step is: a step that
// makes no task (an empty fan-out) lets the steps after it come due in
// the same pass. A cancelled run makes nothing.
func (x *txn) advanceRun(runID string) error {
	run, w, err := x.loadRun(runID)
	if err != nil {
		return err
	}
	if run.Status == models.RunCancelled {
		return nil
	}
	for pass := 0; pass <= len(w.Steps); pass++ {
		p, err := x.readProgress(runID)
		if err != nil {
			return err
		}
		due := workflow.DueSteps(w, p)
		if len(due) == 0 {
			return nil
		}
		if err := x.expandSteps(run, w, due); err != nil {
			return err
		}
	}
	return nil
}

// expandSteps makes the tasks of due steps (workflow.Expand) in one
// batch. The task standing for a step whose fan-out failed is stopped at
// once with the reason (RUN_STOPPED); a retry reads the output again.
// Made in an upstream's completion, which a refusal would undo (and the
// completion be tried again, for ever), the tasks are counted before any
// is made: due steps that would make more than the batch cap together
// each fail so instead (workflow.ExpansionRefusals), and a step whose
// tasks would depend on more upstream tasks than a task may have fails
// so too, its stand-in depending on none (workflow.Expand).
func (x *txn) expandSteps(run models.WorkflowRun, w models.Workflow, due []models.WorkflowStep) error {
	outputs, err := x.runOutputs(run.ID)
	if err != nil {
		return err
	}
	rs, err := readRuleSet(x.ctx, x)
	if err != nil {
		return err
	}
	var (
		batch   []models.BatchTask
		failed  = map[string]string{}
		refused = workflow.ExpansionRefusals(due, outputs)
	)
	for _, st := range due {
		upstream := map[string][]string{}
		for _, d := range st.DependsOn {
			ids, err := x.stepTaskIDs(run.ID, d.Step)
			if err != nil {
				return err
			}
			upstream[d.Step] = ids
		}
		var (
			tasks   []models.BatchTask
			failure string
		)
		if why, ok := refused[st.Name]; ok {
			tasks, failure = workflow.Refuse(w, st, run, upstream, why), why
		} else {
			tasks, failure = workflow.Expand(w, st, run, outputs, upstream)
		}
		if failure == "" {
			// Made in an upstream's completion, which a refusal would
			// undo: tasks the rules refuse stop their step instead.
			if err := workflow.CheckTaskRules(tasks, w.ProjectID, rs.Rules); err != nil {
				failure = models.ErrorMessageOf(err)
				standIn := workflow.StandIn(w, st, run, failure)
				standIn.Dependencies = tasks[0].Dependencies
				tasks = []models.BatchTask{standIn}
			}
		}
		if failure != "" {
			failed[st.Name] = failure
		}
		batch = append(batch, tasks...)
		if _, err := x.ExecContext(x.ctx, "INSERT INTO workflow_run_steps (run_id, step, task_count, expanded_at) VALUES (?,?,?,?)",
			run.ID, st.Name, len(tasks), toNanos(x.now)); err != nil {
			return err
		}
	}
	if len(batch) == 0 {
		return nil
	}
	entries, err := prepareBatch(models.TaskBatch{ProjectID: w.ProjectID, CreatedBy: "workflow:" + w.Name, Tasks: batch})
	if err != nil {
		return fmt.Errorf("tasks of run %s: %w", run.ID, err)
	}
	res, err := x.createBatch(entries)
	if err != nil {
		return fmt.Errorf("tasks of run %s: %w", run.ID, err)
	}
	for i, r := range res {
		why, ok := failed[batch[i].Workflow.Step]
		if !ok || batch[i].Metadata[workflow.FanOutFailedKey] == "" {
			continue
		}
		if _, err := x.runNotified(change{taskID: r.TaskID, event: models.EventRunStopped, actor: "workflow",
			reason: "fan-out failed: " + why}); err != nil {
			return err
		}
	}
	return nil
}

// runNotified applies a change as ApplyEvent does, with its notices: the
// task's own, and a broken chain's.
func (x *txn) runNotified(c change) (applied, error) {
	before := len(x.blocked)
	a, err := x.run(c)
	if err != nil || a.duplicate || a.skipped {
		return a, err
	}
	return a, x.s.notify(x.ctx, x.tx, a, x.blocked[before:], c.event, c.reason, c.actor)
}

// stepTaskIDs returns the ids of a run's step's tasks, its archived ones
// included (a dependency on one is met as its archived status says).
func (x *txn) stepTaskIDs(runID, step string) ([]string, error) {
	ids, err := queryIDs(x.ctx, x, "SELECT id FROM tasks WHERE workflow_run_id = ? AND step_name = ? ORDER BY parallel_index", runID, step)
	if err != nil {
		return nil, err
	}
	archived, err := x.archivedStepTaskIDs(runID, step)
	return append(ids, archived...), err
}

// runOutputs returns the outputs of the run's steps that made one task,
// archived or not.
func (x *txn) runOutputs(runID string) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	if err := x.addArchivedOutputs(runID, out); err != nil {
		return nil, err
	}
	rows, err := x.QueryContext(x.ctx, `SELECT t.step_name, r.outputs FROM tasks t JOIN task_results r ON r.task_id = t.id
		WHERE t.workflow_run_id = ? AND t.parallel_count = 0`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
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

// workflowEffects marks the run of a task that changed: before the
// transaction ends, its due steps get their tasks (when the task
// finished) and its status is settled.
func (x *txn) workflowEffects(a applied) {
	t := a.task
	if t.RunID == "" {
		return
	}
	if x.touchedRuns == nil {
		x.touchedRuns = map[string]bool{}
	}
	finished := t.Status == models.StatusCompleted || t.Status == models.StatusBlocked
	x.touchedRuns[t.RunID] = x.touchedRuns[t.RunID] || finished
}

// settleRuns advances and settles every run touched in the transaction.
// Only the outermost run of the transaction engine does it (creating a
// run's tasks runs the engine again, inside), once for all its changes.
func (x *txn) settleRuns() error {
	for len(x.touchedRuns) > 0 {
		touched := x.touchedRuns
		x.touchedRuns = nil
		// Run by run in id order: what settling writes (tasks, events,
		// notices) comes in the same order every time.
		for _, id := range slices.Sorted(maps.Keys(touched)) {
			if touched[id] {
				if err := x.advanceRun(id); err != nil {
					return fmt.Errorf("advance run %s: %w", id, err)
				}
			}
			if err := x.settleRun(id); err != nil {
				return fmt.Errorf("settle run %s: %w", id, err)
			}
		}
	}
	return nil
}

// settleRun sets a run's status to the one its steps make
// (workflow.Settle), with the reason a failed run failed, and queues the
// notice of a run that ended. A cancelled run stays cancelled.
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
	p, err := x.readProgress(id)
	if err != nil {
		return err
	}
	set := workflow.Settle(run.Status, w, p)
	status, reason := set.Status, ""
	if status == models.RunFailed {
		var tid, why string
		if err := x.QueryRowContext(x.ctx, `SELECT id, status_reason FROM tasks WHERE workflow_run_id = ? AND status = 'BLOCKED'
			AND cascade_root_id = '' ORDER BY updated_at, id LIMIT 1`, id).Scan(&tid, &why); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		reason = set.Reason(tid, why)
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
		return x.s.enqueue(x.ctx, x.tx, fmt.Sprintf("run_%s:%s:%d", status, id, toNanos(x.now)),
			models.NewRunEndedNotice(models.RunEndedNotice{RunID: id, Workflow: run.Workflow, ProjectID: run.ProjectID,
				Status: status, Reason: reason}))
	}
	return nil
}

// GetWorkflowRun returns a run with its tasks counted by status, its
// archived tasks included (and counted apart too), read from one
// snapshot.
func (s *Store) GetWorkflowRun(ctx context.Context, id string) (models.WorkflowRun, error) {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return models.WorkflowRun{}, fmt.Errorf("get run %s: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	r, err := getWorkflowRun(ctx, tx, id)
	if err != nil {
		return models.WorkflowRun{}, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, nil
}

// getWorkflowRun reads a run and counts its tasks through q.
func getWorkflowRun(ctx context.Context, q queryer, id string) (models.WorkflowRun, error) {
	r, err := scanWorkflowRun(q.QueryRowContext(ctx, "SELECT "+wfRunColumns+" FROM workflow_runs WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return models.WorkflowRun{}, notFound("run", id)
	}
	if err != nil {
		return models.WorkflowRun{}, err
	}
	rows, err := q.QueryContext(ctx, "SELECT status, count(*) FROM tasks WHERE workflow_run_id = ? GROUP BY status", id)
	if err != nil {
		return models.WorkflowRun{}, err
	}
	defer rows.Close()
	r.Tasks = map[models.TaskStatus]int{}
	for rows.Next() {
		var (
			st models.TaskStatus
			n  int
		)
		if err := rows.Scan(&st, &n); err != nil {
			return models.WorkflowRun{}, err
		}
		r.Tasks[st] = n
	}
	if err := rows.Err(); err != nil {
		return models.WorkflowRun{}, err
	}
	r.ArchivedTasks, err = addArchivedCounts(ctx, q, id, r.Tasks)
	return r, err
}

// ListWorkflowRuns returns runs, newest first, at most f.Limit (default
// DefaultListLimit, at most MaxListLimit).
func (s *Store) ListWorkflowRuns(ctx context.Context, f models.RunFilter) ([]models.WorkflowRun, error) {
	return s.ListWorkflowRunsAfter(ctx, f, "")
}

// ListWorkflowRunsAfter lists runs like ListWorkflowRuns, continuing after
// the run afterID in that order (keyset paging; empty: from the newest).
// An afterID that names no run is invalid.
func (s *Store) ListWorkflowRunsAfter(ctx context.Context, f models.RunFilter, afterID string) ([]models.WorkflowRun, error) {
	switch {
	case f.Limit <= 0:
		f.Limit = DefaultListLimit
	case f.Limit > MaxListLimit:
		f.Limit = MaxListLimit
	}
	var afterRow, afterCreated int64
	if afterID != "" {
		err := s.rdb.QueryRowContext(ctx, qWorkflowRunCursor, afterID).Scan(&afterRow, &afterCreated)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, models.Errorf(models.CodeInvalid, "after: no run %q to continue after", afterID)
		}
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
	}
	rs, err := queryAll(ctx, s.rdb, scanWorkflowRun, qListWorkflowRuns, f.Workflow, f.ProjectID, f.Status, f.Limit,
		afterRow, afterCreated)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	ids := make([]string, len(rs))
	for i := range rs {
		rs[i].Definition = nil
		ids[i] = rs[i].ID
	}
	if len(rs) == 0 {
		return rs, nil
	}
	counts, archived, err := s.runTaskCounts(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	for i := range rs {
		rs[i].Tasks, rs[i].ArchivedTasks = counts[rs[i].ID], archived[rs[i].ID]
		if rs[i].Tasks == nil {
			rs[i].Tasks = map[models.TaskStatus]int{}
		}
	}
	return rs, nil
}

// qRunTaskCounts counts the tasks of the runs whose ids are in ?1 (a JSON
// array) by run and status, archived tasks included, and how many of them
// are archived.
const qRunTaskCounts = `SELECT run, status, sum(n), sum(archived) FROM (
		SELECT workflow_run_id AS run, status, count(*) AS n, 0 AS archived FROM tasks
			WHERE workflow_run_id IN (SELECT value FROM json_each(?1)) GROUP BY workflow_run_id, status
		UNION ALL
		SELECT run_id, status, count(*), count(*) FROM archived_tasks
			WHERE run_id IN (SELECT value FROM json_each(?1)) GROUP BY run_id, status)
	GROUP BY run, status`

// runTaskCounts counts the tasks of runs ids by status and their archived
// tasks, as GetWorkflowRun counts one run's, with one statement for them
// all.
func (s *Store) runTaskCounts(ctx context.Context, ids []string) (map[string]map[models.TaskStatus]int, map[string]int, error) {
	rows, err := s.rdb.QueryContext(ctx, qRunTaskCounts, batchArg(ids))
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	out, archived := map[string]map[models.TaskStatus]int{}, map[string]int{}
	for rows.Next() {
		var (
			run  string
			st   models.TaskStatus
			n, a int
		)
		if err := rows.Scan(&run, &st, &n, &a); err != nil {
			return nil, nil, err
		}
		if out[run] == nil {
			out[run] = map[models.TaskStatus]int{}
		}
		out[run][st] = n
		archived[run] += a
	}
	return out, archived, rows.Err()
}

// RunTasks returns a run's tasks in step order, each named in the run,
// its archived tasks included (with their ArchivedAt), read from one
// snapshot.
func (s *Store) RunTasks(ctx context.Context, runID string) ([]models.RunTask, error) {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("tasks of run %s: %w", runID, err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	var one int
	if err := tx.QueryRowContext(ctx, "SELECT 1 FROM workflow_runs WHERE id = ?", runID).Scan(&one); errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("run", runID)
	} else if err != nil {
		return nil, fmt.Errorf("tasks of run %s: %w", runID, err)
	}
	ts, err := queryAll(ctx, tx, scanTask, "SELECT "+taskColumns+` FROM tasks WHERE workflow_run_id = ?
		ORDER BY created_at, step_name, parallel_index`, runID)
	if err != nil {
		return nil, fmt.Errorf("tasks of run %s: %w", runID, err)
	}
	out := make([]models.RunTask, len(ts))
	for i, t := range ts {
		out[i] = models.RunTask{Task: t, Name: t.RunName()}
	}
	archived, err := archivedRunTasks(ctx, tx, runID)
	if err != nil {
		return nil, fmt.Errorf("tasks of run %s: %w", runID, err)
	}
	if len(archived) > 0 {
		out = append(out, archived...)
		sortRunTasks(out)
	}
	return out, nil
}

// CancelWorkflowRun marks a run cancelled and, in the same transaction,
// stops (RUN_STOPPED, reason "cancelled") every unfinished task of it that
// no agent is working on. It returns the tasks an agent is working on:
// the caller stops them through the orchestrator. Cancelling a run that
// has ended is a conflict; cancelling it again stops what is left.
func (s *Store) CancelWorkflowRun(ctx context.Context, id, by string) ([]models.Task, error) {
	var running []models.Task
	var changed bool
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
			if _, err := tx.ExecContext(ctx, `UPDATE workflow_runs SET status = ?, reason = ?, updated_at = ?,
				ended_at = ? WHERE id = ?`, models.RunCancelled, "cancelled by "+by, now, now, id); err != nil {
				return err
			}
			if err := s.enqueue(ctx, tx, "run_cancelled:"+id+":"+fmt.Sprint(now), models.NewRunEndedNotice(models.RunEndedNotice{
				RunID: id, Workflow: r.Workflow, ProjectID: r.ProjectID, Status: models.RunCancelled,
				Reason: "cancelled by " + by})); err != nil {
				return err
			}
		}
		x := s.newTxn(ctx, tx)
		err = x.nested(func() error {
			// Stopping a task can let a dependent with a soft edge become
			// READY: stop until nothing idle is left.
			for range 100 {
				idle, err := queryAll(ctx, tx, scanTask, "SELECT "+taskColumns+` FROM tasks WHERE workflow_run_id = ?
					AND status IN ('DEFINED', 'READY', 'PAUSED', 'FAILED') ORDER BY created_at, step_name, parallel_index`, id)
				if err != nil || len(idle) == 0 {
					return err
				}
				for _, t := range idle {
					if _, err := x.runNotified(change{taskID: t.ID, event: models.EventRunStopped, expectFrom: t.Status,
						reason: "cancelled", actor: by}); err != nil && models.ErrorCodeOf(err) != models.CodeConflict {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		changed = x.changed
		running, err = queryAll(ctx, tx, scanTask, "SELECT "+taskColumns+` FROM tasks WHERE workflow_run_id = ?
			AND status IN ('ASSIGNED', 'IN_PROGRESS', 'WAITING_INPUT', 'VERIFYING', 'AWAITING_APPROVAL')
			ORDER BY created_at, step_name, parallel_index`, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cancel run %s: %w", id, err)
	}
	if changed {
		s.changed()
	}
	return running, nil
}

// RetryWorkflowRun reopens a failed or cancelled run, in one transaction:
// a step whose fan-out failed reads its upstream's output again; every
// FAILED task, and every BLOCKED one not blocked only because an upstream
// was (those follow their root), starts again, upstream first —
// ADMIN_RESTART when every upstream task is COMPLETED, UPSTREAM_REOPENED
// (back to waiting) otherwise; steps that are due get their tasks; and the
// run's status is settled. COMPLETED tasks are not run again. A run with
// a task archived BLOCKED, or a step whose tasks are all gone (dropped
// from the archive), is not retried (a conflict naming them): an archived
// task never runs again, and a run cannot be settled on tasks it no
// longer has; a new run does the work again.
func (s *Store) RetryWorkflowRun(ctx context.Context, id, by string) (models.WorkflowRun, error) {
	var changed bool
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		x := s.newTxn(ctx, tx)
		r, w, err := x.loadRun(id)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("run", id)
		}
		if err != nil {
			return err
		}
		if r.Status != models.RunFailed && r.Status != models.RunCancelled {
			return models.Errorf(models.CodeConflict, "run %s is %s: only a failed or cancelled run is retried", id, r.Status)
		}
		if err := x.retryRefusal(r); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE workflow_runs SET status = ?, reason = '', ended_at = NULL, updated_at = ? WHERE id = ?",
			models.RunRunning, toNanos(x.now), id); err != nil {
			return err
		}
		err = x.nested(func() error {
			// A failed fan-out's stand-in goes, and its step is read again.
			rows, err := queryAll(ctx, tx, scanTask, "SELECT "+taskColumns+` FROM tasks WHERE workflow_run_id = ?
				AND json_extract(metadata, '$.`+workflow.FanOutFailedKey+`') = 'true'`, id)
			if err != nil {
				return err
			}
			for _, t := range rows {
				if _, err := tx.ExecContext(ctx, "DELETE FROM workflow_run_steps WHERE run_id = ? AND step = ?", id, t.StepName); err != nil {
					return err
				}
				if err := x.forgetUsage(t.ID, t.ProjectID); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, "DELETE FROM tasks WHERE id = ?", t.ID); err != nil {
					return err
				}
			}
			ts, err := queryAll(ctx, tx, scanTask, "SELECT "+taskColumns+` FROM tasks WHERE workflow_run_id = ?
				AND (status = 'FAILED' OR (status = 'BLOCKED' AND cascade_root_id = '')) ORDER BY parallel_index`, id)
			if err != nil {
				return err
			}
			workflow.RetryOrder(w, ts)
			for _, t := range ts {
				// What a task needs depends on what was restarted before it.
				cur, err := getTask(ctx, x, t.ID)
				if err != nil {
					return err
				}
				var unmet int
				if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM task_dependencies d JOIN tasks u ON u.id = d.upstream
					WHERE d.downstream = ? AND u.status != 'COMPLETED'`, t.ID).Scan(&unmet); err != nil {
					return err
				}
				ev, ok := workflow.RetryEvent(cur, unmet)
				if !ok {
					continue
				}
				if _, err := x.runNotified(change{taskID: t.ID, event: ev, expectFrom: cur.Status, reason: "run " + id + " retried",
					actor: by}); err != nil {
					return err
				}
			}
			if x.touchedRuns == nil {
				x.touchedRuns = map[string]bool{}
			}
			x.touchedRuns[id] = true // steps a cancel kept from getting their tasks
			return nil
		})
		changed = x.changed
		return err
	})
	if err != nil {
		return models.WorkflowRun{}, fmt.Errorf("retry run %s: %w", id, err)
	}
	if changed {
		s.changed()
	}
	return s.GetWorkflowRun(ctx, id)
}

// UnfinishedCancels returns the cancelled runs that still have unfinished
// tasks (a stop interrupted the cancel, or a task moved on meanwhile).
func (s *Store) UnfinishedCancels(ctx context.Context) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT r.id FROM workflow_runs r WHERE r.status = 'cancelled' AND EXISTS
		(SELECT 1 FROM tasks t WHERE t.workflow_run_id = r.id AND t.status NOT IN ('COMPLETED', 'BLOCKED')) ORDER BY r.id`)
	if err != nil {
		return nil, fmt.Errorf("unfinished cancels: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("unfinished cancels: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// RunTaskByName returns the task of a run with a name such as "build" or
// "upgrade[2]", archived (ArchivedAt set) or not.
func (s *Store) RunTaskByName(ctx context.Context, runID, name string) (models.RunTask, error) {
	ts, err := s.RunTasks(ctx, runID)
	if err != nil {
		return models.RunTask{}, err
	}
	var names []string
	for _, t := range ts {
		if t.Name == name {
			return t, nil
		}
		names = append(names, t.Name)
	}
	return models.RunTask{}, models.Errorf(models.CodeNotFound, "run %s has no task %q (tasks: %s)", runID, name, strings.Join(names, ", "))
}
