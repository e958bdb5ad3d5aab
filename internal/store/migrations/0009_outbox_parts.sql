-- Notices made of several messages remember how many went out, so a retry
-- long after a crash does not post them again; a notice given up is told
-- apart from one delivered.
ALTER TABLE outbox ADD COLUMN parts_done INTEGER NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN given_up_at INTEGER;
-- The oldest undelivered notice of each task (one task's notices keep
-- their order).
CREATE INDEX outbox_undelivered_task ON outbox (task_id, id) WHERE delivered_at IS NULL;
