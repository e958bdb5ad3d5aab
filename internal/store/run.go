package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// ClaimTask claims a READY task for an IDLE agent in one transaction: the
// task becomes ASSIGNED (compare-and-set, with its event row), the agent
// STARTING with the task as its current one (the agent's checkout is its
// workspace, so this also locks the workspace), and a run row is written.
// It returns the run and its token, which authorises RPC calls for this
// task only; only the token's hash is stored.
func (s *Store) ClaimTask(ctx context.Context, taskID, agentID string) (models.Run, string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return models.Run{}, "", fmt.Errorf("claim task %s: run token: %w", taskID, err)
	}
	token := hex.EncodeToString(b[:])
	var run models.Run
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		x := s.newTxn(ctx, tx)
		agent, err := scanAgent(x.QueryRowContext(ctx, "SELECT "+agentColumns+" FROM agents WHERE id = ?", agentID))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("agent", agentID)
		}
		if err != nil {
			return err
		}
		if agent.State != models.AgentIdle {
			return models.Errorf(models.CodeConflict, "agent %s is %s, not IDLE", agentID, agent.State)
		}
		if agent.Paused {
			return models.Errorf(models.CodeConflict, "agent %s is paused", agentID)
		}
		if err := restRefusal(agent, x.now); err != nil {
			return err
		}
		if agent.RunnerID != "" {
			// A drain committed after the round read its runner's agents
			// as idle still holds: a drained runner takes no new run.
			var state models.RunnerState
			err := x.QueryRowContext(ctx, "SELECT state FROM runners WHERE id = ?", agent.RunnerID).Scan(&state)
			if errors.Is(err, sql.ErrNoRows) {
				return models.Errorf(models.CodeConflict, "agent %s's runner %s was removed", agentID, agent.RunnerID)
			}
			if err != nil {
				return err
			}
			if state != models.RunnerActive {
				return models.Errorf(models.CodeConflict, "agent %s's runner %s is %s", agentID, agent.RunnerID, state)
			}
		}
		a, err := x.run(change{taskID: taskID, event: models.EventAssigned, expectFrom: models.StatusReady,
			agentID: agentID, actor: "scheduler", reason: "assigned to agent " + agentID})
		if err != nil {
			return err
		}
		if a.duplicate {
			return models.Errorf(models.CodeConflict, "task %s is already ASSIGNED", taskID)
		}
		if _, err := x.ExecContext(ctx, "UPDATE tasks SET prefer_agent_id = '' WHERE id = ? AND prefer_agent_id <> ''", taskID); err != nil {
			return err
		}
		if len(agent.Projects) > 0 && !slices.Contains(agent.Projects, a.task.ProjectID) {
			return models.Errorf(models.CodeConflict, "agent %s does not work on project %s", agentID, a.task.ProjectID)
		}
		if a.task.RunID != "" {
			var st models.WorkflowRunStatus
			if err := x.QueryRowContext(ctx, "SELECT status FROM workflow_runs WHERE id = ?", a.task.RunID).Scan(&st); err != nil {
				return err
			}
			if st == models.RunCancelled {
				return models.Errorf(models.CodeConflict, "task %s belongs to run %s, which was cancelled", taskID, a.task.RunID)
			}
		}
		// A rest that is over is cleared here, at the agent's next use.
		res, err := x.ExecContext(ctx, `UPDATE agents SET state = 'STARTING', current_task_id = ?, pid = NULL,
			rest_until = NULL, rest_reason = '' WHERE id = ? AND state = 'IDLE'`, taskID, agentID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return models.Errorf(models.CodeConflict, "agent %s changed concurrently", agentID)
		}
		var attempt int
		if err := x.QueryRowContext(ctx, "SELECT count(*) + 1 FROM task_runs WHERE task_id = ? AND kind = 'work'", taskID).Scan(&attempt); err != nil {
			return err
		}
		run = models.Run{CLI: agent.AgentType, TaskID: taskID, AgentID: agentID, ProjectID: a.task.ProjectID, Attempt: attempt, Kind: models.RunWork,
			StartedAt: x.now, LastActivityAt: x.now, LeaseGeneration: s.LeaseGeneration()}
		ins, err := x.ExecContext(ctx, `INSERT INTO task_runs (task_id, agent_id, project_id, attempt, token_hash,
			started_at, last_activity_at, cli, lease_generation) VALUES (?,?,?,?,?,?,?,?,?)`,
			taskID, agentID, run.ProjectID, attempt, hashToken(token), toNanos(x.now), toNanos(x.now), agent.AgentType,
			run.LeaseGeneration)
		if err != nil {
			return err
		}
		run.ID, err = ins.LastInsertId()
		return err
	})
	if err != nil {
		return models.Run{}, "", fmt.Errorf("claim task %s for agent %s: %w", taskID, agentID, err)
	}
	s.stateChanged()
	return run, token, nil
}

