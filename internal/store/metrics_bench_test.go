package store_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/metrics"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// seedMetricsHistory writes, in a few statements, the history of a busy
// daemon: n tasks over 10 projects and the past 30 days (2% READY, 1%
// each FAILED, BLOCKED and DEFINED, 20 IN_PROGRESS, the rest COMPLETED), a
// run of each (its tokens, cost and agent among 20), two ledger rows each,
// and an outbox of n delivered notices and 100 waiting.
func seedMetricsHistory(b *testing.B, s *store.Store, now time.Time, n int) {
	b.Helper()
	for i := range 10 {
		storetest.Project(b, s, fmt.Sprintf("p%d", i))
	}
	for i := range 20 {
		if _, err := s.RegisterAgent(context.Background(), models.Agent{ID: fmt.Sprintf("a%02d", i), AgentType: "command",
			AgentSettings: models.AgentSettings{Command: "/bin/true", Profile: models.Profile{Model: fmt.Sprintf("m%d", i%3)}}}); err != nil {
			b.Fatal(err)
		}
	}
	const month = int64(30 * 24 * time.Hour)
	nowNs := now.UnixNano()
	stmts := []string{
		fmt.Sprintf(`WITH RECURSIVE seq (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i + 1 < %d)
			INSERT INTO tasks (id, project_id, title, status, verification_type, assigned_agent_id, created_at, updated_at)
			SELECT 'h' || i, 'p' || (i %% 10), 'history ' || i,
				CASE WHEN i < 20 THEN 'IN_PROGRESS' WHEN i %% 100 < 2 THEN 'READY' WHEN i %% 100 = 2 THEN 'FAILED'
					WHEN i %% 100 = 3 THEN 'BLOCKED' WHEN i %% 100 = 4 THEN 'DEFINED' ELSE 'COMPLETED' END,
				'AUTO_TEST', CASE WHEN i < 20 THEN printf('a%%02d', i) END,
				%d - (i * %d / %d), %d - (i * %d / %d) FROM seq`, n, nowNs, month, n, nowNs, month, n),
		fmt.Sprintf(`INSERT INTO task_runs (task_id, agent_id, project_id, attempt, token_hash, started_at, last_activity_at,
				ended_at, outcome, kind, usage, cost_usd)
			SELECT id, printf('a%%02d', rowid %% 20), project_id, 1, 'hash-' || id, created_at, updated_at,
				CASE WHEN status = 'IN_PROGRESS' THEN NULL ELSE created_at + 600000000000 END,
				CASE WHEN status = 'IN_PROGRESS' THEN '' ELSE 'completed' END, 'work',
				'{"input_tokens":1000,"output_tokens":200,"cache_read_tokens":300,"cache_write_tokens":40}', 0.05
			FROM tasks WHERE id LIKE 'h%%'`),
		`INSERT INTO token_ledger (project_id, task_id, agent_id, input_tokens, output_tokens, created_at)
			SELECT project_id, task_id, agent_id, 500, 100, started_at FROM task_runs
			UNION ALL SELECT project_id, task_id, agent_id, 500, 100, started_at + 300000000000 FROM task_runs`,
		`INSERT INTO outbox (key, kind, project_id, task_id, payload, next_attempt_at, delivered_at, created_at)
			SELECT 'seed-' || id, 'task.completed', project_id, id, '{}', created_at,
				CASE WHEN rowid % 1000 = 0 THEN NULL ELSE created_at + 1000000000 END, created_at
			FROM tasks WHERE id LIKE 'h%'`,
		`ANALYZE`,
	}
	for _, q := range stmts {
		if err := store.ExecForTest(s, q); err != nil {
			b.Fatalf("seed: %v\n%s", err, q)
		}
	}
}

