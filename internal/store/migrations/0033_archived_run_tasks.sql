-- An archived task of a workflow run is still one of the run's tasks: the
-- run counts it, lists it and reads its step's progress from it. Its run
-- (NULL for a task of no run) and step are kept beside its detail, filled
-- in for the tasks archived before.
ALTER TABLE archived_tasks ADD COLUMN run_id TEXT;
ALTER TABLE archived_tasks ADD COLUMN step_name TEXT NOT NULL DEFAULT '';
UPDATE archived_tasks SET run_id = json_extract(task, '$.run_id'),
    step_name = coalesce(json_extract(task, '$.step_name'), '')
    WHERE json_extract(task, '$.run_id') IS NOT NULL AND json_extract(task, '$.run_id') != '';
CREATE INDEX archived_tasks_run ON archived_tasks (run_id, step_name) WHERE run_id IS NOT NULL;
