-- An agent's heartbeat timeout (nanoseconds; 0: not held to heartbeats),
-- and the agent type a task is routed to ('' for any agent).
ALTER TABLE agents ADD COLUMN heartbeat_timeout INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN agent_type TEXT NOT NULL DEFAULT '';

-- A hook run's trigger_reason in the specification's values (periodic,
-- cron, event:<type>, manual); the words it held before move to
-- trigger_detail. A scheduled run of a hook since deleted counts as
-- periodic.
ALTER TABLE hook_runs ADD COLUMN trigger_detail TEXT NOT NULL DEFAULT '';
UPDATE hook_runs SET trigger_detail = trigger_reason, trigger_reason = CASE
    WHEN trigger_reason LIKE 'fired by %' THEN 'manual'
    WHEN trigger_reason LIKE 'event %' THEN 'event:' ||
        CASE WHEN instr(substr(trigger_reason, 7), ' ') > 0
            THEN substr(trigger_reason, 7, instr(substr(trigger_reason, 7), ' ') - 1)
            ELSE substr(trigger_reason, 7) END
    WHEN trigger_reason LIKE 'schedule %' THEN
        CASE WHEN (SELECT json_extract(h.trigger, '$.type') FROM hooks h WHERE h.id = hook_runs.hook_id) = 'cron'
            THEN 'cron' ELSE 'periodic' END
    ELSE trigger_reason END;
