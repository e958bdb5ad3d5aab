-- Why a READY task waits (a code and a sentence), written by the scheduler
-- only when it changes and cleared by every status change.
ALTER TABLE tasks ADD COLUMN waiting_code TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN waiting_reason TEXT NOT NULL DEFAULT '';

-- The READY tasks of a project in the order they start (priority, age),
-- with not_before and kind in the index so that future-dated tasks and a
-- kind at its limit are passed over without reading their rows.
CREATE INDEX tasks_ready_order ON tasks (project_id, priority, created_at, id, not_before, kind) WHERE status = 'READY';
-- The READY tasks of a project by waiting reason: a reason written for a
-- whole group reads only the rows that do not have it yet, and tells
-- future-dated tasks apart without reading them.
CREATE INDEX tasks_ready_waiting ON tasks (project_id, waiting_code, waiting_reason, not_before) WHERE status = 'READY';
-- The next not_before to come, for the round's timer.
CREATE INDEX tasks_ready_not_before ON tasks (not_before) WHERE status = 'READY';

-- Timers read by due time.
CREATE INDEX tasks_paused_due ON tasks (resume_after, id) WHERE status = 'PAUSED';
CREATE INDEX tasks_failed_due ON tasks (updated_at, id) WHERE status = 'FAILED';
