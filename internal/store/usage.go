package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Usage buckets keep each project's completions and agent time per minute
// and per hour (table usage_buckets), written in the transaction of the
// completion or of the run's end. A scheduling round sums the minutes of the
// window's first, partial hour and the hours after it: at most about 60 + 24
// rows per project for the default window of a day, however much history the
// window holds.
//
// The window is counted from the start of the minute of now - window, so a
// usage falls out of the window at most a minute later than its exact age
// says. Open runs are read from task_runs (one row per running agent).

const (
	minuteSpan = int64(time.Minute)
	hourSpan   = int64(time.Hour)
	// UsageRetention is how long usage buckets are kept. A scheduling
	// window up to this long is read from the buckets; a longer one is
	// counted from history (slower, exact).
	UsageRetention = 8 * 24 * time.Hour
	// usagePruneEvery is how often, at most, a write prunes old buckets.
	usagePruneEvery = 10 * time.Minute
)

var usageSpans = [...]int64{minuteSpan, hourSpan}

const (
	qAddCompletion = `INSERT INTO usage_buckets (span, start, project_id, completed) VALUES (?, ?, ?, 1)
		ON CONFLICT (span, start, project_id) DO UPDATE SET completed = completed + 1`
	qAddAgentTime = `INSERT INTO usage_buckets (span, start, project_id, agent_nanos) VALUES (?, ?, ?, ?)
		ON CONFLICT (span, start, project_id) DO UPDATE SET agent_nanos = agent_nanos + excluded.agent_nanos`
	// qUsageInWindow sums the buckets of a window: minutes from ?1 (a
	// minute's start) until ?2 (the next hour's start), hours from ?2 on.
	qUsageInWindow = `SELECT project_id, sum(completed), sum(agent_nanos) FROM (
		SELECT project_id, completed, agent_nanos FROM usage_buckets WHERE span = 60000000000 AND start >= ?1 AND start < ?2
		UNION ALL
		SELECT project_id, completed, agent_nanos FROM usage_buckets WHERE span = 3600000000000 AND start >= ?2)
		GROUP BY project_id`
	// qOpenAgentTime sums, per project, the time of the open runs from
	// ?2 (the window's start) or their start until ?1 (now).
	qOpenAgentTime = `SELECT project_id, sum(?1 - max(started_at, ?2)) FROM task_runs
		WHERE ended_at IS NULL GROUP BY project_id`
	qPruneUsage = `DELETE FROM usage_buckets WHERE span = ? AND start < ?`
	// qForgetCompletion and qForgetAgentTime take a deleted task's usage
	// back out of the buckets that still exist.
	qForgetCompletion = `UPDATE usage_buckets SET completed = completed - 1 WHERE span = ? AND start = ? AND project_id = ?`
	qForgetAgentTime  = `UPDATE usage_buckets SET agent_nanos = agent_nanos - ? WHERE span = ? AND start = ? AND project_id = ?`
	qTaskCompletions  = `SELECT created_at FROM task_events WHERE task_id = ? AND to_status = 'COMPLETED'`
	qTaskEndedRuns    = `SELECT started_at, ended_at FROM task_runs WHERE task_id = ? AND ended_at IS NOT NULL`
)

// Token use: each ledger row's tokens are added to its minute and hour
// buckets in the transaction that appends it. The window's total is exact:
// the minute buckets from the first whole minute of the window, the hour
// buckets from the first whole hour, and the ledger's own rows for the part
// of a minute before them.
const (
	qAddTokens = `INSERT INTO usage_buckets (span, start, project_id, tokens) VALUES (?, ?, ?, ?)
		ON CONFLICT (span, start, project_id) DO UPDATE SET tokens = tokens + excluded.tokens`
	// qTokensInBuckets is the token total of all projects from ?1 (a
	// moment) on: the ledger's rows from ?1 until ?2 (the next minute's
	// start), minute buckets from ?2 until ?3 (the next hour's start), hour
	// buckets from ?3 on.
	qTokensInBuckets = `SELECT
		(SELECT coalesce(sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens), 0)
			FROM token_ledger INDEXED BY token_ledger_time WHERE created_at >= ?1 AND created_at < ?2)
		+ (SELECT coalesce(sum(tokens), 0) FROM usage_buckets WHERE span = 60000000000 AND start >= ?2 AND start < ?3)
		+ (SELECT coalesce(sum(tokens), 0) FROM usage_buckets WHERE span = 3600000000000 AND start >= ?3)`
	qTokensFilled   = `SELECT tokens_filled FROM usage_state WHERE id = 1`
	qTokensUnfilled = `UPDATE usage_state SET tokens_filled = 0 WHERE id = 1`
	// qFillTokens sums the ledger's rows from ?1 on into the buckets.
	qFillTokens = `INSERT INTO usage_buckets (span, start, project_id, tokens)
		SELECT sp.span, l.created_at / sp.span * sp.span, l.project_id,
			sum(l.input_tokens + l.output_tokens + l.cache_read_tokens + l.cache_write_tokens)
		FROM token_ledger l INDEXED BY token_ledger_time, (SELECT 60000000000 AS span UNION ALL SELECT 3600000000000) sp
		WHERE l.created_at >= ?1 GROUP BY 1, 2, 3
		ON CONFLICT (span, start, project_id) DO UPDATE SET tokens = excluded.tokens`
)