const runColumns = `id, task_id, agent_id, project_id, attempt, pid, checkout_path, started_at, last_activity_at,
	ended_at, outcome, error, kind, session_id, cli, cli_version, usage, cost_usd, denied_tools, mcp_not_ready, lease_generation`

func scanRun(row scanner) (models.Run, error) {
	var (
		r                         models.Run
		pid                       sql.NullInt64
		started, activity         int64
		ended                     sql.NullInt64
		cost                      sql.NullFloat64
		usage, denied, mcpPending string
	)
	if err := row.Scan(&r.ID, &r.TaskID, &r.AgentID, &r.ProjectID, &r.Attempt, &pid, &r.CheckoutPath, &started,
		&activity, &ended, &r.Outcome, &r.Error, &r.Kind, &r.SessionID, &r.CLI, &r.CLIVersion, &usage, &cost, &denied,
		&mcpPending, &r.LeaseGeneration); err != nil {
		return models.Run{}, err
	}
	for _, c := range []struct {
		src string
		dst any
	}{{usage, &r.Usage}, {denied, &r.DeniedTools}, {mcpPending, &r.MCPNotReady}} {
		if err := decodeJSONColumn(c.src, c.dst); err != nil {
			return models.Run{}, fmt.Errorf("run %d: %w", r.ID, err)
		}
	}
	if cost.Valid {
		r.CostUSD = &cost.Float64
	}
	r.CLIWarning = models.CLIVersionWarning(r.CLI, r.CLIVersion)
	if pid.Valid {
		p := int(pid.Int64)
		r.PID = &p
	}
	r.StartedAt, r.LastActivityAt, r.EndedAt = fromNanos(started), fromNanos(activity), fromNullNanos(ended)
	return r, nil
}

// RunByToken returns the open run a token belongs to. An unknown token, or
// the token of a run that has ended, is refused as unauthorized.
func (s *Store) RunByToken(ctx context.Context, token string) (models.Run, error) {
	r, err := scanRun(s.rdb.QueryRowContext(ctx, "SELECT "+runColumns+" FROM task_runs WHERE token_hash = ?", hashToken(token)))
	if errors.Is(err, sql.ErrNoRows) {
		return models.Run{}, models.Errorf(models.CodeUnauthorized, "unknown run token")
	}
	if err != nil {
		return models.Run{}, fmt.Errorf("look up run token: %w", err)
	}
	if r.EndedAt != nil {
		return models.Run{}, models.Errorf(models.CodeUnauthorized, "the run of this token has ended")
	}
	return r, nil
}

