package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds what runs leave for later: CLI sessions and their usage,
// task results, verification phases, feedback and plans.

// ClaimReview claims an IDLE agent to review a VERIFYING task: the agent
// becomes STARTING with the task as its current one and a review run is
// written; the task does not change status. It returns the run and its
// RPC token.
func (s *Store) ClaimReview(ctx context.Context, taskID, agentID string) (models.Run, string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return models.Run{}, "", fmt.Errorf("claim review of %s: run token: %w", taskID, err)
	}
	token := hex.EncodeToString(b[:])
	var run models.Run
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		x := s.newTxn(ctx, tx)
		t, err := getTask(ctx, x, taskID)
		if err != nil {
			return err
		}
		if t.Status != models.StatusVerifying {
			return models.Errorf(models.CodeConflict, "task %s is %s, not VERIFYING", taskID, t.Status)
		}
		res, err := x.ExecContext(ctx, `UPDATE agents SET state = 'STARTING', current_task_id = ?, pid = NULL,
			rest_until = NULL, rest_reason = ''
			WHERE id = ? AND state = 'IDLE' AND paused = 0 AND (rest_until IS NULL OR rest_until <= ?)
		AND EXISTS (SELECT 1 FROM verifications WHERE task_id = ? AND phase = 'review')`, taskID, agentID, toNanos(x.now), taskID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return models.Errorf(models.CodeConflict, "agent %s is not IDLE (or rests after a rate limit), or task %s no longer waits for a review",
				agentID, taskID)
		}
		var attempt int
		if err := x.QueryRowContext(ctx, "SELECT count(*) FROM task_runs WHERE task_id = ? AND kind = 'work'", taskID).Scan(&attempt); err != nil {
			return err
		}
		run = models.Run{TaskID: taskID, AgentID: agentID, ProjectID: t.ProjectID, Attempt: attempt, Kind: models.RunReview,
			StartedAt: x.now, LastActivityAt: x.now, LeaseGeneration: s.LeaseGeneration()}
		ins, err := x.ExecContext(ctx, `INSERT INTO task_runs (task_id, agent_id, project_id, attempt, token_hash,
			started_at, last_activity_at, kind, cli, lease_generation)
			VALUES (?,?,?,?,?,?,?,?,(SELECT agent_type FROM agents WHERE id = ?),?)`,
			taskID, agentID, t.ProjectID, attempt, hashToken(token), toNanos(x.now), toNanos(x.now), models.RunReview, agentID,
			run.LeaseGeneration)
		if err != nil {
			return err
		}
		run.ID, err = ins.LastInsertId()
		return err
	})
	if err != nil {
		return models.Run{}, "", fmt.Errorf("claim review of %s by %s: %w", taskID, agentID, err)
	}
	return run, token, nil
}

// RecordRunSession keeps the CLI session a run reported. A session that no
// earlier run of the run's agent reported is a new one: the agent's
// session_tokens_used starts again from zero (a resumed session keeps
// counting).
func (s *Store) RecordRunSession(ctx context.Context, runID int64, sessionID string) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		// Before the run keeps it: a session no run of the agent (this one
		// included) has reported yet is new.
		if _, err := s.txExec(ctx, tx, `UPDATE agents SET session_tokens_used = 0
			WHERE id = (SELECT agent_id FROM task_runs WHERE id = ?1)
			AND NOT EXISTS (SELECT 1 FROM task_runs r WHERE r.agent_id = agents.id AND r.session_id = ?2)`,
			runID, sessionID); err != nil {
			return err
		}
		_, err := s.txExec(ctx, tx, "UPDATE task_runs SET session_id = ? WHERE id = ?", sessionID, runID)
		return err
	})
	if err != nil {
		return fmt.Errorf("record session of run %d: %w", runID, err)
	}
	return nil
}

