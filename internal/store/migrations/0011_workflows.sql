-- Workflows: reusable DAGs of steps, from files or the API; runs make
-- ordinary tasks that carry their run, step and place in a fan-out.
CREATE TABLE workflows (
    name             TEXT PRIMARY KEY,
    project_id       TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    definition       TEXT NOT NULL,
    source           TEXT NOT NULL DEFAULT '',
    origin           TEXT NOT NULL CHECK (origin IN ('file', 'api')),
    schedule         TEXT NOT NULL DEFAULT '',
    timezone         TEXT NOT NULL DEFAULT '',
    schedule_enabled INTEGER NOT NULL DEFAULT 1,
    schedule_from    INTEGER NOT NULL,
    next_run         INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);

-- A run keeps the definition it started from; a scheduled run is keyed by
-- its scheduled time, so each time starts one run.
CREATE TABLE workflow_runs (
    id           TEXT PRIMARY KEY,
    workflow     TEXT NOT NULL,
    project_id   TEXT NOT NULL REFERENCES projects (id),
    status       TEXT NOT NULL CHECK (status IN ('pending', 'running', 'success', 'failed', 'cancelled')),
    trigger      TEXT NOT NULL,
    triggered_by TEXT NOT NULL DEFAULT '',
    fire_key     TEXT NOT NULL,
    scheduled_at INTEGER,
    definition   TEXT NOT NULL,
    reason       TEXT NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    ended_at     INTEGER,
    UNIQUE (workflow, fire_key)
);
CREATE INDEX workflow_runs_active ON workflow_runs (status) WHERE status IN ('pending', 'running');
CREATE INDEX workflow_runs_workflow ON workflow_runs (workflow, created_at);

-- The steps of a run whose tasks exist: static steps at the start, dynamic
-- ones once, when their upstream steps are done.
CREATE TABLE workflow_run_steps (
    run_id     TEXT NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    step       TEXT NOT NULL,
    task_count INTEGER NOT NULL,
    expanded_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, step)
) WITHOUT ROWID;

ALTER TABLE tasks ADD COLUMN workflow_run_id TEXT;
ALTER TABLE tasks ADD COLUMN step_name TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN parallel_index INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN parallel_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN step_concurrency INTEGER NOT NULL DEFAULT 0;
CREATE INDEX tasks_workflow_run ON tasks (workflow_run_id, step_name, status) WHERE workflow_run_id IS NOT NULL;