// GetRun returns one run.
func (s *Store) GetRun(ctx context.Context, id int64) (models.Run, error) {
	r, err := scanRun(s.rdb.QueryRowContext(ctx, "SELECT "+runColumns+" FROM task_runs WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return models.Run{}, models.Errorf(models.CodeNotFound, "run %d not found", id)
	}
	if err != nil {
		return models.Run{}, fmt.Errorf("get run %d: %w", id, err)
	}
	return r, nil
}

// OpenRuns returns every run that has not ended, oldest first. What it
// returns is durable (see WaitDurable): the process group of a run it
// lists may be ended for it.
func (s *Store) OpenRuns(ctx context.Context) ([]models.Run, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT "+runColumns+" FROM task_runs WHERE ended_at IS NULL ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("list open runs: %w", err)
	}
	defer rows.Close()
	var out []models.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("list open runs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list open runs: %w", err)
	}
	if err := s.WaitDurable(ctx); err != nil {
		return nil, fmt.Errorf("list open runs: %w", err)
	}
	return out, nil
}

// StartRun records that a claimed run's process started: the run gets its
// pid and checkout, the agent becomes BUSY, and the task AGENT_STARTED →
// IN_PROGRESS, in one transaction.
func (s *Store) StartRun(ctx context.Context, runID int64, pid int, checkoutPath string) (models.TransitionResult, error) {
	return s.StartRunWith(ctx, runID, models.RunStart{PID: pid, CheckoutPath: checkoutPath})
}

// StartRunWith is StartRun recording, in the same transaction, what the
// run's checkout is: its task's branch (branch_name; empty leaves it) and
// the repository of its agent's current checkout (repo_id; nil leaves
// it, empty clears it).
func (s *Store) StartRunWith(ctx context.Context, runID int64, st models.RunStart) (models.TransitionResult, error) {
	var pid *int // a run on a runner has no process of this machine
	if st.PID > 0 {
		pid = &st.PID
	}
	checkoutPath := st.CheckoutPath
	var out models.TransitionResult
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		x := s.newTxn(ctx, tx)
		r, current, err := currentRun(x, runID)
		if err != nil {
			return err
		}
		if !current {
			return models.Errorf(models.CodeConflict, "run %d is no longer its task's current run", runID)
		}
		if r.Kind == models.RunWork {
			a, err := x.run(change{taskID: r.TaskID, event: models.EventAgentStarted, expectFrom: models.StatusAssigned,
				actor: r.AgentID, reason: fmt.Sprintf("run %d started (attempt %d)", runID, r.Attempt)})
			if err != nil {
				return err
			}
			out = models.TransitionResult{Task: a.task, From: a.from, To: a.task.Status, Duplicate: a.duplicate}
			if err := s.notify(ctx, tx, a, nil, models.EventAgentStarted, "", r.AgentID); err != nil {
				return err
			}
		}
		if _, err := x.ExecContext(ctx, "UPDATE task_runs SET pid = ?, checkout_path = ?, last_activity_at = ? WHERE id = ?",
			pid, checkoutPath, toNanos(x.now), runID); err != nil {
			return err
		}
		if st.Branch != "" {
			if _, err := x.ExecContext(ctx, "UPDATE tasks SET branch_name = ? WHERE id = ?", st.Branch, r.TaskID); err != nil {
				return err
			}
		}
		if st.RepoID != nil {
			if _, err := x.ExecContext(ctx, "UPDATE agents SET repo_id = ? WHERE id = ?", emptyToNull(*st.RepoID), r.AgentID); err != nil {
				return err
			}
		}
		_, err = x.ExecContext(ctx, "UPDATE agents SET state = 'BUSY', pid = ?, checkout_path = ?, last_heartbeat = ? WHERE id = ?",
			pid, checkoutPath, toNanos(x.now), r.AgentID)
		return err
	})
	if err != nil {
		return models.TransitionResult{}, fmt.Errorf("start run %d: %w", runID, err)
	}
	s.stateChanged()
	return out, nil
}