// seedRunners adds n runners, each seen now with two agents, and an open
// run on the first agent of every other runner (over tasks of the
// history).
func seedRunners(b *testing.B, s *store.Store, now time.Time, n int) {
	b.Helper()
	nowNs := now.UnixNano()
	stmts := []string{
		fmt.Sprintf(`WITH RECURSIVE seq (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i + 1 < %d)
			INSERT INTO runners (id, token_hash, labels, capacity, state, created_at, last_seen_at, version, address)
			SELECT printf('r%%03d', i), printf('%%064x', i), '[]', 0, CASE WHEN i %% 10 = 0 THEN 'DRAINING' ELSE 'ACTIVE' END,
				%d, %d, '1.0', '127.0.0.2:1' FROM seq`, n, nowNs, nowNs),
		fmt.Sprintf(`INSERT INTO agents (id, name, agent_type, state, created_at, runner_id)
			SELECT r.id || '/' || a.n, r.id || '/' || a.n, 'command', 'IDLE', %d, r.id
			FROM runners r, (SELECT 'a' AS n UNION ALL SELECT 'b') a`, nowNs),
		fmt.Sprintf(`INSERT INTO task_runs (task_id, agent_id, project_id, attempt, token_hash, started_at, last_activity_at,
				outcome, kind, usage)
			SELECT 'h' || (1000 + rowid), id || '/a', 'p0', 2, 'runner-hash-' || id, %d, %d, '', 'work', '{}'
			FROM runners WHERE rowid %% 2 = 0`, nowNs, nowNs),
		`ANALYZE`,
	}
	for _, q := range stmts {
		if err := store.ExecForTest(s, q); err != nil {
			b.Fatalf("seed runners: %v\n%s", err, q)
		}
	}
}

// BenchmarkMetricsScrape measures a whole scrape of /metrics (every store
// read and the encoding) and each of its store reads, with 100,000 tasks
// of history and 100 runners: docs/performance.md has the figures.
func BenchmarkMetricsScrape(b *testing.B) {
	const tasks = 100_000
	s, clock := openClocked(b)
	seedMetricsHistory(b, s, clock.Now(), tasks)
	seedRunners(b, s, clock.Now(), 100)
	ctx := context.Background()
	now := clock.Now()
	m := metrics.New(metrics.Config{Window: 24 * time.Hour, Outbox: true, Clock: clock})
	m.ReadFrom(s)
	h := m.Handler()
	reads := []struct {
		name string
		read func() error
	}{
		{"scrape", func() error {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if rec.Code != http.StatusOK {
				return fmt.Errorf("scrape: %d", rec.Code)
			}
			_, err := io.Copy(io.Discard, rec.Body)
			return err
		}},
		{"TaskStatusCounts", func() error { _, err := s.TaskStatusCounts(ctx); return err }},
		{"AgentStates", func() error { _, err := s.AgentStates(ctx); return err }},
		{"OutboxBacklog", func() error { _, err := s.OutboxBacklog(ctx); return err }},
		{"RunUsageSince", func() error { _, err := s.RunUsageSince(ctx, now.Add(-24*time.Hour), now); return err }},
		{"TokensUsedByProjectSince", func() error { _, err := s.TokensUsedByProjectSince(ctx, now.Add(-24*time.Hour)); return err }},
		{"ProjectTokens", func() error { _, err := s.ProjectTokens(ctx); return err }},
		{"RunnerActivity", func() error { _, err := s.RunnerActivity(ctx); return err }},
	}
	for _, r := range reads {
		b.Run(r.name, func(b *testing.B) {
			for b.Loop() {
				if err := r.read(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTransitionCommitObserved is BenchmarkTransitionCommit with the
// metrics observing the store: a claim also reads when its task became
// READY, for the queue wait.
func BenchmarkTransitionCommitObserved(b *testing.B) {
	m := metrics.New(metrics.Config{})
	s := storetest.Open(b, storetest.WithObserver(m))
	storetest.Project(b, s, "p")
	ctx := context.Background()
	batch := models.TaskBatch{ProjectID: "p"}
	for i := range b.N {
		batch.Tasks = append(batch.Tasks, models.BatchTask{Title: fmt.Sprintf("t%d", i)})
	}
	res, err := s.CreateTasks(ctx, batch)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: res[i].TaskID, Event: models.EventAssigned, AgentID: "a1"}); err != nil {
			b.Fatal(err)
		}
	}
}
