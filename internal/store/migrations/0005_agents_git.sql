-- Profiles, sessions, verification, task results and plans.

-- A task may name a profile; a project names its default profile and other
-- settings (JSON: models.ProjectSettings); an agent has its own profile.
ALTER TABLE tasks ADD COLUMN profile TEXT NOT NULL DEFAULT '';
ALTER TABLE projects ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';
ALTER TABLE agents ADD COLUMN profile TEXT NOT NULL DEFAULT '{}';

-- A run is a task's work (kind 'work') or a review of it ('review'). Its
-- CLI session and the last cumulative usage it reported let a later run
-- resume the session and count only its own tokens.
ALTER TABLE task_runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'work';
ALTER TABLE task_runs ADD COLUMN session_id TEXT NOT NULL DEFAULT '';
ALTER TABLE task_runs ADD COLUMN usage TEXT NOT NULL DEFAULT '{}';
ALTER TABLE task_runs ADD COLUMN checkout_conflicts TEXT NOT NULL DEFAULT '[]';

-- What a completed run reported, handed to dependents.
CREATE TABLE task_results (
    task_id       TEXT PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
    run_id        INTEGER NOT NULL,
    summary       TEXT NOT NULL DEFAULT '',
    files_changed TEXT NOT NULL DEFAULT '[]',
    outputs       TEXT NOT NULL DEFAULT '',
    updated_at    INTEGER NOT NULL
);

-- The verification of a task in VERIFYING: its phase survives a restart.
CREATE TABLE verifications (
    task_id    TEXT PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
    attempt    INTEGER NOT NULL,
    phase      TEXT NOT NULL,
    source     TEXT NOT NULL DEFAULT '',
    detail     TEXT NOT NULL DEFAULT '',
    updated_at INTEGER NOT NULL
);

-- What reviewers and people said of a task's attempts.
CREATE TABLE task_feedback (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id    TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    source     TEXT NOT NULL,
    verdict    TEXT NOT NULL,
    text       TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX task_feedback_task ON task_feedback (task_id, id);

-- A plan proposed by a task's agent: its subtasks are created when the task
-- completes (after a person's approval when the project requires it).
CREATE TABLE plans (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id    TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    source     TEXT NOT NULL,
    tasks      TEXT NOT NULL,
    status     TEXT NOT NULL DEFAULT 'pending',
    error      TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    decided_at INTEGER
);
CREATE INDEX plans_task ON plans (task_id, id);
