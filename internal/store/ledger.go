package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// MaxTokensPerRecord bounds each count of one usage record (input,
// output, cache read, cache write): about a trillion tokens, far beyond any
// real call or session, and low enough that no sum of records the store
// keeps can overflow. A report above it is refused as implausible: an
// agent or a stream cannot brick the budget by reporting 5e18 tokens.
const MaxTokensPerRecord = 1 << 40

// maxTotal is where token totals stop: they saturate instead of wrapping.
const maxTotal = math.MaxInt64

// checkUsage refuses negative and implausible counts, naming the field.
func checkUsage(u models.TokenUsage) error {
	for _, c := range []struct {
		name string
		n    int64
	}{{"input_tokens", u.Input}, {"output_tokens", u.Output}, {"cache_read_tokens", u.CacheRead}, {"cache_write_tokens", u.CacheWrite}} {
		if c.n < 0 {
			return models.Errorf(models.CodeInvalid, "token usage: %s must not be negative (got %d)", c.name, c.n)
		}
		if c.n > MaxTokensPerRecord {
			return models.Errorf(models.CodeInvalid, "token usage: %s %d is not plausible (at most %d in one report)",
				c.name, c.n, int64(MaxTokensPerRecord))
		}
	}
	return nil
}

// satAdd is SQL adding the parameter to a non-negative column without
// overflowing: the sum stops at the largest integer.
func satAdd(column string) string {
	return fmt.Sprintf("min(%[1]s, %[2]d - ?) + ?", column, int64(maxTotal))
}

// RecordTokenUsage appends u to the token ledger and adds it to the
// project's total and, when u names an agent, to the agent's total and
// session total, in one transaction.
func (s *Store) RecordTokenUsage(ctx context.Context, u models.TokenUsage) error {
	if err := checkUsage(u); err != nil {
		return err
	}
	err := s.withTx(ctx, func(tx *sql.Tx) error { return s.recordTokenUsageTx(ctx, tx, u) })
	if err != nil {
		return fmt.Errorf("record token usage for project %s: %w", u.ProjectID, err)
	}
	return nil
}

func (s *Store) recordTokenUsageTx(ctx context.Context, tx *sql.Tx, u models.TokenUsage) error {
	if err := checkUsage(u); err != nil {
		return err
	}
	if u.CreatedAt.IsZero() {
		u.CreatedAt = s.now()
	}
	total := u.Total()
	res, err := s.txExec(ctx, tx, "UPDATE projects SET total_tokens_used = "+satAdd("total_tokens_used")+" WHERE id = ?",
		total, total, u.ProjectID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return notFound("project", u.ProjectID)
	}
	if u.AgentID != "" {
		if _, err := s.txExec(ctx, tx, "UPDATE agents SET total_tokens_used = "+satAdd("total_tokens_used")+
			", session_tokens_used = "+satAdd("session_tokens_used")+" WHERE id = ?",
			total, total, total, total, u.AgentID); err != nil {
			return err
		}
	}
	_, err = s.txExec(ctx, tx, `INSERT INTO token_ledger (project_id, task_id, agent_id, hook_run_id, input_tokens,
		output_tokens, cache_read_tokens, cache_write_tokens, created_at) VALUES (?,?,?,?,?,?,?,?,?)`,
		u.ProjectID, u.TaskID, u.AgentID, u.HookRunID, u.Input, u.Output, u.CacheRead, u.CacheWrite, toNanos(u.CreatedAt))
	if err != nil {
		return err
	}
	return s.addTokens(ctx, tx, u.ProjectID, toNanos(u.CreatedAt), total, toNanos(s.now()))
}

// TokensUsedSince sums the ledger for a project from since on.
func (s *Store) TokensUsedSince(ctx context.Context, projectID string, since time.Time) (int64, error) {
	var n int64
	err := s.rdb.QueryRowContext(ctx, qTokensSince, projectID, toNanos(since)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("sum tokens for project %s: %w", projectID, err)
	}
	return n, nil
}

// TokenBudgetFreesAt says when the window's token use, now at or above
// budget, falls below it again if nothing more is used: the moment enough of
// the window's oldest usage leaves the window [now-window, now]. ok is
// false when it never does by ageing alone (a budget of 0).
func (s *Store) TokenBudgetFreesAt(ctx context.Context, now time.Time, window time.Duration, budget int64) (time.Time, bool, error) {
	if budget <= 0 {
		return time.Time{}, false, nil
	}
	fail := func(err error) (time.Time, bool, error) {
		return time.Time{}, false, fmt.Errorf("when the token budget frees: %w", err)
	}
	var total int64
	if err := s.rdb.QueryRowContext(ctx, qTokensInWindow, toNanos(now.Add(-window))).Scan(&total); err != nil {
		return fail(err)
	}
	if total < budget {
		return now, true, nil
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT created_at, input_tokens + output_tokens + cache_read_tokens + cache_write_tokens
		FROM token_ledger WHERE created_at >= ? ORDER BY created_at`, toNanos(now.Add(-window)))
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	// Usage leaves the window oldest first; a row counts while
	// created_at >= now - window, so it has left a nanosecond after
	// created_at + window.
	for excess := total - budget + 1; rows.Next(); {
		var at, n int64
		if err := rows.Scan(&at, &n); err != nil {
			return fail(err)
		}
		if excess -= n; excess <= 0 {
			return fromNanos(at).Add(window + time.Nanosecond), true, nil
		}
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	return time.Time{}, false, nil
}

// TokensUsedByProjectSince sums the ledger per project from since on, in
// one query over the ledger's time index. Projects without usage in that
// time are absent from the map.
func (s *Store) TokensUsedByProjectSince(ctx context.Context, since time.Time) (map[string]int64, error) {
	rows, err := s.rdb.QueryContext(ctx, qTokensPerProjectSince, toNanos(since))
	if err != nil {
		return nil, fmt.Errorf("sum tokens per project: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("sum tokens per project: %w", err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sum tokens per project: %w", err)
	}
	return out, nil
}
