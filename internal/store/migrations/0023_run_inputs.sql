-- The values a workflow run was given for its workflow's inputs, defaults
-- filled in, as a JSON object.
ALTER TABLE workflow_runs ADD COLUMN inputs TEXT NOT NULL DEFAULT '{}';
