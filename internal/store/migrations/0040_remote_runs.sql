-- A run on a runner (docs/runners.md) keeps what the daemon must not lose
-- when it restarts while the runner works on: report_seq is the number of
-- the last report of the runner's it took up, report_answer that report's
-- answer (NULL while it was being applied: a report interrupted by a crash
-- is not applied again), and remote_state a JSON object of the run's state
-- on the daemon's side (the served repository, whether the agent started,
-- what the agent reported through the RPC, how much of its log the daemon
-- has). remote_state is NULL for the daemon's own runs.
ALTER TABLE task_runs ADD COLUMN report_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE task_runs ADD COLUMN report_answer TEXT;
ALTER TABLE task_runs ADD COLUMN remote_state TEXT;