// RecordRunCLI keeps what a run's CLI showed of itself at start: the CLI,
// its version (also kept on the agent) and the MCP servers not yet
// connected. An empty version or list keeps what was recorded.
func (s *Store) RecordRunCLI(ctx context.Context, runID int64, c models.RunCLI) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		if _, err := s.txExec(ctx, tx, `UPDATE task_runs SET cli = ?, cli_version = CASE WHEN ? = '' THEN cli_version ELSE ? END,
			mcp_not_ready = CASE WHEN ? = '[]' THEN mcp_not_ready ELSE ? END WHERE id = ?`, c.CLI, c.Version, c.Version,
			encodeJSONColumn(c.MCPNotReady, "[]"), encodeJSONColumn(c.MCPNotReady, "[]"), runID); err != nil {
			return err
		}
		if c.Version == "" {
			return nil
		}
		_, err := s.txExec(ctx, tx, "UPDATE agents SET cli_version = ? WHERE id = (SELECT agent_id FROM task_runs WHERE id = ?)",
			c.Version, runID)
		return err
	})
	if err != nil {
		return fmt.Errorf("record the CLI of run %d: %w", runID, err)
	}
	return nil
}

// RecordRunResult keeps the cost a run's CLI reported with its result
// (when it did) and the tool calls it refused.
func (s *Store) RecordRunResult(ctx context.Context, runID int64, cost *float64, denied []string) error {
	var c any
	if cost != nil {
		c = *cost
	}
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := s.txExec(ctx, tx, "UPDATE task_runs SET cost_usd = coalesce(?, cost_usd), denied_tools = ? WHERE id = ?",
			c, encodeJSONColumn(denied, "[]"), runID)
		return err
	})
	if err != nil {
		return fmt.Errorf("record the result of run %d: %w", runID, err)
	}
	return nil
}

// TaskRuns returns a task's latest runs (at most limit), oldest first.
func (s *Store) TaskRuns(ctx context.Context, taskID string, limit int) ([]models.Run, error) {
	return taskRuns(ctx, s.rdb, taskID, limit)
}

func taskRuns(ctx context.Context, q queryer, taskID string, limit int) ([]models.Run, error) {
	runs, err := queryAll(ctx, q, scanRun, "SELECT * FROM (SELECT "+runColumns+
		" FROM task_runs WHERE task_id = ? ORDER BY id DESC LIMIT ?) ORDER BY id", taskID, limit)
	if err != nil {
		return nil, fmt.Errorf("runs of task %s: %w", taskID, err)
	}
	return runs, nil
}

// ForgetSessions clears the sessions of a task's runs on an agent: the CLI
// no longer knows them, so the next attempt starts afresh.
func (s *Store) ForgetSessions(ctx context.Context, taskID, agentID string) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE task_runs SET session_id = '' WHERE task_id = ? AND agent_id = ?", taskID, agentID)
		return err
	})
	if err != nil {
		return fmt.Errorf("forget sessions of task %s: %w", taskID, err)
	}
	return nil
}

// LastSession returns the session of the task's latest work run on an
// agent that reported one, with the usage all that session's runs booked:
// for a CLI that reports a session's running total, the part of it already
// counted.
func (s *Store) LastSession(ctx context.Context, taskID, agentID string) (string, models.TokenUsage, error) {
	var id string
	err := s.rdb.QueryRowContext(ctx, `SELECT session_id FROM task_runs WHERE task_id = +? AND agent_id = +?
		AND kind = 'work' AND session_id != '' ORDER BY id DESC LIMIT 1`, taskID, agentID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", models.TokenUsage{}, nil
	}
	if err != nil {
		return "", models.TokenUsage{}, fmt.Errorf("last session of task %s: %w", taskID, err)
	}
	var u models.TokenUsage
	err = s.rdb.QueryRowContext(ctx, `SELECT coalesce(sum(json_extract(usage, '$.input_tokens')), 0),
		coalesce(sum(json_extract(usage, '$.output_tokens')), 0), coalesce(sum(json_extract(usage, '$.cache_read_tokens')), 0),
		coalesce(sum(json_extract(usage, '$.cache_write_tokens')), 0)
		FROM task_runs WHERE task_id = ? AND agent_id = ? AND kind = 'work' AND session_id = ?`, taskID, agentID, id).
		Scan(&u.Input, &u.Output, &u.CacheRead, &u.CacheWrite)
	if err != nil {
		return "", models.TokenUsage{}, fmt.Errorf("last session of task %s: usage: %w", taskID, err)
	}
	return id, u, nil
}

