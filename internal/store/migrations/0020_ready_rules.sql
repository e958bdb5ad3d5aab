-- The distinct own rules of a project's READY tasks, read entry by entry
-- (a skip-scan) so that a round can leave out the tasks they hold back
-- without reading their rows.
CREATE INDEX tasks_ready_rules ON tasks (project_id, rules) WHERE status = 'READY' AND rules <> '[]';
