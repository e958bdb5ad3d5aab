-- Usage per project in time buckets, so that a scheduling round reads the
-- window's completions and agent time from a few rows instead of counting
-- the window's history again. Each event is counted twice: in its minute
-- (span 60 s) and in its hour (span 3600 s); a window sums the minutes of
-- its first, partial hour and the hours after. start is the bucket's start
-- in Unix nanoseconds, a multiple of span. A run's agent time is spread over
-- the buckets it overlaps, each getting the overlap.
CREATE TABLE usage_buckets (
    span        INTEGER NOT NULL,
    start       INTEGER NOT NULL,
    project_id  TEXT NOT NULL,
    completed   INTEGER NOT NULL DEFAULT 0,
    agent_nanos INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (span, start, project_id)
) WITHOUT ROWID;

-- Backfill from history: every COMPLETED event, every ended run.
INSERT INTO usage_buckets (span, start, project_id, completed)
SELECT sp.span, e.created_at / sp.span * sp.span, t.project_id, count(*)
FROM task_events e JOIN tasks t ON t.id = e.task_id, (SELECT 60000000000 AS span UNION ALL SELECT 3600000000000) sp
WHERE e.to_status = 'COMPLETED'
GROUP BY 1, 2, 3;

WITH RECURSIVE spans (span) AS (SELECT 60000000000 UNION ALL SELECT 3600000000000),
slices (project_id, span, start, s, e) AS (
    SELECT r.project_id, spans.span, r.started_at / spans.span * spans.span, r.started_at, r.ended_at
    FROM task_runs r, spans WHERE r.ended_at IS NOT NULL AND r.ended_at > r.started_at
    UNION ALL
    SELECT project_id, span, start + span, s, e FROM slices WHERE start + span < e
)
INSERT INTO usage_buckets (span, start, project_id, agent_nanos)
SELECT span, start, project_id, sum(min(e, start + span) - max(s, start)) FROM slices WHERE true
GROUP BY span, start, project_id
ON CONFLICT (span, start, project_id) DO UPDATE SET agent_nanos = agent_nanos + excluded.agent_nanos;