// RecordRunUsage takes a run's cumulative usage so far: the growth since
// the last figure it reported goes to the token ledger (against the run's
// project, task and agent), and the figure is kept, in one transaction. A
// figure smaller than the last one adds nothing.
func (s *Store) RecordRunUsage(ctx context.Context, runID int64, cumulative models.TokenUsage) (models.TokenUsage, error) {
	if err := checkUsage(cumulative); err != nil {
		return models.TokenUsage{}, fmt.Errorf("record usage of run %d: %w", runID, err)
	}
	var delta models.TokenUsage
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		var prev string
		var r models.Run
		if err := s.txQueryRow(ctx, tx, "SELECT usage, project_id, task_id, agent_id FROM task_runs WHERE id = ?", runID).
			Scan(&prev, &r.ProjectID, &r.TaskID, &r.AgentID); err != nil {
			return err
		}
		var last models.TokenUsage
		if err := decodeJSONColumn(prev, &last); err != nil {
			return err
		}
		grow := func(now, before int64) int64 { return max(now-before, 0) }
		delta = models.TokenUsage{ProjectID: r.ProjectID, TaskID: r.TaskID, AgentID: r.AgentID,
			Input: grow(cumulative.Input, last.Input), Output: grow(cumulative.Output, last.Output),
			CacheRead: grow(cumulative.CacheRead, last.CacheRead), CacheWrite: grow(cumulative.CacheWrite, last.CacheWrite)}
		keep := models.TokenUsage{Input: max(cumulative.Input, last.Input), Output: max(cumulative.Output, last.Output),
			CacheRead: max(cumulative.CacheRead, last.CacheRead), CacheWrite: max(cumulative.CacheWrite, last.CacheWrite)}
		if _, err := s.txExec(ctx, tx, "UPDATE task_runs SET usage = ? WHERE id = ?", encodeJSONColumn(keep, "{}"), runID); err != nil {
			return err
		}
		if delta.Total() == 0 {
			return nil
		}
		// The agent's totals grow with the ledger (recordTokenUsageTx).
		return s.recordTokenUsageTx(ctx, tx, delta)
	})
	if err != nil {
		return models.TokenUsage{}, fmt.Errorf("record usage of run %d: %w", runID, err)
	}
	return delta, nil
}

// SaveResult keeps what a task's run reported on completion, for its
// dependents.
func (s *Store) SaveResult(ctx context.Context, taskID string, runID int64, c models.Completion) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error { return saveResult(ctx, tx, taskID, runID, c, s.now()) })
	if err != nil {
		return fmt.Errorf("save result of task %s: %w", taskID, err)
	}
	return nil
}

