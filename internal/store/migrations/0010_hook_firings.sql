-- Hooks fire once per firing key (a scheduled time, an event, a manual
-- fire): the key is unique per hook, so a restart or a second tick never
-- fires it twice. A schedule counts from schedule_from (creation, a changed
-- trigger, re-enabling). Failed runs say why.
ALTER TABLE hooks ADD COLUMN schedule_from INTEGER NOT NULL DEFAULT 0;
UPDATE hooks SET schedule_from = created_at;
ALTER TABLE hook_runs ADD COLUMN fire_key TEXT NOT NULL DEFAULT '';
ALTER TABLE hook_runs ADD COLUMN scheduled_at INTEGER;
ALTER TABLE hook_runs ADD COLUMN error TEXT NOT NULL DEFAULT '';
UPDATE hook_runs SET fire_key = 'legacy:' || id;
CREATE UNIQUE INDEX hook_runs_fire ON hook_runs (hook_id, fire_key);
CREATE INDEX hook_runs_scheduled ON hook_runs (hook_id, scheduled_at) WHERE scheduled_at IS NOT NULL;
CREATE INDEX hook_runs_project ON hook_runs (project_id, started_at);

-- How far each consumer of the outbox's task events has read.
CREATE TABLE event_cursors (
    name    TEXT PRIMARY KEY,
    last_id INTEGER NOT NULL
);
