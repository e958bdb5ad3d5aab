-- What each run of an agent CLI showed of itself: the CLI and its version,
-- the cost it reported, the tool calls it refused for want of a permission
-- and the MCP servers not yet connected when its first turn began. An
-- agent keeps the CLI version its latest run reported, for warnings about
-- versions older than the known-good one.
ALTER TABLE task_runs ADD COLUMN cli TEXT NOT NULL DEFAULT '';
ALTER TABLE task_runs ADD COLUMN cli_version TEXT NOT NULL DEFAULT '';
ALTER TABLE task_runs ADD COLUMN cost_usd REAL;
ALTER TABLE task_runs ADD COLUMN denied_tools TEXT NOT NULL DEFAULT '[]';
ALTER TABLE task_runs ADD COLUMN mcp_not_ready TEXT NOT NULL DEFAULT '[]';
ALTER TABLE agents ADD COLUMN cli_version TEXT NOT NULL DEFAULT '';
-- A completion whose agent said it made no changes on purpose.
ALTER TABLE task_results ADD COLUMN no_changes INTEGER NOT NULL DEFAULT 0;
-- When the agent's CLI gave up on a question (its call was cancelled)
-- before a human answered: the question stays open, and its answer ends the
-- pause this caused.
ALTER TABLE questions ADD COLUMN abandoned_at INTEGER;