// saveResult writes a task's result in tx.
func saveResult(ctx context.Context, tx execer, taskID string, runID int64, c models.Completion, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO task_results (task_id, run_id, summary, files_changed, outputs, updated_at,
		no_changes) VALUES (?,?,?,?,?,?,?) ON CONFLICT (task_id) DO UPDATE SET run_id = excluded.run_id,
		summary = excluded.summary, files_changed = excluded.files_changed, outputs = excluded.outputs,
		updated_at = excluded.updated_at, no_changes = excluded.no_changes`,
		taskID, runID, c.Summary, encodeJSONColumn(c.FilesChanged, "[]"), string(c.Outputs), toNanos(now), c.NoChanges)
	return err
}

// TaskResult returns a task's saved result; ok is false when it has none.
func (s *Store) TaskResult(ctx context.Context, taskID string) (models.Completion, bool, error) {
	return taskResult(ctx, s.rdb, taskID)
}

func taskResult(ctx context.Context, q queryer, taskID string) (models.Completion, bool, error) {
	var c models.Completion
	var files, outputs string
	err := q.QueryRowContext(ctx, "SELECT summary, files_changed, outputs, no_changes FROM task_results WHERE task_id = ?",
		taskID).Scan(&c.Summary, &files, &outputs, &c.NoChanges)
	if errors.Is(err, sql.ErrNoRows) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("result of task %s: %w", taskID, err)
	}
	if err := decodeJSONColumn(files, &c.FilesChanged); err != nil {
		return c, false, fmt.Errorf("result of task %s: %w", taskID, err)
	}
	if outputs != "" {
		c.Outputs = json.RawMessage(outputs)
	}
	return c, true, nil
}

// UpstreamResults returns the results of the completed tasks a task depends
// on, in the order of their ids.
func (s *Store) UpstreamResults(ctx context.Context, taskID string) ([]models.UpstreamResult, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT t.id, t.title, coalesce(r.summary, ''), coalesce(r.files_changed, '[]'),
		coalesce(r.outputs, '') FROM task_dependencies d JOIN tasks t ON t.id = d.upstream
		LEFT JOIN task_results r ON r.task_id = t.id
		WHERE d.downstream = +? AND t.status = 'COMPLETED' ORDER BY t.id`, taskID)
	if err != nil {
		return nil, fmt.Errorf("upstream results of %s: %w", taskID, err)
	}
	defer rows.Close()
	var out []models.UpstreamResult
	for rows.Next() {
		var u models.UpstreamResult
		var files, outputs string
		if err := rows.Scan(&u.TaskID, &u.Title, &u.Summary, &files, &outputs); err != nil {
			return nil, fmt.Errorf("upstream results of %s: %w", taskID, err)
		}
		if err := decodeJSONColumn(files, &u.FilesChanged); err != nil {
			return nil, fmt.Errorf("upstream results of %s: %w", taskID, err)
		}
		if outputs != "" {
			u.Outputs = json.RawMessage(outputs)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// RunErrors returns the failure texts of a task's ended work runs, oldest
// first.
func (s *Store) RunErrors(ctx context.Context, taskID string) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT error FROM task_runs WHERE task_id = +? AND kind = 'work'
		AND ended_at IS NOT NULL AND error != '' AND outcome IN ('failed', 'timeout', 'execution_error', 'deliver_failed',
		'verify_failed') ORDER BY id`, taskID)
	if err != nil {
		return nil, fmt.Errorf("run errors of %s: %w", taskID, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var msg string
		if err := rows.Scan(&msg); err != nil {
			return nil, err
		}
		out = append(out, msg)
	}
	return out, rows.Err()
}

// SetVerification records the phase of a task's verification.
func (s *Store) SetVerification(ctx context.Context, v models.Verification) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error { return setVerification(ctx, tx, v, s.now()) })
	if err != nil {
		return fmt.Errorf("record verification of %s: %w", v.TaskID, err)
	}
	s.changed()
	return nil
}

// setVerification writes a task's verification record in tx.
func setVerification(ctx context.Context, tx execer, v models.Verification, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO verifications (task_id, attempt, phase, source, event, actor, text, updated_at)
		VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (task_id) DO UPDATE SET attempt = excluded.attempt, phase = excluded.phase,
		source = excluded.source, event = excluded.event, actor = excluded.actor, text = excluded.text,
		updated_at = excluded.updated_at`,
		v.TaskID, v.Attempt, v.Phase, v.Source, v.Event, v.Actor, v.Text, toNanos(now))
	return err
}

