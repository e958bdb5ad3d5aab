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
