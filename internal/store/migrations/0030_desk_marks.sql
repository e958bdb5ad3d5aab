-- What the desk's notifier has sent: one row for each escalation of a desk
-- item and each digest of a project. A mark is written in the transaction
-- that queues its notice, so that each is sent once, across restarts, for
-- as long as the mark is kept (longer than the outbox keeps notices).
CREATE TABLE desk_marks (
    key        TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    kind       TEXT NOT NULL,
    at         INTEGER NOT NULL
);
CREATE INDEX desk_marks_last ON desk_marks (project_id, kind, at);
