-- An agent's heartbeat timeout (nanoseconds; 0: not held to heartbeats),
-- and the agent type a task is routed to ('' for any agent).
ALTER TABLE agents ADD COLUMN heartbeat_timeout INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN agent_type TEXT NOT NULL DEFAULT '';
