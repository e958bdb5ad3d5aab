-- ready_generation counts the changes that can change which waiting reason
-- a READY task should carry: a task that becomes READY (created so or by a
-- transition) and a READY task changed in any other way than having its
-- waiting reason written. A task leaving READY changes no other task's
-- reason and is not counted. A scheduling round that finds the count, its
-- reasons and the times involved unchanged skips writing them.
CREATE TABLE ready_generation (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n  INTEGER NOT NULL
);
INSERT INTO ready_generation (id, n) VALUES (1, 0);
CREATE TRIGGER tasks_ready_insert AFTER INSERT ON tasks WHEN new.status = 'READY'
BEGIN
    UPDATE ready_generation SET n = n + 1 WHERE id = 1;
END;
CREATE TRIGGER tasks_ready_update AFTER UPDATE ON tasks WHEN new.status = 'READY'
    AND NOT (old.status = 'READY' AND new.waiting_code <> ''
        AND (old.waiting_code IS NOT new.waiting_code OR old.waiting_reason IS NOT new.waiting_reason))
BEGIN
    UPDATE ready_generation SET n = n + 1 WHERE id = 1;
END;

-- Token use per bucket (the ledger's four counts summed), so that a round
-- reads the window's token total from the buckets. The daemon fills it from
-- the ledger when it starts and tokens_filled is 0: after the ledger's
-- repair of implausible counts, which sets it to 0 again when it clamps any.
ALTER TABLE usage_buckets ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;
CREATE TABLE usage_state (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    tokens_filled INTEGER NOT NULL
);
INSERT INTO usage_state (id, tokens_filled) VALUES (1, 0);