// currentRun returns an open run that is still its task's current one: its
// agent holds the task and no later run of the task exists. A run being
// replaced (stopped, its task restarted elsewhere) may not act on the task.
func currentRun(x *txn, runID int64) (models.Run, bool, error) {
	r, err := openRun(x, runID)
	if err != nil {
		return r, false, err
	}
	var latest int64
	var holder sql.NullString
	if err := x.QueryRowContext(x.ctx, "SELECT max(id) FROM task_runs WHERE task_id = +? AND kind = +?", r.TaskID, r.Kind).Scan(&latest); err != nil {
		return r, false, err
	}
	if err := x.QueryRowContext(x.ctx, "SELECT current_task_id FROM agents WHERE id = ?", r.AgentID).Scan(&holder); err != nil {
		return r, false, err
	}
	return r, latest == runID && holder.String == r.TaskID, nil
}

func openRun(x *txn, runID int64) (models.Run, error) {
	r, err := scanRun(x.QueryRowContext(x.ctx, "SELECT "+runColumns+" FROM task_runs WHERE id = ?", runID))
	if errors.Is(err, sql.ErrNoRows) {
		return models.Run{}, models.Errorf(models.CodeNotFound, "run %d not found", runID)
	}
	if err != nil {
		return models.Run{}, err
	}
	if r.EndedAt != nil {
		return models.Run{}, models.Errorf(models.CodeConflict, "run %d has ended (%s)", runID, r.Outcome)
	}
	return r, nil
}

// TouchRun records activity (output or an RPC call) of an open run.
func (s *Store) TouchRun(ctx context.Context, runID int64) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		now := toNanos(s.now())
		res, err := tx.ExecContext(ctx, "UPDATE task_runs SET last_activity_at = ? WHERE id = ? AND ended_at IS NULL", now, runID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return models.Errorf(models.CodeConflict, "run %d is not open", runID)
		}
		_, err = tx.ExecContext(ctx, "UPDATE agents SET last_heartbeat = ? WHERE id = (SELECT agent_id FROM task_runs WHERE id = ?)", now, runID)
		return err
	})
	if err != nil {
		return fmt.Errorf("touch run %d: %w", runID, err)
	}
	return nil
}

// FinishRun ends a run in one transaction: the task event (if any) with its
// effects, the run row closed, and the agent freed (IDLE, no task, no pid).
func (s *Store) FinishRun(ctx context.Context, end models.RunEnd) (models.TransitionResult, error) {
	var out models.TransitionResult
	var changed bool
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		x := s.newTxn(ctx, tx)
		r, current, err := currentRun(x, end.RunID)
		if err != nil {
			return err
		}
		if current {
			t, err := getTask(ctx, x, r.TaskID)
			if err != nil {
				return err
			}
			if t.Status == models.StatusWaitingInput {
				// The run ends while its question waits (the daemon stops,
				// the agent's CLI gave up on the call, its process ended):
				// the question stays open and the task waits on for it
				// without a run, holding no agent; the answer runs it
				// again. Nothing the run reported is the task's outcome.
				if err := x.runEndedWaiting(end.RunID); err != nil {
					return err
				}
				end.Event, end.Result, end.Verification = "", nil, nil
				out = models.TransitionResult{Task: t, From: t.Status, To: t.Status}
			}
		}
		if !current {
			end.Event = "" // the task has moved on to another run: only close this one
		} else {
			if end.Result != nil {
				if err := saveResult(ctx, x, r.TaskID, end.RunID, *end.Result, x.now); err != nil {
					return fmt.Errorf("save the result: %w", err)
				}
			}
			if end.Verification != nil {
				if err := setVerification(ctx, x, *end.Verification, x.now); err != nil {
					return fmt.Errorf("record the verification: %w", err)
				}
				changed = true
			}
		}
		if end.Event != "" {
			a, err := x.run(change{taskID: r.TaskID, event: end.Event, expectFrom: end.ExpectFrom, reason: end.Reason,
				actor: r.AgentID, resumeAfter: end.ResumeAfter})
			if err != nil {
				return err
			}
			out = models.TransitionResult{Task: a.task, From: a.from, To: a.task.Status, Duplicate: a.duplicate,
				Promoted: x.promoted, Blocked: x.blocked, Reopened: x.reopened}
			if !a.duplicate {
				if err := s.notify(ctx, tx, a, x.blocked, end.Event, end.Reason, r.AgentID); err != nil {
					return err
				}
			}
		}
		if _, err := x.ExecContext(ctx, "UPDATE task_runs SET ended_at = ?, outcome = ?, error = ? WHERE id = ?",
			toNanos(x.now), end.Outcome, end.Error, end.RunID); err != nil {
			return err
		}
		x.observeRun(ObservedRun{ProjectID: r.ProjectID, AgentID: r.AgentID, Kind: r.Kind, Outcome: end.Outcome})
		if err := x.recordAgentTime(r.ProjectID, toNanos(r.StartedAt), toNanos(x.now)); err != nil {
			return err
		}
		state := models.AgentIdle
		if end.AgentError != "" {
			state = models.AgentError
		}
		_, err = x.ExecContext(ctx, `UPDATE agents SET state = ?, current_task_id = NULL, pid = NULL
			WHERE id = ? AND current_task_id = ?`, state, r.AgentID, r.TaskID)
		changed = true
		return err
	})
	if err != nil {
		return models.TransitionResult{}, fmt.Errorf("finish run %d: %w", end.RunID, err)
	}
	if changed {
		s.changed()
	}
	return out, nil
}

