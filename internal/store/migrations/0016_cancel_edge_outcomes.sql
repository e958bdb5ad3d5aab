-- How each decided dependency edge's upstream ended, and with which attempt.
-- upstream_outcome: SUCCESS (COMPLETED by its work), SKIPPED (COMPLETED by
-- ADMIN_SKIP), FAILED (BLOCKED by a failure or the cascade), CANCELLED
-- (BLOCKED by ADMIN_CANCEL or RUN_STOPPED); '' while the edge is PENDING.
-- upstream_attempt: the upstream's work attempt whose end decided the edge
-- (NULL when it never ran).
ALTER TABLE task_dependencies ADD COLUMN upstream_outcome TEXT NOT NULL DEFAULT ''
    CHECK (upstream_outcome IN ('', 'SUCCESS', 'FAILED', 'SKIPPED', 'CANCELLED'));
ALTER TABLE task_dependencies ADD COLUMN upstream_attempt INTEGER;

-- Edges decided before this version: the event that resolved them tells how
-- the upstream ended; an edge resolved at its creation (no event) takes the
-- upstream's latest event into the status it had. The attempt is the last
-- work run the upstream started before the edge was resolved.
UPDATE task_dependencies SET
    upstream_outcome = coalesce(
        (SELECT CASE WHEN e.event = 'ADMIN_SKIP' THEN 'SKIPPED'
                     WHEN e.event IN ('ADMIN_CANCEL', 'RUN_STOPPED') THEN 'CANCELLED'
                     WHEN e.to_status = 'COMPLETED' THEN 'SUCCESS'
                     ELSE 'FAILED' END
           FROM task_events e
          WHERE e.id = coalesce(task_dependencies.resolving_event_id,
                (SELECT max(l.id) FROM task_events l WHERE l.task_id = task_dependencies.upstream
                    AND l.to_status IN ('COMPLETED', 'BLOCKED')))),
        CASE resolution WHEN 'BROKEN' THEN 'FAILED' ELSE 'SUCCESS' END),
    upstream_attempt = (SELECT max(r.attempt) FROM task_runs r
          WHERE r.task_id = task_dependencies.upstream AND r.kind = 'work'
            AND (task_dependencies.resolved_at IS NULL OR r.started_at <= task_dependencies.resolved_at))
WHERE resolution != 'PENDING';

-- A question is closed when its task is cancelled: no answer is waited for
-- or accepted any more.
ALTER TABLE questions ADD COLUMN closed_at INTEGER;
