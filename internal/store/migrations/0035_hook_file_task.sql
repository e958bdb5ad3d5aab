-- The task a hook files without a model (models.HookTask as JSON), NULL
-- for a hook that asks a model or only gathers context.
ALTER TABLE hooks ADD COLUMN file_task TEXT;
