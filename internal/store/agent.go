package store

import (
	"context"
	"database/sql"
	"fmt"

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
		_, err := tx.ExecContext(ctx, `INSERT INTO agents (id, name, agent_type, state, created_at) VALUES (?,?,?,?,?)`,
			a.ID, a.Name, a.AgentType, a.State, toNanos(a.CreatedAt))
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

// ListAgents returns every agent, ordered by id.
func (s *Store) ListAgents(ctx context.Context) ([]models.Agent, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT id, name, agent_type, state, current_task_id, checkout_path, repo_id,
		pid, last_heartbeat, total_tokens_used, session_tokens_used, created_at FROM agents ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	defer rows.Close()
	out := []models.Agent{}
	for rows.Next() {
		var (
			a                    models.Agent
			task, checkout, repo sql.NullString
			pid                  sql.NullInt64
			heartbeat            sql.NullInt64
			created              int64
		)
		if err := rows.Scan(&a.ID, &a.Name, &a.AgentType, &a.State, &task, &checkout, &repo, &pid, &heartbeat,
			&a.TotalTokensUsed, &a.SessionTokensUsed, &created); err != nil {
			return nil, fmt.Errorf("list agents: %w", err)
		}
		a.CurrentTaskID, a.CheckoutPath, a.RepoID = fromNullString(task), fromNullString(checkout), fromNullString(repo)
		if pid.Valid {
			p := int(pid.Int64)
			a.PID = &p
		}
		a.LastHeartbeat = fromNullNanos(heartbeat)
		a.CreatedAt = fromNanos(created)
		out = append(out, a)
	}
	return out, rows.Err()
}