// addTokens adds n tokens of projectID used at at to their buckets; use
// older than UsageRetention at now is not kept.
func (s *Store) addTokens(ctx context.Context, tx *sql.Tx, projectID string, at, n, now int64) error {
	if at < now-int64(UsageRetention) || n == 0 {
		return nil
	}
	for _, span := range usageSpans {
		if _, err := s.txExec(ctx, tx, qAddTokens, span, floorTo(at, span), projectID, n); err != nil {
			return err
		}
	}
	return nil
}

// fillTokenBuckets fills the buckets' tokens from the ledger's rows of the
// retention period, once: when the column is new, or the ledger's repair
// changed rows.
func (s *Store) fillTokenBuckets(ctx context.Context) error {
	var filled bool
	if err := s.wdb.QueryRowContext(ctx, qTokensFilled).Scan(&filled); err != nil {
		return fmt.Errorf("fill token buckets: %w", err)
	}
	if filled {
		return nil
	}
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE usage_buckets SET tokens = 0 WHERE tokens != 0"); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, qFillTokens, toNanos(s.now())-int64(UsageRetention)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE usage_state SET tokens_filled = 1 WHERE id = 1")
		return err
	})
	if err != nil {
		return fmt.Errorf("fill token buckets: %w", err)
	}
	return nil
}

// tokensInWindow returns the token use of all projects in the window
// [now-window, now], exact.
func tokensInWindow(ctx context.Context, tx queryer, now time.Time, window time.Duration) (int64, error) {
	from := toNanos(now.Add(-window))
	var n int64
	if window > UsageRetention {
		err := tx.QueryRowContext(ctx, qTokensInWindow, from).Scan(&n)
		return n, err
	}
	minute := floorTo(from+minuteSpan-1, minuteSpan)
	hour := floorTo(minute+hourSpan-1, hourSpan)
	err := tx.QueryRowContext(ctx, qTokensInBuckets, from, minute, hour).Scan(&n)
	return n, err
}

// floorTo returns n rounded down to a multiple of span.
func floorTo(n, span int64) int64 {
	r := n % span
	if r < 0 {
		r += span
	}
	return n - r
}

// usageWindowStart is where the window [now-window, now] starts for the
// buckets: the start of its first minute.
func usageWindowStart(now time.Time, window time.Duration) int64 {
	return floorTo(toNanos(now.Add(-window)), minuteSpan)
}

// recordCompletion counts one completion of a task of projectID now.
func (x *txn) recordCompletion(projectID string) error {
	at := toNanos(x.now)
	for _, span := range usageSpans {
		if _, err := x.ExecContext(x.ctx, qAddCompletion, span, floorTo(at, span), projectID); err != nil {
			return err
		}
	}
	return x.pruneUsage()
}

// recordAgentTime adds a run of projectID from from until to (Unix
// nanoseconds) to the buckets it overlaps; the part older than
// UsageRetention is not kept.
func (x *txn) recordAgentTime(projectID string, from, to int64) error {
	if limit := toNanos(x.now) - int64(UsageRetention); from < limit {
		from = limit
	}
	for _, span := range usageSpans {
		for start := floorTo(from, span); start < to; start += span {
			overlap := min(to, start+span) - max(from, start)
			if overlap <= 0 {
				continue
			}
			if _, err := x.ExecContext(x.ctx, qAddAgentTime, span, start, projectID, overlap); err != nil {
				return err
			}
		}
	}
	return x.pruneUsage()
}

