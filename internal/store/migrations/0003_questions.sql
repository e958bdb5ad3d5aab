-- Agents' questions to humans and their answers.
CREATE TABLE questions (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id      TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    project_id   TEXT NOT NULL,
    run_id       INTEGER NOT NULL,
    text         TEXT NOT NULL,
    asked_at     INTEGER NOT NULL,
    answer       TEXT,
    answered_by  TEXT NOT NULL DEFAULT '',
    answered_at  INTEGER,
    timed_out_at INTEGER
);
CREATE INDEX questions_open ON questions (asked_at) WHERE answer IS NULL;
CREATE INDEX questions_task ON questions (task_id, id);