// SchedulingState reads what one scheduling round needs before its READY
// tasks (see ReadyTasks): the projects with their usage in the window
// [now-window, now], the tasks in running statuses split into those that
// hold a slot and those that wait for a person or a pull request, the
// agents, and the window's token use. Its cost grows with running work and
// agents, not with history or the READY backlog: the window's completions
// and agent time are read from usage buckets (see readUsage).
func (s *Store) SchedulingState(ctx context.Context, now time.Time, window time.Duration) (models.SchedulingState, error) {
	st := models.SchedulingState{Now: now}
	// Statements the transaction found unprepared are prepared once it has
	// ended (see readTx).
	defer s.rdb.cache.fill(ctx)
	rtx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return st, fmt.Errorf("read scheduling state: %w", err)
	}
	defer rtx.Rollback() //nolint:errcheck // read-only
	tx := readTx{tx: rtx, c: s.rdb.cache}
	fail := func(what string, err error) (models.SchedulingState, error) {
		return models.SchedulingState{}, fmt.Errorf("read scheduling state: %s: %w", what, err)
	}

	projects, err := queryAll(ctx, tx, scanProject, "SELECT "+projectColumns+projectFrom+" ORDER BY p.id")
	if err != nil {
		return fail("projects", err)
	}
	byID := map[string]*models.ProjectUsage{}
	for _, p := range projects {
		st.Projects = append(st.Projects, models.ProjectUsage{Project: p})
	}
	for i := range st.Projects {
		byID[st.Projects[i].Project.ID] = &st.Projects[i]
	}
	if err := readUsage(ctx, tx, now, window, byID); err != nil {
		return fail("usage", err)
	}
	var slot bool
	scanRunning := func(row scanner) (models.Task, error) { return scanTask(withExtra{row, []any{&slot}}) }
	rows, err := tx.QueryContext(ctx, qSlotHolders)
	if err != nil {
		return fail("running tasks", err)
	}
	st.Running, st.Waiting = []models.Task{}, []models.Task{}
	for rows.Next() {
		t, err := scanRunning(rows)
		if err != nil {
			rows.Close()
			return fail("running tasks", err)
		}
		if !slot {
			st.Waiting = append(st.Waiting, t)
			continue
		}
		st.Running = append(st.Running, t)
		if p := byID[t.ProjectID]; p != nil {
			p.Running++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail("running tasks", err)
	}
	var next sql.NullInt64
	if err := tx.QueryRowContext(ctx, qNextNotBefore, toNanos(now)).Scan(&next); err != nil {
		return fail("next not_before", err)
	}
	st.NextNotBefore = fromNullNanos(next)
	if st.Agents, err = queryAll(ctx, tx, scanAgent, "SELECT "+agentColumns+" FROM agents ORDER BY id"); err != nil {
		return fail("agents", err)
	}
	// Runners' labels and capacities, for their agents (few rows).
	if st.Runners, err = queryAll(ctx, tx, scanRunner, "SELECT "+runnerColumns+" FROM runners ORDER BY id"); err != nil {
		return fail("runners", err)
	}
	st.IdleAgents = idleAgents(st.Agents, st.Runners)
	if st.TokensInWindow, err = tokensInWindow(ctx, tx, now, window); err != nil {
		return fail("tokens", err)
	}
	if err := tx.QueryRowContext(ctx, qReadyGeneration).Scan(&st.ReadyGeneration); err != nil {
		return fail("ready generation", err)
	}
	return st, nil
}

