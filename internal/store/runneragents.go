package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// RunnerAgentID is the id the daemon knows a runner's agent by:
// RUNNER/AGENT, so that two runners may each have an agent of one name.
func RunnerAgentID(runner, agent string) string { return runner + "/" + agent }

// HelloRunner records a runner's hello in one transaction: when it was
// seen, with which version and from where, and its agents — each one
// registered or updated as RUNNER/NAME (its runtime state kept, as
// UpsertAgent keeps a local agent's), and each agent of the runner it no
// longer announces removed when it holds nothing (one that still holds a
// task or an open run is kept until it does not). It returns the ids of
// the runner's agents, in order. An unknown runner is not_found.
func (s *Store) HelloRunner(ctx context.Context, name string, hello models.RunnerHello, seenAt time.Time,
	address string) ([]string, error) {
	if err := hello.Validate(); err != nil {
		return nil, err
	}
	version, address := models.CleanLine(hello.Version, models.MaxShortLen), models.CleanLine(address, models.MaxShortLen)
	var ids []string
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, qTouchRunner, toNanos(seenAt), version, address, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return notFound("runner", name)
		}
		announced := map[string]bool{}
		for _, ra := range hello.Agents {
			// Its settings are checked as a local agent's (its type and
			// profile by the hello's Validate); how it is started (its
			// command) is the runner's.
			id := RunnerAgentID(name, ra.Name)
			a := models.Agent{ID: id, Name: id, AgentType: ra.AgentType, State: models.AgentIdle,
				AgentSettings: models.AgentSettings{MaxRuntime: ra.MaxRuntime, IdleTimeout: ra.IdleTimeout,
					HeartbeatTimeout: ra.HeartbeatTimeout, Projects: ra.Projects, Profile: ra.Profile}}
			a.ApplyDefaults()
			if err := a.AgentSettings.Validate(); err != nil {
				return models.WrapError(models.CodeInvalid, err, "agent %s: %s", ra.Name, models.ErrorMessageOf(err))
			}
			announced[a.ID] = true
			// An agent of this id that is the daemon's own, or another
			// runner's, is not taken over.
			var owner sql.NullString
			err := tx.QueryRowContext(ctx, "SELECT runner_id FROM agents WHERE id = ?", a.ID).Scan(&owner)
			switch {
			case err == nil && owner.String != name:
				return models.Errorf(models.CodeConflict, "agent %s: the daemon already has an agent of that name", a.ID)
			case err != nil && err != sql.ErrNoRows:
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO agents (id, name, agent_type, state, created_at, max_runtime,
				idle_timeout, projects, profile, heartbeat_timeout, runner_id) VALUES (?,?,?,?,?,?,?,?,?,?,?)
				ON CONFLICT (id) DO UPDATE SET agent_type = excluded.agent_type, max_runtime = excluded.max_runtime,
				idle_timeout = excluded.idle_timeout, projects = excluded.projects, profile = excluded.profile,
				heartbeat_timeout = excluded.heartbeat_timeout`,
				a.ID, a.Name, a.AgentType, a.State, toNanos(seenAt), int64(a.MaxRuntime), int64(a.IdleTimeout),
				encodeJSONColumn(a.Projects, "[]"), encodeJSONColumn(a.Profile, "{}"), int64(a.HeartbeatTimeout), name); err != nil {
				return err
			}
		}
		existing, err := queryIDs(ctx, tx, "SELECT id FROM agents WHERE runner_id = ? ORDER BY id", name)
		if err != nil {
			return err
		}
		for _, id := range existing {
			if announced[id] {
				ids = append(ids, id)
				continue
			}
			// Gone from the runner's configuration: removed unless it
			// still holds something, as RemoveAgent would refuse; its past
			// runs keep their rows, and its CLI sessions are forgotten.
			var free bool
			if err := tx.QueryRowContext(ctx, `SELECT state IN ('IDLE', 'PAUSED', 'ERROR') AND current_task_id IS NULL
				AND NOT EXISTS (SELECT 1 FROM task_runs WHERE agent_id = ?1 AND ended_at IS NULL) FROM agents WHERE id = ?1`,
				id).Scan(&free); err != nil {
				return err
			}
			if !free {
				ids = append(ids, id)
				continue
			}
			if _, err := tx.ExecContext(ctx, "UPDATE task_runs SET session_id = '' WHERE agent_id = ? AND session_id != ''", id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "DELETE FROM agents WHERE id = ?", id); err != nil {
				return err
			}
		}
		slices.Sort(ids)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hello of runner %s: %w", name, err)
	}
	s.changed()
	return ids, nil
}
