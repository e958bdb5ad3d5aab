-- Deleting a task checks that no agent holds it, and the archive's
-- candidates are tasks no agent holds: without this index, each archived
-- task scans every agent.
CREATE INDEX agents_current_task ON agents (current_task_id) WHERE current_task_id IS NOT NULL;
