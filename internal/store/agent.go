package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// RegisterAgent stores a new agent, IDLE unless given a state.
func (s *Store) RegisterAgent(ctx context.Context, a models.Agent) (models.Agent, error) {
	a.ApplyDefaults()
	if err := a.Validate(); err != nil {
		return models.Agent{}, err
	}
	a.CreatedAt = s.now().UTC()
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO agents (id, name, agent_type, state, created_at, command, args, env,
			max_runtime, idle_timeout, projects, profile, pass_env, heartbeat_timeout) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			a.ID, a.Name, a.AgentType, a.State, toNanos(a.CreatedAt), a.Command, encodeJSONColumn(a.Args, "[]"),
			encodeJSONColumn(a.Env, "{}"), int64(a.MaxRuntime), int64(a.IdleTimeout), encodeJSONColumn(a.Projects, "[]"),
			encodeJSONColumn(a.Profile, "{}"), encodeJSONColumn(a.PassEnv, "[]"), int64(a.HeartbeatTimeout))
		if isUniqueViolation(err) {
			return models.Errorf(models.CodeConflict, "agent %q already exists", a.ID)
		}
		return err
	})
	if err != nil {
		return models.Agent{}, fmt.Errorf("register agent %s: %w", a.ID, err)
	}
	s.changed()
	return a, nil
}

const agentColumns = `id, name, agent_type, state, current_task_id, checkout_path, repo_id, pid, last_heartbeat,
	total_tokens_used, session_tokens_used, created_at, command, args, env, max_runtime, idle_timeout, projects, paused, profile,
	pass_env, rest_until, rest_reason, cli_version, heartbeat_timeout, runner_id`

func scanAgent(row scanner) (models.Agent, error) {
	var (
		a                    models.Agent
		task, checkout, repo sql.NullString
		runner               sql.NullString
		pid, heartbeat, rest sql.NullInt64
		created              int64
		args, env, projects  string
		profile, passEnv     string
		maxRuntime, idle     int64
		heartbeatTimeout     int64
	)
	if err := row.Scan(&a.ID, &a.Name, &a.AgentType, &a.State, &task, &checkout, &repo, &pid, &heartbeat,
		&a.TotalTokensUsed, &a.SessionTokensUsed, &created, &a.Command, &args, &env, &maxRuntime, &idle, &projects, &a.Paused, &profile,
		&passEnv, &rest, &a.RestReason, &a.CLIVersion, &heartbeatTimeout, &runner); err != nil {
		return models.Agent{}, err
	}
	a.CLIWarning = models.CLIVersionWarning(a.AgentType, a.CLIVersion)
	a.CurrentTaskID, a.CheckoutPath, a.RepoID = fromNullString(task), fromNullString(checkout), fromNullString(repo)
	a.RunnerID = runner.String
	if pid.Valid {
		p := int(pid.Int64)
		a.PID = &p
	}
	a.LastHeartbeat = fromNullNanos(heartbeat)
	a.RestUntil = fromNullNanos(rest)
	a.CreatedAt = fromNanos(created)
	a.MaxRuntime, a.IdleTimeout = models.Duration(maxRuntime), models.Duration(idle)
	a.HeartbeatTimeout = models.Duration(heartbeatTimeout)
	for _, c := range []struct {
		src string
		dst any
	}{{args, &a.Args}, {env, &a.Env}, {projects, &a.Projects}, {profile, &a.Profile}, {passEnv, &a.PassEnv}} {
		if err := decodeJSONColumn(c.src, c.dst); err != nil {
			return models.Agent{}, fmt.Errorf("agent %s: %w", a.ID, err)
		}
	}
	return a, nil
}

// GetAgent returns one agent, its rest shown as of now (see
// models.Agent.ShowRest).
func (s *Store) GetAgent(ctx context.Context, id string) (models.Agent, error) {
	a, err := scanAgent(s.rdb.QueryRowContext(ctx, "SELECT "+agentColumns+" FROM agents WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return models.Agent{}, notFound("agent", id)
	}
	if err != nil {
		return models.Agent{}, fmt.Errorf("get agent %s: %w", id, err)
	}
	a.ShowRest(s.now())
	return a, nil
}

// ListAgents returns every agent, ordered by id, their rests shown as of
// now.
func (s *Store) ListAgents(ctx context.Context) ([]models.Agent, error) {
	as, err := queryAll(ctx, s.rdb, scanAgent, "SELECT "+agentColumns+" FROM agents ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	now := s.now()
	for i := range as {
		as[i].ShowRest(now)
	}
	return as, nil
}

// RestAgent records that an agent rests until until, for reason: its
// provider refused work (a rate limit, a usage cap) and no task is claimed
// for it before then (ClaimTask, ClaimReview refuse). A rest that ends
// later than the one recorded replaces it; an earlier one changes nothing.
// The rest ends by itself when its time comes.
func (s *Store) RestAgent(ctx context.Context, id string, until time.Time, reason string) error {
	if reason = strings.TrimSpace(reason); reason == "" {
		return models.Errorf(models.CodeInvalid, "rest of agent %s: a reason is required", id)
	}
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		var exists bool
		if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM agents WHERE id = ?)", id).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return notFound("agent", id)
		}
		_, err := tx.ExecContext(ctx, `UPDATE agents SET rest_until = ?, rest_reason = ?
			WHERE id = ? AND (rest_until IS NULL OR rest_until < ?)`, toNanos(until), reason, id, toNanos(until))
		return err
	})
	if err != nil {
		return fmt.Errorf("rest agent %s: %w", id, err)
	}
	return nil
}

