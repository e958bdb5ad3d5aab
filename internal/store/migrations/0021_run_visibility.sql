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
