package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Queries of Stats; ?1 is the start of the window.
const (
	qStatsProjects    = "SELECT id FROM projects ORDER BY id"
	qStatsByStatus    = "SELECT project_id, status, count(*) FROM tasks GROUP BY project_id, status"
	qStatsArchived    = "SELECT project_id, count(*) FROM archived_tasks GROUP BY project_id"
	qStatsCompletions = `SELECT t.project_id, (e.created_at - ?1) / 3600000000000, count(*)
		FROM task_events e INDEXED BY task_events_completed JOIN tasks t ON t.id = e.task_id
		WHERE e.to_status = 'COMPLETED' AND e.created_at >= ?1 GROUP BY 1, 2`
	qStatsRunTime = `SELECT project_id, avg(ended_at - started_at), count(*) FROM task_runs INDEXED BY task_runs_ended
		WHERE ended_at >= ?1 AND kind = 'work' GROUP BY project_id`
	qStatsQueueWait = `SELECT r.project_id, avg(r.started_at - coalesce((SELECT max(e.created_at) FROM task_events e
			WHERE e.task_id = r.task_id AND e.to_status = 'READY' AND e.created_at <= r.started_at), r.started_at)), count(*)
		FROM task_runs r WHERE r.started_at >= ?1 AND r.kind = 'work' GROUP BY r.project_id`
)

// Stats reads each project's throughput over the models.StatsWindow
// before now, from one snapshot: tasks by status, archived tasks,
// completions per hour (hours aligned to the clock's hours), and the mean
// queue wait and run time of its work runs.
func (s *Store) Stats(ctx context.Context) (models.Stats, error) {
	now := s.now()
	start := now.Truncate(time.Hour).Add(-models.StatsWindow + time.Hour)
	out := models.Stats{At: now, Projects: []models.ProjectStats{}}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return out, fmt.Errorf("stats: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	ids, err := queryIDs(ctx, tx, qStatsProjects)
	if err != nil {
		return out, fmt.Errorf("stats: %w", err)
	}
	hours := int(models.StatsWindow / time.Hour)
	at := map[string]*models.ProjectStats{}
	out.Projects = make([]models.ProjectStats, len(ids))
	for i, id := range ids {
		p := &out.Projects[i]
		p.ProjectID, p.ByStatus = id, map[models.TaskStatus]int{}
		p.CompletionsPerHour = make([]models.HourCount, hours)
		for h := range p.CompletionsPerHour {
			p.CompletionsPerHour[h].Hour = start.Add(time.Duration(h) * time.Hour).UTC()
		}
		at[id] = p
	}
	steps := []struct {
		q    string
		args []any
		scan func(rows *sql.Rows) (string, func(p *models.ProjectStats), error)
	}{
		{qStatsByStatus, nil, func(rows *sql.Rows) (string, func(*models.ProjectStats), error) {
			var (
				id, st string
				n      int
			)
			err := rows.Scan(&id, &st, &n)
			return id, func(p *models.ProjectStats) { p.ByStatus[models.TaskStatus(st)] = n }, err
		}},
		{qStatsArchived, nil, func(rows *sql.Rows) (string, func(*models.ProjectStats), error) {
			var (
				id string
				n  int
			)
			err := rows.Scan(&id, &n)
			return id, func(p *models.ProjectStats) { p.Archived = n }, err
		}},
		{qStatsCompletions, []any{toNanos(start)}, func(rows *sql.Rows) (string, func(*models.ProjectStats), error) {
			var (
				id   string
				h, n int
			)
			err := rows.Scan(&id, &h, &n)
			return id, func(p *models.ProjectStats) {
				if h >= 0 && h < hours {
					p.CompletionsPerHour[h].Count += n
					p.Completed += n
				}
			}, err
		}},
		{qStatsRunTime, []any{toNanos(now.Add(-models.StatsWindow))}, func(rows *sql.Rows) (string, func(*models.ProjectStats), error) {
			var (
				id   string
				mean float64
				n    int
			)
			err := rows.Scan(&id, &mean, &n)
			return id, func(p *models.ProjectStats) { p.MeanRunSeconds, p.RunsEnded = mean/1e9, n }, err
		}},
		{qStatsQueueWait, []any{toNanos(now.Add(-models.StatsWindow))}, func(rows *sql.Rows) (string, func(*models.ProjectStats), error) {
			var (
				id   string
				mean float64
				n    int
			)
			err := rows.Scan(&id, &mean, &n)
			return id, func(p *models.ProjectStats) { p.MeanQueueWaitSeconds, p.RunsStarted = mean/1e9, n }, err
		}},
	}
	for _, st := range steps {
		if err := func() error {
			rows, err := tx.QueryContext(ctx, st.q, st.args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				id, set, err := st.scan(rows)
				if err != nil {
					return err
				}
				if p := at[id]; p != nil {
					set(p)
				}
			}
			return rows.Err()
		}(); err != nil {
			return out, fmt.Errorf("stats: %w", err)
		}
	}
	return out, nil
}