// forgetUsage takes the completions and the agent time of task id, of
// projectID, out of the buckets: a deleted task no longer counts, as its
// history no longer exists. Call it before the task's rows are deleted.
func (x *txn) forgetUsage(id, projectID string) error {
	completions, err := queryAll(x.ctx, x, func(r scanner) (int64, error) {
		var at int64
		err := r.Scan(&at)
		return at, err
	}, qTaskCompletions, id)
	if err != nil {
		return err
	}
	for _, at := range completions {
		for _, span := range usageSpans {
			if _, err := x.ExecContext(x.ctx, qForgetCompletion, span, floorTo(at, span), projectID); err != nil {
				return err
			}
		}
	}
	runs, err := queryAll(x.ctx, x, func(r scanner) ([2]int64, error) {
		var v [2]int64
		err := r.Scan(&v[0], &v[1])
		return v, err
	}, qTaskEndedRuns, id)
	if err != nil {
		return err
	}
	for _, run := range runs {
		from, to := run[0], run[1]
		if limit := toNanos(x.now) - int64(UsageRetention); from < limit {
			from = limit
		}
		for _, span := range usageSpans {
			for start := floorTo(from, span); start < to; start += span {
				if overlap := min(to, start+span) - max(from, start); overlap > 0 {
					if _, err := x.ExecContext(x.ctx, qForgetAgentTime, overlap, span, start, projectID); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// pruneUsage deletes the buckets older than UsageRetention, at most once
// per usagePruneEvery.
func (x *txn) pruneUsage() error {
	now := toNanos(x.now)
	last := x.s.usagePruned.Load()
	if now-last < int64(usagePruneEvery) && now >= last {
		return nil
	}
	x.s.usagePruned.Store(now)
	for _, span := range usageSpans {
		if _, err := x.ExecContext(x.ctx, qPruneUsage, span, now-int64(UsageRetention)-span); err != nil {
			return err
		}
	}
	return nil
}

// readUsage fills each project's completions and agent time in the window
// [now-window, now] (see usageWindowStart).
func readUsage(ctx context.Context, tx queryer, now time.Time, window time.Duration, byID map[string]*models.ProjectUsage) error {
	if window > UsageRetention {
		return recountUsage(ctx, tx, toNanos(now), usageWindowStart(now, window), byID)
	}
	from := usageWindowStart(now, window)
	hour := floorTo(from+hourSpan-1, hourSpan)
	rows, err := tx.QueryContext(ctx, qUsageInWindow, from, hour)
	if err != nil {
		return err
	}
	for rows.Next() {
		var pid string
		var completed, nanos int64
		if err := rows.Scan(&pid, &completed, &nanos); err != nil {
			rows.Close()
			return err
		}
		if p := byID[pid]; p != nil {
			p.CompletedInWindow = int(completed)
			p.AgentSeconds = float64(nanos) / float64(time.Second)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = tx.QueryContext(ctx, qOpenAgentTime, toNanos(now), from)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var pid string
		var nanos int64
		if err := rows.Scan(&pid, &nanos); err != nil {
			return err
		}
		if p := byID[pid]; p != nil {
			p.AgentSeconds += float64(nanos) / float64(time.Second)
		}
	}
	return rows.Err()
}

// recountUsage counts the window's completions and agent time from history,
// from from (Unix nanoseconds) until now.
func recountUsage(ctx context.Context, tx queryer, now, from int64, byID map[string]*models.ProjectUsage) error {
	rows, err := tx.QueryContext(ctx, qAgentSecondsInWindow, now, now, from, from)
	if err != nil {
		return err
	}
	for rows.Next() {
		var pid string
		var nanos int64
		if err := rows.Scan(&pid, &nanos); err != nil {
			rows.Close()
			return err
		}
		if p := byID[pid]; p != nil {
			p.AgentSeconds = float64(nanos) / float64(time.Second)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = tx.QueryContext(ctx, qCompletedInWindow, from)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var pid string
		var n int
		if err := rows.Scan(&pid, &n); err != nil {
			return err
		}
		if p := byID[pid]; p != nil {
			p.CompletedInWindow = n
		}
	}
	return rows.Err()
}
