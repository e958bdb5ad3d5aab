-- A task's own runner labels (docs/runners.md, "Placement"): a JSON array
-- of labels an agent's runner must all have, besides those of the task's
-- project; '[]' for none.
ALTER TABLE tasks ADD COLUMN runner_labels TEXT NOT NULL DEFAULT '[]';
