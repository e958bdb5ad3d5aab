-- An agent a person paused takes no new task; its current run goes on.
ALTER TABLE agents ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
