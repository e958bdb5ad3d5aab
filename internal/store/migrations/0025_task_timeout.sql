-- A task's own cap on each run's wall-clock time (nanoseconds; 0: none),
-- from `timeout` on the task or its workflow step. The orchestrator ends
-- a run at the smaller of it and the agent's max_runtime.
ALTER TABLE tasks ADD COLUMN timeout_ns INTEGER NOT NULL DEFAULT 0;
