-- Each run records the generation of the daemon lease under which it was
-- claimed: a daemon never signals the process group of a run claimed under
-- a newer generation than its own (it has been deposed). Runs from before
-- this migration count as generation 0, older than any daemon's.
ALTER TABLE task_runs ADD COLUMN lease_generation INTEGER NOT NULL DEFAULT 0;
