package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Defaults of hook queries.
const (
	DefaultHookQueryRows  = 20
	DefaultHookQuerySince = 24 * time.Hour
)

// HookQuery runs one of the named read-only queries of db_query steps
// (models.HookQueries) over project projectID and returns its rows as a
// JSON array with their number. Hooks never send SQL: each name is a fixed
// statement here, bound to the hook's project. What it returns is durable
// (see WaitDurable).
func (s *Store) HookQuery(ctx context.Context, projectID string, step models.HookStep) (string, int, error) {
	limit := step.MaxCount
	if limit <= 0 {
		limit = DefaultHookQueryRows
	}
	since := DefaultHookQuerySince
	if step.Since != "" {
		d, err := time.ParseDuration(step.Since)
		if err != nil || d <= 0 {
			return "", 0, models.Errorf(models.CodeInvalid, "since: %q is not a positive duration", step.Since)
		}
		since = d
	}
	from := toNanos(s.now().Add(-since))
	var (
		q    string
		args []any
	)
	switch step.Query {
	case "tasks":
		statuses, err := models.ResolveStatusSet(step.Status)
		if err != nil {
			return "", 0, err
		}
		marks := strings.TrimSuffix(strings.Repeat("?,", len(statuses)), ",")
		q = `SELECT id, title, status, priority, kind, status_reason, retry_count, updated_at FROM tasks
			WHERE project_id = ? AND status IN (` + marks + `) ORDER BY priority, submission_seq LIMIT ?`
		args = append(args, projectID)
		for _, st := range statuses {
			args = append(args, string(st))
		}
		args = append(args, limit)
	case "failed_tasks":
		q = `SELECT id, title, status, status_reason, retry_count, max_retries, updated_at FROM tasks
			WHERE project_id = ? AND status IN ('FAILED', 'BLOCKED') AND updated_at >= ? ORDER BY updated_at DESC, id LIMIT ?`
		args = []any{projectID, from, limit}
	case "recent_events":
		q = `SELECT e.task_id, t.title, e.from_status, e.to_status, e.event, e.reason, e.actor, e.created_at
			FROM task_events e JOIN tasks t ON t.id = e.task_id
			WHERE t.project_id = ? AND e.created_at >= ? ORDER BY e.id DESC LIMIT ?`
		args = []any{projectID, from, limit}
	case "recent_runs":
		q = `SELECT id, task_id, agent_id, attempt, started_at, ended_at, outcome, error FROM task_runs
			WHERE project_id = ? AND started_at >= ? ORDER BY id DESC LIMIT ?`
		args = []any{projectID, from, limit}
	case "token_usage":
		q = `SELECT CASE WHEN hook_run_id != '' THEN 'hooks' ELSE 'tasks' END AS source,
			sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
			sum(cache_read_tokens + cache_write_tokens) AS cache_tokens,
			sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens) AS total_tokens
			FROM token_ledger WHERE project_id = ? AND created_at >= ? GROUP BY 1 ORDER BY 1 LIMIT ?`
		args = []any{projectID, from, limit}
	case "task_counts":
		q = `SELECT status, count(*) AS tasks FROM tasks WHERE project_id = ? GROUP BY status ORDER BY status LIMIT ?`
		args = []any{projectID, limit}
	default:
		return "", 0, models.Errorf(models.CodeInvalid, "query: %q is not one of %s", step.Query, strings.Join(models.HookQueries, ", "))
	}
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return "", 0, fmt.Errorf("hook query %s: %w", step.Query, err)
	}
	defer rows.Close()
	out, err := rowsToMaps(rows)
	if err != nil {
		return "", 0, fmt.Errorf("hook query %s: %w", step.Query, err)
	}
	// The rows go to a model or a command outside the daemon.
	if err := s.WaitDurable(ctx); err != nil {
		return "", 0, fmt.Errorf("hook query %s: %w", step.Query, err)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return "", 0, fmt.Errorf("hook query %s: %w", step.Query, err)
	}
	return string(b), len(out), nil
}

// rowsToMaps reads rows as column → value maps; columns named *_at hold
// Unix nanoseconds and are written as RFC 3339 times.
func rowsToMaps(rows *sql.Rows) ([]map[string]any, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		m := make(map[string]any, len(cols))
		for i, c := range cols {
			v := vals[i]
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			if n, ok := v.(int64); ok && strings.HasSuffix(c, "_at") {
				v = fromNanos(n).Format(time.RFC3339)
			}
			m[c] = v
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
