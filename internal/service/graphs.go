package service

import (
	"context"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/service/areas"
)

// TokenSeries fills the query's defaults (Until now, Since a day before,
// 24 buckets) and sums the token ledger: the store's.
func (s *Service) TokenSeries(ctx context.Context, q models.TokenSeriesQuery) (models.TokenSeries, error) {
	return s.store.TokenSeries(ctx, tokenSeriesDefaults(q, s.clock.Now()))
}

// tokenSeriesDefaults fills a query's zero fields; the step is rounded
// up to a whole minute.
func tokenSeriesDefaults(q models.TokenSeriesQuery, now time.Time) models.TokenSeriesQuery {
	if q.Until.IsZero() {
		q.Until = now
	}
	if q.Since.IsZero() {
		q.Since = q.Until.Add(-models.DefaultTokenSeriesSpan)
	}
	if q.Step == 0 && q.Until.After(q.Since) {
		step := (q.Until.Sub(q.Since) + models.DefaultTokenSeriesBuckets - 1) / models.DefaultTokenSeriesBuckets
		step = (step + time.Minute - 1).Truncate(time.Minute)
		q.Step = models.Duration(max(step, models.MinTokenSeriesStep))
	}
	return q
}

var _ areas.TokenHistory = (*Service)(nil)

// TaskGraph returns a project's open work or a task's neighbourhood: the
// store's.
func (s *Service) TaskGraph(ctx context.Context, q models.TaskGraphQuery) (models.TaskGraph, error) {
	return s.store.TaskGraph(ctx, q)
}

// PendingUpstreams returns the upstreams each of tasks ids still waits
// for (undecided edges): the store's.
func (s *Service) PendingUpstreams(ctx context.Context, ids []string) (map[string][]models.Task, error) {
	return s.store.PendingUpstreams(ctx, ids)
}

var _ areas.TaskGraphs = (*Service)(nil)