// RestingAgents returns the agents whose rest lasts beyond now, ordered by
// id: the daemon keeps them out of scheduling after a restart.
func (s *Store) RestingAgents(ctx context.Context, now time.Time) ([]models.Agent, error) {
	as, err := queryAll(ctx, s.rdb, scanAgent, "SELECT "+agentColumns+" FROM agents WHERE rest_until > ? ORDER BY id",
		toNanos(now))
	if err != nil {
		return nil, fmt.Errorf("resting agents: %w", err)
	}
	return as, nil
}

// restRefusal is the conflict a claim meets when the agent rests at now;
// nil when it does not.
func restRefusal(a models.Agent, now time.Time) error {
	if !a.Resting(now) {
		return nil
	}
	return models.Errorf(models.CodeConflict, "agent %s rests until %s: %s", a.ID,
		a.RestUntil.UTC().Format(time.RFC3339), a.RestReason)
}

// UpsertAgent registers an agent, or updates the name, type and settings of
// an existing one while keeping its runtime state (the daemon applies the
// agents of its configuration this way at every start).
func (s *Store) UpsertAgent(ctx context.Context, a models.Agent) (models.Agent, error) {
	a.ApplyDefaults()
	a.State = models.AgentIdle
	if err := a.Validate(); err != nil {
		return models.Agent{}, err
	}
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO agents (id, name, agent_type, state, created_at, command, args, env,
			max_runtime, idle_timeout, projects, profile, pass_env, heartbeat_timeout) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)
			ON CONFLICT (id) DO UPDATE SET name = excluded.name, agent_type = excluded.agent_type,
			command = excluded.command, args = excluded.args, env = excluded.env, max_runtime = excluded.max_runtime,
			idle_timeout = excluded.idle_timeout, projects = excluded.projects, profile = excluded.profile,
			pass_env = excluded.pass_env, heartbeat_timeout = excluded.heartbeat_timeout`,
			a.ID, a.Name, a.AgentType, a.State, toNanos(s.now()), a.Command, encodeJSONColumn(a.Args, "[]"),
			encodeJSONColumn(a.Env, "{}"), int64(a.MaxRuntime), int64(a.IdleTimeout), encodeJSONColumn(a.Projects, "[]"),
			encodeJSONColumn(a.Profile, "{}"), encodeJSONColumn(a.PassEnv, "[]"), int64(a.HeartbeatTimeout))
		return err
	})
	if err != nil {
		return models.Agent{}, fmt.Errorf("upsert agent %s: %w", a.ID, err)
	}
	s.changed()
	return s.GetAgent(ctx, a.ID)
}

// SetAgentPaused pauses an agent (it takes no new task; a current run goes
// on) or resumes it; resuming an agent in ERROR returns it to IDLE, and
// resuming ends a rest after a rate limit.
func (s *Store) SetAgentPaused(ctx context.Context, id string, paused bool) (models.Agent, error) {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		// Resuming also clears ERROR and a rest: the person has dealt with
		// their cause.
		res, err := tx.ExecContext(ctx, `UPDATE agents SET paused = ?,
			state = CASE WHEN ? = 0 AND state = 'ERROR' THEN 'IDLE' ELSE state END,
			rest_until = CASE WHEN ? = 0 THEN NULL ELSE rest_until END,
			rest_reason = CASE WHEN ? = 0 THEN '' ELSE rest_reason END WHERE id = ?`, paused, paused, paused, paused, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return notFound("agent", id)
		}
		return nil
	})
	if err != nil {
		return models.Agent{}, fmt.Errorf("pause agent %s: %w", id, err)
	}
	s.changed()
	return s.GetAgent(ctx, id)
}

// RemoveAgent deletes an agent that runs nothing: it is refused while the
// agent is STARTING or BUSY, holds a task or has a run open. Its past runs
// keep their rows, naming it, and the token ledger keeps its usage; their
// CLI sessions are forgotten, so that an agent registered later under the
// same id never resumes them.
func (s *Store) RemoveAgent(ctx context.Context, id string) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		a, err := scanAgent(tx.QueryRowContext(ctx, "SELECT "+agentColumns+" FROM agents WHERE id = ?", id))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("agent", id)
		}
		if err != nil {
			return err
		}
		if a.State == models.AgentStarting || a.State == models.AgentBusy || a.CurrentTaskID != nil {
			what := string(a.State)
			if a.CurrentTaskID != nil {
				what += " with task " + *a.CurrentTaskID
			}
			return models.Errorf(models.CodeConflict, "agent %s is %s: an agent cannot be removed while it runs something "+
				"(pause it and wait for the run to end)", id, what)
		}
		var run int64
		var task string
		err = tx.QueryRowContext(ctx, "SELECT id, task_id FROM task_runs WHERE agent_id = ? AND ended_at IS NULL ORDER BY id LIMIT 1", id).
			Scan(&run, &task)
		if err == nil {
			return models.Errorf(models.CodeConflict, "agent %s still has run %d of task %s open: try again when it has ended", id, run, task)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE task_runs SET session_id = '' WHERE agent_id = ? AND session_id != ''", id); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM agents WHERE id = ? AND state NOT IN ('STARTING', 'BUSY')
			AND current_task_id IS NULL`, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return models.Errorf(models.CodeConflict, "agent %s changed concurrently; not removed", id)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("remove agent %s: %w", id, err)
	}
	return nil
}
