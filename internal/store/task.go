package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

const taskColumns = `id, project_id, title, description, priority, status, verification_type, retry_count,
	max_retries, parent_task_id, repo_id, assigned_agent_id, branch_name, resume_after, requires_approval, pr_url,
	plan_source, is_plan_subtask, kind, metadata, created_by, not_before, expected_count, success_count,
	failure_count, acceptance_criteria, test_commands, status_reason, cascade_root_id, created_at, updated_at, profile,
	workflow_run_id, step_name, parallel_index, parallel_count, step_concurrency, rules, waiting_code, waiting_reason, timeout_ns,
	agent_type, submission_seq, runner_labels`

type scanner interface{ Scan(...any) error }

func scanTask(row scanner) (models.Task, error) {
	var (
		t                                        models.Task
		parent, repo, agent, branch, pr, planSrc sql.NullString
		runID                                    sql.NullString
		resume, notBefore                        sql.NullInt64
		meta, criteria, tests, rules, labels     string
		created, updated, timeout                int64
	)
	if err := row.Scan(&t.ID, &t.ProjectID, &t.Title, &t.Description, &t.Priority, &t.Status, &t.VerificationType,
		&t.RetryCount, &t.MaxRetries, &parent, &repo, &agent, &branch, &resume, &t.RequiresApproval, &pr, &planSrc,
		&t.IsPlanSubtask, &t.Kind, &meta, &t.CreatedBy, &notBefore, &t.ExpectedCount, &t.SuccessCount,
		&t.FailureCount, &criteria, &tests, &t.StatusReason, &t.CascadeRootID, &created, &updated, &t.Profile,
		&runID, &t.StepName, &t.ParallelIndex, &t.ParallelCount, &t.StepConcurrency, &rules, &t.WaitingCode, &t.WaitingReason, &timeout,
		&t.AgentType, &t.SubmissionSeq, &labels); err != nil {
		return models.Task{}, err
	}
	if err := decodeJSONColumn(labels, &t.RunnerLabels); err != nil {
		return models.Task{}, fmt.Errorf("task %s runner_labels: %w", t.ID, err)
	}
	t.ParentTaskID, t.RepoID, t.AssignedAgentID = fromNullString(parent), fromNullString(repo), fromNullString(agent)
	t.BranchName, t.PRURL, t.PlanSource = fromNullString(branch), fromNullString(pr), fromNullString(planSrc)
	t.ResumeAfter, t.NotBefore = fromNullNanos(resume), fromNullNanos(notBefore)
	t.CreatedAt, t.UpdatedAt = fromNanos(created), fromNanos(updated)
	t.RunID, t.Timeout = runID.String, models.Duration(timeout)
	if err := decodeJSONColumn(meta, &t.Metadata); err != nil {
		return models.Task{}, fmt.Errorf("task %s metadata: %w", t.ID, err)
	}
	if err := decodeJSONColumn(criteria, &t.AcceptanceCriteria); err != nil {
		return models.Task{}, fmt.Errorf("task %s acceptance_criteria: %w", t.ID, err)
	}
	if err := decodeJSONColumn(tests, &t.TestCommands); err != nil {
		return models.Task{}, fmt.Errorf("task %s test_commands: %w", t.ID, err)
	}
	if err := decodeJSONColumn(rules, &t.Rules); err != nil {
		return models.Task{}, fmt.Errorf("task %s rules: %w", t.ID, err)
	}
	return t, nil
}

func decodeJSONColumn(s string, v any) error {
	if s == "" || s == "null" || s == "{}" || s == "[]" {
		return nil
	}
	return json.Unmarshal([]byte(s), v)
}

