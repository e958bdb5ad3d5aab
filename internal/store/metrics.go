package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// The reads of a metrics scrape: each is one statement over an index (or
// a small table), so that a scrape costs little however long the history.
const (
	// qTaskStatusCounts counts the tasks by project and status (the
	// covering index of both) and finds, for the statuses a task leaves by
	// itself or by a person's answer, the oldest change into them (the
	// status index: the rows of finished tasks, the bulk of a long
	// history, are not read).
	qTaskStatusCounts = `SELECT c.project_id, c.status, c.n, o.oldest
		FROM (SELECT project_id, status, count(*) AS n FROM tasks GROUP BY project_id, status) c
		LEFT JOIN (SELECT project_id, status, min(updated_at) AS oldest FROM tasks INDEXED BY tasks_status
			WHERE status IN ('READY', 'ASSIGNED', 'IN_PROGRESS', 'WAITING_INPUT', 'PAUSED', 'VERIFYING',
				'AWAITING_APPROVAL', 'FAILED')
			GROUP BY project_id, status) o ON o.project_id = c.project_id AND o.status = c.status
		ORDER BY c.project_id, c.status`
	qAgentStates = "SELECT id, state, paused FROM agents"
	// qOutboxBacklog reads the partial index of undelivered notices.
	qOutboxBacklog = "SELECT count(*), min(created_at) FROM outbox WHERE delivered_at IS NULL"
	// qRunUsageSince sums the runs that ended from a time on (the ended_at
	// index) and the runs still open (the partial index of open runs), by
	// project, agent and the model of the agent's profile. Agent time is
	// the part of each run inside [since, now].
	qRunUsageSince = `SELECT r.project_id, r.agent_id, coalesce(json_extract(a.profile, '$.model'), ''), count(*),
		coalesce(sum(json_extract(r.usage, '$.input_tokens')), 0), coalesce(sum(json_extract(r.usage, '$.output_tokens')), 0),
		coalesce(sum(json_extract(r.usage, '$.cache_read_tokens')), 0), coalesce(sum(json_extract(r.usage, '$.cache_write_tokens')), 0),
		coalesce(sum(r.cost_usd), 0), coalesce(sum(max(min(coalesce(r.ended_at, ?2), ?2) - max(r.started_at, ?1), 0)), 0)
		FROM (SELECT project_id, agent_id, usage, cost_usd, started_at, ended_at FROM task_runs INDEXED BY task_runs_ended
				WHERE ended_at >= ?1
			UNION ALL
			SELECT project_id, agent_id, usage, cost_usd, started_at, ended_at FROM task_runs INDEXED BY task_runs_open
				WHERE ended_at IS NULL) r
		LEFT JOIN agents a ON a.id = r.agent_id
		GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`
	qProjectTokens = "SELECT id, total_tokens_used, budget_limit FROM projects ORDER BY id"
	// qRunnerActivity reads each runner's state and when it was last seen
	// (the small runners table) with its open runs (qOpenRunsByRunner).
	qRunnerActivity = `SELECT r.id, r.state, r.last_seen_at, coalesce(o.n, 0)
		FROM runners r LEFT JOIN (` + qOpenRunsByRunner + `) o ON o.runner_id = r.id ORDER BY r.id`
)

// StatusCount is how many tasks of a project are in a status.
type StatusCount struct {
	ProjectID string
	Status    models.TaskStatus
	Count     int
	// Oldest is the earliest last change of these tasks, for the statuses
	// that are not an end or a wait for dependencies (not DEFINED,
	// COMPLETED or BLOCKED); zero for those.
	Oldest time.Time
}

