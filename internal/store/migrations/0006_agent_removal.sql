-- An agent can be removed while its past runs keep their history: runs name
-- their agent by id, as the token ledger does, without a foreign key to a
-- row that may go away. SQLite cannot drop a foreign key, so task_runs is
-- rebuilt with the same columns, rows, indexes and AUTOINCREMENT counter.

CREATE TABLE task_runs_new (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id            TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    agent_id           TEXT NOT NULL,
    project_id         TEXT NOT NULL,
    attempt            INTEGER NOT NULL,
    token_hash         TEXT NOT NULL UNIQUE,
    pid                INTEGER,
    checkout_path      TEXT NOT NULL DEFAULT '',
    started_at         INTEGER NOT NULL,
    last_activity_at   INTEGER NOT NULL,
    ended_at           INTEGER,
    outcome            TEXT NOT NULL DEFAULT '',
    error              TEXT NOT NULL DEFAULT '',
    kind               TEXT NOT NULL DEFAULT 'work',
    session_id         TEXT NOT NULL DEFAULT '',
    usage              TEXT NOT NULL DEFAULT '{}',
    checkout_conflicts TEXT NOT NULL DEFAULT '[]'
);
INSERT INTO task_runs_new (id, task_id, agent_id, project_id, attempt, token_hash, pid, checkout_path, started_at,
    last_activity_at, ended_at, outcome, error, kind, session_id, usage, checkout_conflicts)
SELECT id, task_id, agent_id, project_id, attempt, token_hash, pid, checkout_path, started_at,
    last_activity_at, ended_at, outcome, error, kind, session_id, usage, checkout_conflicts
FROM task_runs ORDER BY id;
-- Run ids are never reused, not even those of runs deleted with their task.
DELETE FROM sqlite_sequence WHERE name = 'task_runs_new';
INSERT INTO sqlite_sequence (name, seq) SELECT 'task_runs_new', seq FROM sqlite_sequence WHERE name = 'task_runs';
DROP TABLE task_runs;
ALTER TABLE task_runs_new RENAME TO task_runs;

CREATE INDEX task_runs_task ON task_runs (task_id, id);
CREATE INDEX task_runs_open ON task_runs (agent_id) WHERE ended_at IS NULL;
CREATE INDEX task_runs_ended ON task_runs (ended_at);