func encodeJSONColumn(v any, empty string) string {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return empty
	}
	return string(b)
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func getTask(ctx context.Context, q queryer, id string) (models.Task, error) {
	t, err := scanTask(q.QueryRowContext(ctx, "SELECT "+taskColumns+" FROM tasks WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return models.Task{}, notFound("task", id)
	}
	return t, err
}

// GetTask returns one task.
func (s *Store) GetTask(ctx context.Context, id string) (models.Task, error) {
	t, err := getTask(ctx, s.rdb, id)
	if err != nil {
		return models.Task{}, fmt.Errorf("get task %s: %w", id, err)
	}
	return t, nil
}

// GetTaskDetail returns a task with its dependency edges in both directions
// and its events, read from one snapshot.
func (s *Store) GetTaskDetail(ctx context.Context, id string) (models.TaskDetail, error) {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return models.TaskDetail{}, fmt.Errorf("get task %s: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	d, err := taskDetail(ctx, tx, id)
	if models.ErrorCodeOf(err) == models.CodeNotFound {
		if a, ok, aerr := archivedDetail(ctx, tx, id); aerr != nil {
			return models.TaskDetail{}, fmt.Errorf("get task %s: %w", id, aerr)
		} else if ok {
			return a, nil
		}
	}
	return d, err
}

// taskDetail reads a task's detail through q (one snapshot).
func taskDetail(ctx context.Context, q queryer, id string) (models.TaskDetail, error) {
	var (
		d   models.TaskDetail
		err error
	)
	if d.Task, err = getTask(ctx, q, id); err != nil {
		return models.TaskDetail{}, fmt.Errorf("get task %s: %w", id, err)
	}
	if d.Dependencies, err = listEdges(ctx, q, "downstream", id); err != nil {
		return models.TaskDetail{}, fmt.Errorf("get task %s dependencies: %w", id, err)
	}
	if d.Dependents, err = listEdges(ctx, q, "upstream", id); err != nil {
		return models.TaskDetail{}, fmt.Errorf("get task %s dependents: %w", id, err)
	}
	if d.Events, err = listEvents(ctx, q, id); err != nil {
		return models.TaskDetail{}, fmt.Errorf("get task %s events: %w", id, err)
	}
	if d.Task.Status == models.StatusVerifying || d.Task.Status == models.StatusAwaitingApproval {
		// Inside the snapshot: a second pooled connection while this one is
		// held could wait forever when every reader does the same. A task
		// awaiting approval shows it only while its work waits for a person
		// without a pull request (what a failed merge of an approval says).
		if v, ok, err := getVerification(ctx, q, id); err != nil {
			return models.TaskDetail{}, err
		} else if ok && (d.Task.Status == models.StatusVerifying || v.Phase == models.PhaseApproval ||
			v.Phase == models.PhaseApproved || v.Phase == models.PhaseLanding || v.Phase == "rejected") {
			d.Verification = &v
		}
	}
	if c, ok, err := taskResult(ctx, q, id); err != nil {
		return models.TaskDetail{}, err
	} else if ok {
		d.Result = &c
	}
	if d.Runs, err = taskRuns(ctx, q, id, models.TaskDetailRuns); err != nil {
		return models.TaskDetail{}, err
	}
	if p, ok, err := pendingPlan(ctx, q, id); err != nil {
		return models.TaskDetail{}, err
	} else if ok {
		d.Plan = &p
	}
	return d, nil
}

// edgeColumns are the columns scanEdge reads.
const edgeColumns = `downstream, upstream, requires_success, resolution, resolved_at,
	resolving_event_id, upstream_outcome, upstream_attempt`

func listEdges(ctx context.Context, q queryer, column, id string) ([]models.Dependency, error) {
	return queryAll(ctx, q, scanEdge, "SELECT "+edgeColumns+" FROM task_dependencies WHERE "+column+
		" = ? ORDER BY downstream, upstream", id)
}

func scanEdge(row scanner) (models.Dependency, error) {
	var (
		d        models.Dependency
		resolved sql.NullInt64
		eventID  sql.NullInt64
		attempt  sql.NullInt64
	)
	if err := row.Scan(&d.Downstream, &d.Upstream, &d.RequiresSuccess, &d.Resolution, &resolved, &eventID,
		&d.UpstreamOutcome, &attempt); err != nil {
		return d, err
	}
	if attempt.Valid {
		n := int(attempt.Int64)
		d.UpstreamAttempt = &n
	}
	d.ResolvedAt = fromNullNanos(resolved)
	if eventID.Valid {
		d.ResolvingEventID = &eventID.Int64
	}
	return d, nil
}

func listEvents(ctx context.Context, q queryer, id string) ([]models.EventRecord, error) {
	return queryAll(ctx, q, scanEvent, qTaskEvents, id)
}

func scanEvent(row scanner) (models.EventRecord, error) {
	var (
		e       models.EventRecord
		created int64
	)
	if err := row.Scan(&e.ID, &e.TaskID, &e.From, &e.To, &e.Event, &e.Reason, &e.Actor, &created); err != nil {
		return e, err
	}
	e.CreatedAt = fromNanos(created)
	return e, nil
}

// ListTasks returns tasks matching f in submission order (submission_seq;
// archived ones, with f.Archived, in the order they were archived), at most
// f.Limit (default DefaultListLimit, at most MaxListLimit).
func (s *Store) ListTasks(ctx context.Context, f models.TaskFilter) ([]models.Task, error) {
	if f.Archived {
		return s.listArchivedTasks(ctx, f)
	}
	var (
		where []string
		args  []any
	)
	if f.ProjectID != "" {
		where = append(where, "project_id = ?")
		args = append(args, f.ProjectID)
	}
	if len(f.Statuses) > 0 {
		marks := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			if !st.Valid() {
				return nil, models.Errorf(models.CodeInvalid, "status: unknown task status %q", st)
			}
			marks[i] = "?"
			args = append(args, st)
		}
		where = append(where, "status IN ("+strings.Join(marks, ",")+")")
	}
	if f.Kind != "" {
		where = append(where, "kind = ?")
		args = append(args, f.Kind)
	}
	if f.CreatedBy != "" {
		where = append(where, "created_by = ?")
		args = append(args, f.CreatedBy)
	}
	if f.AfterID != "" {
		var n int
		if err := s.rdb.QueryRowContext(ctx, "SELECT count(*) FROM tasks WHERE id = ?", f.AfterID).Scan(&n); err != nil {
			return nil, fmt.Errorf("list tasks: %w", err)
		}
		if n == 0 {
			return nil, models.Errorf(models.CodeInvalid, "after: no task %q to continue after", f.AfterID)
		}
		where = append(where, "submission_seq > (SELECT submission_seq FROM tasks WHERE id = ?)")
		args = append(args, f.AfterID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	q := "SELECT " + taskColumns + " FROM tasks"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY submission_seq LIMIT ?"
	args = append(args, limit)
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	defer rows.Close()
	out := []models.Task{}
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, fmt.Errorf("list tasks: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// OpenQuestionsPage returns at most limit (default DefaultListLimit, at
// most MaxListLimit) of the questions OpenQuestions returns, oldest first,
// continuing after the question afterID (keyset paging; 0: from the
// oldest). An afterID that names no question is invalid.
func (s *Store) OpenQuestionsPage(ctx context.Context, afterID int64, limit int) ([]models.Question, error) {
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	var askedAt int64
	if afterID != 0 {
		err := s.rdb.QueryRowContext(ctx, qQuestionCursor, afterID).Scan(&askedAt)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, models.Errorf(models.CodeInvalid, "after: no question %d to continue after", afterID)
		}
		if err != nil {
			return nil, fmt.Errorf("list open questions: %w", err)
		}
	}
	qs, err := queryAll(ctx, s.rdb, scanQuestion, qOpenQuestionsPage, askedAt, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list open questions: %w", err)
	}
	return qs, nil
}