// TaskStatusCounts counts the tasks by project and status, with the
// oldest of the active ones, in one query.
func (s *Store) TaskStatusCounts(ctx context.Context) ([]StatusCount, error) {
	rows, err := s.rdb.QueryContext(ctx, qTaskStatusCounts)
	if err != nil {
		return nil, fmt.Errorf("task status counts: %w", err)
	}
	defer rows.Close()
	var out []StatusCount
	for rows.Next() {
		var (
			c      StatusCount
			oldest sql.NullInt64
		)
		if err := rows.Scan(&c.ProjectID, &c.Status, &c.Count, &oldest); err != nil {
			return nil, fmt.Errorf("task status counts: %w", err)
		}
		if oldest.Valid {
			c.Oldest = fromNanos(oldest.Int64)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("task status counts: %w", err)
	}
	return out, nil
}

// AgentState is one agent's state, for metrics.
type AgentState struct {
	ID    string
	State models.AgentState
	// Paused is set when a person paused the agent (it takes no task).
	Paused bool
}

// AgentStates reads every agent's state in one query.
func (s *Store) AgentStates(ctx context.Context) ([]AgentState, error) {
	rows, err := s.rdb.QueryContext(ctx, qAgentStates)
	if err != nil {
		return nil, fmt.Errorf("agent states: %w", err)
	}
	defer rows.Close()
	var out []AgentState
	for rows.Next() {
		var a AgentState
		if err := rows.Scan(&a.ID, &a.State, &a.Paused); err != nil {
			return nil, fmt.Errorf("agent states: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("agent states: %w", err)
	}
	return out, nil
}

// OutboxBacklog is the notices written and not yet delivered.
type OutboxBacklog struct {
	Count int
	// Oldest is when the oldest of them was written; zero when Count is 0.
	Oldest time.Time
}

// OutboxBacklog reads how many notices wait for delivery and since when,
// in one query over the index of undelivered notices.
func (s *Store) OutboxBacklog(ctx context.Context) (OutboxBacklog, error) {
	var (
		b      OutboxBacklog
		oldest sql.NullInt64
	)
	if err := s.rdb.QueryRowContext(ctx, qOutboxBacklog).Scan(&b.Count, &oldest); err != nil {
		return b, fmt.Errorf("outbox backlog: %w", err)
	}
	if oldest.Valid {
		b.Oldest = fromNanos(oldest.Int64)
	}
	return b, nil
}

// RunUsage is the runs of one project, agent and model in a window.
type RunUsage struct {
	ProjectID string
	AgentID   string
	// Model is the model of the agent's profile, "" when it names none.
	Model  string
	Runs   int
	Tokens models.RunTokens
	// CostUSD is the cost the CLIs reported (0 for those that report none).
	CostUSD float64
	// Busy is the agent time of these runs inside the window.
	Busy time.Duration
}

// RunUsageSince sums the runs that ended in [since, now] or are still
// open, by project, agent and model, in one query over the runs' indexes.
// A run's tokens count whole; its agent time only inside the window.
func (s *Store) RunUsageSince(ctx context.Context, since, now time.Time) ([]RunUsage, error) {
	rows, err := s.rdb.QueryContext(ctx, qRunUsageSince, toNanos(since), toNanos(now))
	if err != nil {
		return nil, fmt.Errorf("run usage: %w", err)
	}
	defer rows.Close()
	var out []RunUsage
	for rows.Next() {
		var (
			u    RunUsage
			busy int64
		)
		if err := rows.Scan(&u.ProjectID, &u.AgentID, &u.Model, &u.Runs, &u.Tokens.Input, &u.Tokens.Output,
			&u.Tokens.CacheRead, &u.Tokens.CacheWrite, &u.CostUSD, &busy); err != nil {
			return nil, fmt.Errorf("run usage: %w", err)
		}
		u.Busy = time.Duration(busy)
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("run usage: %w", err)
	}
	return out, nil
}

// ProjectTokens is a project's token use since its creation against its
// budget.
type ProjectTokens struct {
	ProjectID string
	Total     int64
	// Limit is budget_limit; nil means unlimited.
	Limit *int64
}

// ProjectTokens reads every project's total token use and budget in one
// query.
func (s *Store) ProjectTokens(ctx context.Context) ([]ProjectTokens, error) {
	rows, err := s.rdb.QueryContext(ctx, qProjectTokens)
	if err != nil {
		return nil, fmt.Errorf("project tokens: %w", err)
	}
	defer rows.Close()
	var out []ProjectTokens
	for rows.Next() {
		var (
			p     ProjectTokens
			limit sql.NullInt64
		)
		if err := rows.Scan(&p.ProjectID, &p.Total, &limit); err != nil {
			return nil, fmt.Errorf("project tokens: %w", err)
		}
		if limit.Valid {
			p.Limit = &limit.Int64
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("project tokens: %w", err)
	}
	return out, nil
}

// FileSizes returns the size in bytes of the database file and of its
// write-ahead log (0 when there is none).
func (s *Store) FileSizes() (db, wal int64, err error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0, 0, fmt.Errorf("database size: %w", err)
	}
	db = fi.Size()
	if fi, err = os.Stat(s.path + "-wal"); err == nil {
		wal = fi.Size()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return 0, 0, fmt.Errorf("database size: %w", err)
	}
	return db, wal, nil
}

// RunnerActivity is one runner's state, when it was last seen and its runs
// in progress, for metrics.
type RunnerActivity struct {
	Name  string
	State models.RunnerState
	// LastSeen is its last request the database holds (written at most
	// once a minute while it polls); zero before its first.
	LastSeen time.Time
	// Runs counts its agents' open runs.
	Runs int
}

// RunnerActivity reads every runner's state, last sighting and runs in
// progress, by name, in one query.
func (s *Store) RunnerActivity(ctx context.Context) ([]RunnerActivity, error) {
	rows, err := s.rdb.QueryContext(ctx, qRunnerActivity)
	if err != nil {
		return nil, fmt.Errorf("runner activity: %w", err)
	}
	defer rows.Close()
	var out []RunnerActivity
	for rows.Next() {
		var (
			r    RunnerActivity
			seen sql.NullInt64
		)
		if err := rows.Scan(&r.Name, &r.State, &seen, &r.Runs); err != nil {
			return nil, fmt.Errorf("runner activity: %w", err)
		}
		if seen.Valid {
			r.LastSeen = fromNanos(seen.Int64)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("runner activity: %w", err)
	}
	return out, nil
}
