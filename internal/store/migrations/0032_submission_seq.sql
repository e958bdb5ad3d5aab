-- submission_seq numbers tasks in the order they were submitted: a batch's
-- entries, a plan's subtasks and a workflow fan-out's tasks, created in one
-- transaction at one created_at, in the order they were given. It breaks
-- ties after priority wherever tasks are ordered (scheduling and lists),
-- where the random ids used to. Existing tasks are numbered by created_at,
-- then rowid (their order of insertion).
ALTER TABLE tasks ADD COLUMN submission_seq INTEGER NOT NULL DEFAULT 0;
UPDATE tasks SET submission_seq = o.n
    FROM (SELECT rowid AS rid, row_number() OVER (ORDER BY created_at, rowid) AS n FROM tasks) AS o
    WHERE tasks.rowid = o.rid;
CREATE UNIQUE INDEX tasks_submission_seq ON tasks (submission_seq);

-- The last number given. A counter of its own, not max(submission_seq), so
-- that a number is never given twice, even once its task is archived or
-- deleted.
CREATE TABLE task_sequence (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n  INTEGER NOT NULL
);
INSERT INTO task_sequence (id, n) SELECT 1, coalesce(max(submission_seq), 0) FROM tasks;

-- The store numbers a batch's tasks itself (one read and one write of the
-- counter per batch); a task inserted without a number gets the next one.
CREATE TRIGGER tasks_submission_seq AFTER INSERT ON tasks WHEN new.submission_seq = 0
BEGIN
    UPDATE task_sequence SET n = n + 1 WHERE id = 1;
    UPDATE tasks SET submission_seq = (SELECT n FROM task_sequence WHERE id = 1) WHERE rowid = new.rowid;
END;

-- The READY tasks of a project in the order they start: priority, then
-- submission (was: created_at, id).
DROP INDEX tasks_ready_order;
CREATE INDEX tasks_ready_order ON tasks (project_id, priority, submission_seq, not_before, kind) WHERE status = 'READY';
