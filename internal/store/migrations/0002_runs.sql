-- Agent runtime settings, one row per agent run, and the indexes the
-- scheduler's snapshot needs.

ALTER TABLE agents ADD COLUMN command TEXT NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN args TEXT NOT NULL DEFAULT '[]';
ALTER TABLE agents ADD COLUMN env TEXT NOT NULL DEFAULT '{}';
ALTER TABLE agents ADD COLUMN max_runtime INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN idle_timeout INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN projects TEXT NOT NULL DEFAULT '[]';

-- One row per attempt of a task on an agent. The run token authorises the
-- agent's RPC calls for this task only; only its SHA-256 is stored.
CREATE TABLE task_runs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id          TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    agent_id         TEXT NOT NULL REFERENCES agents (id),
    project_id       TEXT NOT NULL,
    attempt          INTEGER NOT NULL,
    token_hash       TEXT NOT NULL UNIQUE,
    pid              INTEGER,
    checkout_path    TEXT NOT NULL DEFAULT '',
    started_at       INTEGER NOT NULL,
    last_activity_at INTEGER NOT NULL,
    ended_at         INTEGER,
    outcome          TEXT NOT NULL DEFAULT '',
    error            TEXT NOT NULL DEFAULT ''
);
CREATE INDEX task_runs_task ON task_runs (task_id, id);
CREATE INDEX task_runs_open ON task_runs (agent_id) WHERE ended_at IS NULL;
CREATE INDEX task_runs_ended ON task_runs (ended_at);
CREATE INDEX token_ledger_time ON token_ledger (created_at);

-- Completions in the scheduling window.
CREATE INDEX task_events_completed ON task_events (created_at) WHERE to_status = 'COMPLETED';
