package store

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds the registry of runners (docs/runners.md, "The
// registry"): agentqueued runner processes on other machines, each with
// the hash of its token, its labels, capacity and state, and the agents
// rows that name it in runner_id.

// runnerColumns are a runner's columns and, last, its agents' ids as a
// JSON array (sorted by scanRunner).
const runnerColumns = `id, labels, capacity, state, created_at, last_seen_at, version, address,
	(SELECT json_group_array(a.id) FROM agents a WHERE a.runner_id = runners.id)`

func scanRunner(row scanner) (models.Runner, error) {
	var (
		r              models.Runner
		labels, agents string
		created        int64
		seen           sql.NullInt64
	)
	if err := row.Scan(&r.Name, &labels, &r.Capacity, &r.State, &created, &seen, &r.Version, &r.Address, &agents); err != nil {
		return models.Runner{}, err
	}
	r.CreatedAt, r.LastSeenAt = fromNanos(created), fromNullNanos(seen)
	for _, c := range []struct {
		src string
		dst *[]string
	}{{labels, &r.Labels}, {agents, &r.Agents}} {
		if err := decodeJSONColumn(c.src, c.dst); err != nil {
			return models.Runner{}, fmt.Errorf("runner %s: %w", r.Name, err)
		}
	}
	slices.Sort(r.Agents)
	r.ApplyDefaults()
	return r, nil
}

// validTokenHash reports whether h is a hex SHA-256, as
// models.RunnerTokenHash makes.
func validTokenHash(h string) bool {
	b, err := hex.DecodeString(h)
	return err == nil && len(b) == 32 && h == strings.ToLower(h)
}

// CreateRunner stores a new runner, ACTIVE unless given a state, with the
// hash of its token (models.RunnerTokenHash; the token itself is never
// stored). A name already taken is a conflict. It returns the runner as
// stored, with no agents.
func (s *Store) CreateRunner(ctx context.Context, r models.Runner, tokenHash string) (models.Runner, error) {
	r.ApplyDefaults()
	r.Agents, r.LastSeenAt, r.Version, r.Address = []string{}, nil, "", ""
	if err := r.Validate(); err != nil {
		return models.Runner{}, err
	}
	if !validTokenHash(tokenHash) {
		return models.Runner{}, models.Errorf(models.CodeInvalid, "runner %s: the token's hash must be a hex SHA-256", r.Name)
	}
	r.CreatedAt = s.now().UTC()
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO runners (id, token_hash, labels, capacity, state, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`, r.Name, tokenHash, encodeJSONColumn(r.Labels, "[]"), r.Capacity, r.State,
			toNanos(r.CreatedAt))
		if isUniqueViolation(err) {
			return models.Errorf(models.CodeConflict, "runner %q already exists", r.Name)
		}
		return err
	})
	if err != nil {
		return models.Runner{}, fmt.Errorf("create runner %s: %w", r.Name, err)
	}
	s.changed()
	return r, nil
}

// ListRunners returns every runner with its agents, ordered by name.
func (s *Store) ListRunners(ctx context.Context) ([]models.Runner, error) {
	rs, err := queryAll(ctx, s.rdb, scanRunner, "SELECT "+runnerColumns+" FROM runners ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("list runners: %w", err)
	}
	return rs, nil
}

// GetRunner returns one runner with its agents; an unknown name is
// not_found.
func (s *Store) GetRunner(ctx context.Context, name string) (models.Runner, error) {
	r, err := scanRunner(s.rdb.QueryRowContext(ctx, "SELECT "+runnerColumns+" FROM runners WHERE id = ?", name))
	if errors.Is(err, sql.ErrNoRows) {
		return models.Runner{}, notFound("runner", name)
	}
	if err != nil {
		return models.Runner{}, fmt.Errorf("get runner %s: %w", name, err)
	}
	return r, nil
}

// RunnerByTokenHash returns the runner whose token has this hash
// (models.RunnerTokenHash): the runner a request authenticates as. No
// such runner (a wrong token, or a removed runner's) is not_found, with a
// message that names neither the token nor its hash.
func (s *Store) RunnerByTokenHash(ctx context.Context, tokenHash string) (models.Runner, error) {
	r, err := scanRunner(s.rdb.QueryRowContext(ctx, "SELECT "+runnerColumns+" FROM runners WHERE token_hash = ?", tokenHash))
	if errors.Is(err, sql.ErrNoRows) {
		return models.Runner{}, models.Errorf(models.CodeNotFound, "no runner has this token")
	}
	if err != nil {
		return models.Runner{}, fmt.Errorf("runner by token: %w", err)
	}
	return r, nil
}

// SetRunnerState sets a runner ACTIVE or DRAINING (a DRAINING runner is
// given no new run; those it holds go on) and returns it. Setting the
// state it has changes nothing and is no error.
func (s *Store) SetRunnerState(ctx context.Context, name string, state models.RunnerState) (models.Runner, error) {
	if !state.Valid() {
		return models.Runner{}, models.Errorf(models.CodeInvalid, "state: unknown runner state %s", models.Quote(string(state)))
	}
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE runners SET state = ? WHERE id = ?", state, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return notFound("runner", name)
		}
		return nil
	})
	if err != nil {
		return models.Runner{}, fmt.Errorf("set runner %s %s: %w", name, state, err)
	}
	s.changed()
	return s.GetRunner(ctx, name)
}

// RemoveRunner deletes a runner and its agents in one transaction. It is
// refused (conflict) while one of its agents runs something: an agent
// neither IDLE, PAUSED nor in ERROR, one holding a task, or one with a run
// open. As with RemoveAgent, the past runs of its agents keep their rows
// and the token ledger its usage, and their CLI sessions are forgotten.
// Once it has returned, the runner's token finds no runner.
func (s *Store) RemoveRunner(ctx context.Context, name string) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		var exists bool
		if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM runners WHERE id = ?)", name).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return notFound("runner", name)
		}
		var agent string
		var state models.AgentState
		var task sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT id, state, current_task_id FROM agents WHERE runner_id = ?
			AND (state NOT IN ('IDLE', 'PAUSED', 'ERROR') OR current_task_id IS NOT NULL) ORDER BY id LIMIT 1`, name).
			Scan(&agent, &state, &task)
		if err == nil {
			what := string(state)
			if task.Valid {
				what += " with task " + task.String
			}
			return models.Errorf(models.CodeConflict, "runner %s has agent %s %s: a runner cannot be removed while its "+
				"agents run something (drain it and wait for its runs to end)", name, agent, what)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var run int64
		err = tx.QueryRowContext(ctx, `SELECT r.id, r.task_id, r.agent_id FROM task_runs r JOIN agents a ON a.id = r.agent_id
			WHERE a.runner_id = ? AND r.ended_at IS NULL ORDER BY r.id LIMIT 1`, name).Scan(&run, &task, &agent)
		if err == nil {
			return models.Errorf(models.CodeConflict, "runner %s: agent %s still has run %d of task %s open: try again "+
				"when it has ended", name, agent, run, task.String)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE task_runs SET session_id = '' WHERE session_id != ''
			AND agent_id IN (SELECT id FROM agents WHERE runner_id = ?)`, name); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM agents WHERE runner_id = ?", name); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "DELETE FROM runners WHERE id = ?", name)
		return err
	})
	if err != nil {
		return fmt.Errorf("remove runner %s: %w", name, err)
	}
	s.changed()
	return nil
}

// qTouchRunner records a runner's request: when, with which version,
// from where (TouchRunner, HelloRunner).
const qTouchRunner = "UPDATE runners SET last_seen_at = ?, version = ?, address = ? WHERE id = ?"

// TouchRunner records a runner's request: when it was seen, and the
// version and address it came with (cleaned to one line of at most
// models.MaxShortLen characters: they come from the runner). An unknown
// runner is not_found. The write does not wait for a sync of the log:
// a runner's next request records it again.
func (s *Store) TouchRunner(ctx context.Context, name string, seenAt time.Time, version, address string) error {
	version, address = models.CleanLine(version, models.MaxShortLen), models.CleanLine(address, models.MaxShortLen)
	err := s.withRedoableTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, qTouchRunner, toNanos(seenAt), version, address, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return notFound("runner", name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("touch runner %s: %w", name, err)
	}
	return nil
}

// qOpenRunsByRunner counts the open runs (ended_at NULL, the partial index
// of open runs) of each runner's agents.
const qOpenRunsByRunner = `SELECT a.runner_id AS runner_id, count(*) AS n
	FROM task_runs r INDEXED BY task_runs_open JOIN agents a ON a.id = r.agent_id
	WHERE r.ended_at IS NULL AND a.runner_id IS NOT NULL GROUP BY a.runner_id`

// OpenRunsByRunner counts the runs in progress (open: not ended) of each
// runner's agents, in one query; runners without one are left out.
func (s *Store) OpenRunsByRunner(ctx context.Context) (map[string]int, error) {
	rows, err := s.rdb.QueryContext(ctx, qOpenRunsByRunner)
	if err != nil {
		return nil, fmt.Errorf("open runs by runner: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var (
			name string
			n    int
		)
		if err := rows.Scan(&name, &n); err != nil {
			return nil, fmt.Errorf("open runs by runner: %w", err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("open runs by runner: %w", err)
	}
	return out, nil
}