// idleAgents returns the agents that may take a run now, in agents'
// order: IDLE, not paused, and not on a DRAINING runner (docs/runners.md).
func idleAgents(agents []models.Agent, runners []models.Runner) []models.Agent {
	draining := map[string]bool{}
	for _, r := range runners {
		if r.State != models.RunnerActive {
			draining[r.Name] = true
		}
	}
	idle := []models.Agent{}
	for _, a := range agents {
		if a.State == models.AgentIdle && !a.Paused && (a.RunnerID == "" || !draining[a.RunnerID]) {
			idle = append(idle, a)
		}
	}
	return idle
}

// withExtra scans a row into the destinations given, then into extra.
type withExtra struct {
	row   scanner
	extra []any
}

func (w withExtra) Scan(dest ...any) error { return w.row.Scan(append(dest, w.extra...)...) }

// queryAll runs q and scans every row with scan.
func queryAll[T any](ctx context.Context, q queryer, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// FreeOrphanAgents returns to IDLE every agent that holds a task without an
// open run (left by a daemon that died between the two), and returns their
// ids.
func (s *Store) FreeOrphanAgents(ctx context.Context) ([]string, error) {
	var freed []string
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id FROM agents WHERE state IN ('STARTING', 'BUSY')
			AND id NOT IN (SELECT agent_id FROM task_runs WHERE ended_at IS NULL) ORDER BY id`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			freed = append(freed, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range freed {
			if _, err := tx.ExecContext(ctx, "UPDATE agents SET state = 'IDLE', current_task_id = NULL, pid = NULL WHERE id = ?", id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("free orphan agents: %w", err)
	}
	if len(freed) > 0 {
		s.changed()
	}
	return freed, nil
}

// LastRunError returns the failure text of a task's latest ended run when that
// run failed (failed, timed out, could not start, or could not be
// delivered), or "" otherwise.
func (s *Store) LastRunError(ctx context.Context, taskID string) (string, error) {
	var msg string
	var outcome models.RunOutcome
	err := s.rdb.QueryRowContext(ctx, "SELECT error, outcome FROM task_runs WHERE task_id = ? AND kind = 'work' AND ended_at IS NOT NULL ORDER BY id DESC LIMIT 1", taskID).
		Scan(&msg, &outcome)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("last run error of task %s: %w", taskID, err)
	}
	switch outcome {
	case models.RunOutcomeFailed, models.RunOutcomeTimeout, models.RunOutcomeExecutionError, models.RunOutcomeDeliverFailed:
		return msg, nil
	}
	return "", nil
}

// RecordRunFailure records a failure found after a run ended (its work
// could not be delivered), for the next attempt's prompt.
func (s *Store) RecordRunFailure(ctx context.Context, runID int64, outcome models.RunOutcome, msg string) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE task_runs SET outcome = ?, error = ? WHERE id = ?", outcome, msg, runID)
		return err
	})
	if err != nil {
		return fmt.Errorf("record failure of run %d: %w", runID, err)
	}
	return nil
}