// SetLandingWaiting records on a task in status why its verified work
// waits to land (waiting_code "landing", waiting_reason reason), shown
// with the task until its next transition clears it. It reports whether
// the task was still in status.
func (s *Store) SetLandingWaiting(ctx context.Context, taskID string, status models.TaskStatus, reason string) (bool, error) {
	var set bool
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE tasks SET waiting_code = ?, waiting_reason = ? WHERE id = ? AND status = ?`,
			models.WaitingLanding, reason, taskID, status)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		set = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record the waiting landing of %s: %w", taskID, err)
	}
	s.changed()
	return set, nil
}

// Verifications lists recorded verifications of tasks still VERIFYING, and
// of tasks in AWAITING_APPROVAL whose approval or rejection a person has
// given but the daemon has not yet carried out (phases approved and
// rejected, and landing: approved work waiting to land), in the given phases (all when none is given), oldest first.
// What it returns is durable (see WaitDurable): checks, reviews, merges and
// pushes start from it.
func (s *Store) Verifications(ctx context.Context, phases ...models.VerificationPhase) ([]models.Verification, error) {
	q := `SELECT v.task_id, v.attempt, v.phase, v.source, v.event, v.actor, v.text, v.updated_at FROM verifications v
		JOIN tasks t ON t.id = v.task_id WHERE (t.status = 'VERIFYING'
		OR t.status = 'AWAITING_APPROVAL' AND v.phase IN ('approved', 'rejected', 'landing'))`
	args := []any{}
	if len(phases) > 0 {
		q += " AND v.phase IN (?" + strings.Repeat(",?", len(phases)-1) + ")"
		for _, p := range phases {
			args = append(args, p)
		}
	}
	rows, err := s.rdb.QueryContext(ctx, q+" ORDER BY v.updated_at, v.task_id", args...)
	if err != nil {
		return nil, fmt.Errorf("list verifications: %w", err)
	}
	defer rows.Close()
	var out []models.Verification
	for rows.Next() {
		var v models.Verification
		var at int64
		if err := rows.Scan(&v.TaskID, &v.Attempt, &v.Phase, &v.Source, &v.Event, &v.Actor, &v.Text, &at); err != nil {
			return nil, fmt.Errorf("list verifications: %w", err)
		}
		v.UpdatedAt = fromNanos(at)
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list verifications: %w", err)
	}
	if err := s.WaitDurable(ctx); err != nil {
		return nil, fmt.Errorf("list verifications: %w", err)
	}
	return out, nil
}

// GetVerification returns a task's recorded verification; ok is false when
// none is recorded.
func (s *Store) GetVerification(ctx context.Context, taskID string) (models.Verification, bool, error) {
	return getVerification(ctx, s.rdb, taskID)
}

func getVerification(ctx context.Context, q queryer, taskID string) (models.Verification, bool, error) {
	v := models.Verification{TaskID: taskID}
	var at int64
	err := q.QueryRowContext(ctx, "SELECT attempt, phase, source, event, actor, text, updated_at FROM verifications WHERE task_id = ?",
		taskID).Scan(&v.Attempt, &v.Phase, &v.Source, &v.Event, &v.Actor, &v.Text, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return v, false, nil
	}
	if err != nil {
		return v, false, fmt.Errorf("verification of %s: %w", taskID, err)
	}
	v.UpdatedAt = fromNanos(at)
	return v, true, nil
}

// TaskFeedback lists what reviewers and people said of a task, oldest first.
func (s *Store) TaskFeedback(ctx context.Context, taskID string) ([]models.Feedback, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT id, task_id, source, verdict, text, created_at FROM task_feedback WHERE task_id = +? ORDER BY id", taskID)
	if err != nil {
		return nil, fmt.Errorf("feedback of %s: %w", taskID, err)
	}
	defer rows.Close()
	var out []models.Feedback
	for rows.Next() {
		var f models.Feedback
		var at int64
		if err := rows.Scan(&f.ID, &f.TaskID, &f.Source, &f.Verdict, &f.Text, &at); err != nil {
			return nil, err
		}
		f.CreatedAt = fromNanos(at)
		out = append(out, f)
	}
	return out, rows.Err()
}

// addFeedback records feedback on a task. What people and hooks send is
// validated where it enters; what comes from elsewhere (a reviewer on
// GitHub, an agent's verdict) is cleaned of control characters here.
func (x *txn) addFeedback(taskID string, f models.Feedback) error {
	f.Source = models.CleanLine(f.Source, models.MaxActorLen)
	f.Text = models.CleanText(f.Text, models.MaxDescriptionLen)
	_, err := x.ExecContext(x.ctx, "INSERT INTO task_feedback (task_id, source, verdict, text, created_at) VALUES (?,?,?,?,?)",
		taskID, f.Source, f.Verdict, f.Text, toNanos(x.now))
	return err
}

// errDryRun rolls back a transaction that only validated.
var errDryRun = errors.New("dry run")

// SavePlan validates a plan proposed by a task's agent as one batch (in a
// transaction that is rolled back) and keeps it pending: its subtasks are
// created when the task completes. A pending plan proposed earlier for the
// task is replaced. Entries without dependencies are chained in order when
// no entry names any.
func (s *Store) SavePlan(ctx context.Context, taskID, source string, tasks []models.BatchTask) (models.Plan, error) {
	t, err := s.GetTask(ctx, taskID)
	if err != nil {
		return models.Plan{}, err
	}
	tasks = planEntries(t, source, tasks)
	entries, err := prepareBatch(models.TaskBatch{ProjectID: t.ProjectID, CreatedBy: "plan:" + taskID, Tasks: tasks})
	if err != nil {
		return models.Plan{}, err
	}
	err = s.withTx(ctx, func(tx *sql.Tx) error {
		if _, err := s.newTxn(ctx, tx).createBatch(entries); err != nil {
			return err
		}
		return errDryRun
	})
	if err != nil && !errors.Is(err, errDryRun) {
		return models.Plan{}, fmt.Errorf("plan of task %s: %w", taskID, err)
	}
	p := models.Plan{TaskID: taskID, Source: source, Tasks: tasks, Status: "pending"}
	err = s.withTx(ctx, func(tx *sql.Tx) error {
		now := toNanos(s.now())
		if _, err := tx.ExecContext(ctx, "UPDATE plans SET status = 'superseded', decided_at = ? WHERE task_id = ? AND status = 'pending'",
			now, taskID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, "INSERT INTO plans (task_id, source, tasks, status, created_at) VALUES (?,?,?,?,?)",
			taskID, source, encodeJSONColumn(tasks, "[]"), p.Status, now)
		if err != nil {
			return err
		}
		p.ID, err = res.LastInsertId()
		p.CreatedAt = fromNanos(now)
		return err
	})
	if err != nil {
		return models.Plan{}, fmt.Errorf("save plan of task %s: %w", taskID, err)
	}
	return p, nil
}

// planEntries marks a plan's entries as subtasks of t and chains them when
// none names a dependency.
func planEntries(t models.Task, source string, tasks []models.BatchTask) []models.BatchTask {
	out := make([]models.BatchTask, len(tasks))
	copy(out, tasks)
	chained := true
	for _, bt := range out {
		if len(bt.Dependencies) > 0 {
			chained = false
		}
	}
	for i := range out {
		out[i].ParentTaskID, out[i].IsPlanSubtask, out[i].PlanSource = t.ID, true, source
		if out[i].ProjectID == "" {
			out[i].ProjectID = t.ProjectID
		}
		if chained && out[i].LocalID == "" {
			out[i].LocalID = fmt.Sprintf("step-%d", i+1)
		}
		if chained && i > 0 {
			out[i].Dependencies = []models.BatchDependency{{ID: out[i-1].LocalID}}
		}
	}
	return out
}

// PendingPlan returns a task's pending plan; ok is false when it has none.
func (s *Store) PendingPlan(ctx context.Context, taskID string) (models.Plan, bool, error) {
	return pendingPlan(ctx, s.rdb, taskID)
}

func pendingPlan(ctx context.Context, q queryer, taskID string) (models.Plan, bool, error) {
	p := models.Plan{TaskID: taskID}
	var tasks string
	var at int64
	err := q.QueryRowContext(ctx, "SELECT id, source, tasks, status, created_at FROM plans WHERE task_id = +? AND status = 'pending' ORDER BY id DESC LIMIT 1",
		taskID).Scan(&p.ID, &p.Source, &tasks, &p.Status, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("pending plan of %s: %w", taskID, err)
	}
	p.CreatedAt = fromNanos(at)
	if err := json.Unmarshal([]byte(tasks), &p.Tasks); err != nil {
		return p, false, fmt.Errorf("pending plan of %s: %w", taskID, err)
	}
	return p, true, nil
}

// planEffects creates the pending plan of a task whose work was accepted
// (VERIFY_PASSED, HUMAN_APPROVED, PR_MERGED), in its transaction; a plan
// that no longer holds (a dependency went away) is marked failed, with its
// error and a notice, rather than refusing the completion. Any other way of
// leaving an active status (a failure, a restart, a skip, a stop) discards
// the pending plan: the next attempt proposes its own.
func (x *txn) planEffects(a applied) error {
	accepted := a.event == models.EventVerifyPassed || a.event == models.EventHumanApproved || a.event == models.EventPRMerged
	switch a.event {
	case models.EventVerifyPassed, models.EventHumanApproved, models.EventPRMerged:
	case models.EventAgentFailed, models.EventVerifyFailed, models.EventTimeout, models.EventTimeoutFailed, models.EventMaxRetries,
		models.EventAdminSkip, models.EventAdminStop, models.EventAdminRestart, models.EventPRClosed, models.EventPRUnavailable:
		// The attempt's work was refused or abandoned: so is its plan.
	default:
		// Still the same attempt's work: a pause, a question, a recovery
		// or a start that failed resume it, and its plan with it.
		return nil
	}
	p, ok, err := pendingPlan(x.ctx, x, a.task.ID)
	if err != nil || !ok {
		return err
	}
	if !accepted {
		_, err := x.ExecContext(x.ctx, "UPDATE plans SET status = 'rejected', error = ?, decided_at = ? WHERE id = ?",
			fmt.Sprintf("discarded: the task's attempt ended by %s", a.event), toNanos(x.now), p.ID)
		return err
	}
	entries, err := prepareBatch(models.TaskBatch{ProjectID: a.task.ProjectID, CreatedBy: "plan:" + a.task.ID, Tasks: p.Tasks})
	status, msg := "created", ""
	if err == nil {
		if _, err = x.ExecContext(x.ctx, "SAVEPOINT plan"); err != nil {
			return err
		}
		if _, err = x.createBatch(entries); err != nil {
			if _, rerr := x.ExecContext(x.ctx, "ROLLBACK TO plan"); rerr != nil {
				return rerr
			}
		}
		if _, rerr := x.ExecContext(x.ctx, "RELEASE plan"); rerr != nil {
			return rerr
		}
	}
	if err != nil {
		status, msg = "failed", err.Error()
		key := fmt.Sprintf("plan_failed:%d", p.ID)
		if err := x.s.enqueue(x.ctx, x.tx, key, models.NewPlanFailedNotice(a.task.ProjectID,
			models.PlanFailedNotice{TaskID: a.task.ID, PlanID: p.ID, Error: msg})); err != nil {
			return err
		}
	}
	_, err = x.ExecContext(x.ctx, "UPDATE plans SET status = ?, error = ?, decided_at = ? WHERE id = ?", status, msg, toNanos(x.now), p.ID)
	return err
}

// RecordTaskFailure records a failure found after a task's latest work run
// ended (verification or delivery), for the next attempt's context.
func (s *Store) RecordTaskFailure(ctx context.Context, taskID string, outcome models.RunOutcome, msg string) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE task_runs SET outcome = ?, error = ? WHERE id =
			(SELECT max(id) FROM task_runs WHERE task_id = ? AND kind = 'work')`, outcome, msg, taskID)
		return err
	})
	if err != nil {
		return fmt.Errorf("record failure of task %s: %w", taskID, err)
	}
	return nil
}

