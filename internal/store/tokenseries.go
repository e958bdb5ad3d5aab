package store

import (
	"context"
	"fmt"

	"github.com/agentqueued/agentqueued/internal/models"
)

// qTokenSeries sums the ledger in buckets of a step from a start
// (arguments: since, step, since, until), per bucket, project and agent,
// over the time index's range.
const qTokenSeries = `SELECT (created_at - ?) / ? AS bucket, project_id, agent_id,
		sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens)
	FROM token_ledger INDEXED BY token_ledger_time WHERE created_at >= ? AND created_at < ?
	GROUP BY bucket, project_id, agent_id ORDER BY bucket, project_id, agent_id`

// TokenSeries sums the token ledger in q.Step buckets from q.Since to
// q.Until, per project and agent; buckets without usage are absent.
func (s *Store) TokenSeries(ctx context.Context, q models.TokenSeriesQuery) (models.TokenSeries, error) {
	if err := q.Validate(); err != nil {
		return models.TokenSeries{}, err
	}
	fail := func(err error) (models.TokenSeries, error) {
		return models.TokenSeries{}, fmt.Errorf("token series: %w", err)
	}
	since, step := toNanos(q.Since), int64(q.Step.Std())
	rows, err := s.rdb.QueryContext(ctx, qTokenSeries, since, step, since, toNanos(q.Until))
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	out := models.TokenSeries{Since: q.Since.UTC(), Until: q.Until.UTC(), Step: q.Step, Buckets: []models.TokenBucket{}}
	for rows.Next() {
		var b models.TokenBucket
		var n int64
		if err := rows.Scan(&n, &b.ProjectID, &b.AgentID, &b.Tokens); err != nil {
			return fail(err)
		}
		b.Start = fromNanos(since + n*step)
		out.Buckets = append(out.Buckets, b)
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	return out, nil
}
