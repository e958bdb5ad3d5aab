-- An edge names its resolving event once its upstream has finished; until
-- then the column is NULL, and every edge a batch makes (thousands at once)
-- would be written into the index under NULL, where no lookup ever goes.
-- Deleting an event looks its edges up by resolving_event_id = ?, which
-- this partial index answers as the whole one did.
DROP INDEX task_dependencies_resolving;
CREATE INDEX task_dependencies_resolving ON task_dependencies (resolving_event_id) WHERE resolving_event_id IS NOT NULL;