// LastWorkRun returns the latest work run of a task; ok is false when it
// has none.
func (s *Store) LastWorkRun(ctx context.Context, taskID string) (models.Run, bool, error) {
	r, err := scanRun(s.rdb.QueryRowContext(ctx, "SELECT "+runColumns+" FROM task_runs WHERE task_id = +? AND kind = 'work' ORDER BY id DESC LIMIT 1", taskID))
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("last run of task %s: %w", taskID, err)
	}
	return r, true, nil
}

// SwitchVerification moves a task's verification from one phase to another
// (compare-and-set on the phase and attempt, the task still VERIFYING),
// with note as its new note: of two people deciding at once, only one
// moves it. It reports whether it did.
func (s *Store) SwitchVerification(ctx context.Context, taskID string, attempt int, from, to models.VerificationPhase,
	note models.VerificationNote) (bool, error) {
	moved, err := s.switchPhase(ctx, models.StatusVerifying, taskID, attempt, from, to, note)
	if err != nil {
		return false, fmt.Errorf("switch verification of %s: %w", taskID, err)
	}
	return moved, nil
}

// SwitchApproval moves the verification of a task waiting in
// AWAITING_APPROVAL for a person's approval of its work from one phase to
// another (compare-and-set on the phase and attempt, the task still
// AWAITING_APPROVAL), with note as its new note: of two people deciding
// at once, only one moves it. It reports whether it did.
func (s *Store) SwitchApproval(ctx context.Context, taskID string, attempt int, from, to models.VerificationPhase,
	note models.VerificationNote) (bool, error) {
	moved, err := s.switchPhase(ctx, models.StatusAwaitingApproval, taskID, attempt, from, to, note)
	if err != nil {
		return false, fmt.Errorf("switch approval of %s: %w", taskID, err)
	}
	return moved, nil
}

// switchPhase moves a task's verification from phase from to phase to if
// its attempt is attempt and the task is in status; it reports whether it
// did.
func (s *Store) switchPhase(ctx context.Context, status models.TaskStatus, taskID string, attempt int, from, to models.VerificationPhase,
	note models.VerificationNote) (bool, error) {
	var moved bool
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE verifications SET phase = ?, event = ?, actor = ?, text = ?, updated_at = ?
			WHERE task_id = ? AND attempt = ? AND phase = ?
			AND (SELECT status FROM tasks WHERE id = ?) = ?`,
			to, note.Event, note.Actor, note.Text, toNanos(s.now()), taskID, attempt, from, taskID, status)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		moved = n == 1
		return err
	})
	if err != nil {
		return false, err
	}
	if moved {
		s.changed()
	}
	return moved, nil
}
