-- Retention: finished tasks leave the working tables for the archive,
-- which keeps each one's detail (task, edges, events, result, runs) as it
-- was when archived; the files of ended attempts are pruned and the run
-- says when.
CREATE TABLE archived_tasks (
    id          TEXT PRIMARY KEY,
    project_id  TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    archived_at INTEGER NOT NULL,
    task        TEXT NOT NULL,
    detail      TEXT NOT NULL
);
CREATE INDEX archived_tasks_project ON archived_tasks (project_id, status);
CREATE INDEX archived_tasks_at ON archived_tasks (archived_at);

CREATE INDEX tasks_finished ON tasks (updated_at) WHERE status IN ('COMPLETED', 'BLOCKED');

ALTER TABLE task_runs ADD COLUMN files_pruned_at INTEGER;
CREATE INDEX task_runs_files ON task_runs (ended_at) WHERE files_pruned_at IS NULL AND ended_at IS NOT NULL;

CREATE INDEX hook_runs_started ON hook_runs (started_at) WHERE status != 'running';
CREATE INDEX workflow_runs_ended ON workflow_runs (ended_at) WHERE ended_at IS NOT NULL;

-- Deleting an archived task's events checks the edges that name one as
-- their resolving event: without this index, each deleted event would
-- scan every edge.
CREATE INDEX task_dependencies_resolving ON task_dependencies (resolving_event_id);
