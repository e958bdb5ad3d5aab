-- A question waits for its answer whatever becomes of the run that asked
-- it (a restart, the agent's CLI giving up on the call): its task stays
-- WAITING_INPUT until the question is answered, expires, or the task is
-- taken away from it. expires_at is fixed when the question is asked
-- (asked_at plus the input timeout then in force; questions asked before
-- this version get the default four hours); default_answer is the answer
-- the agent proposed, which on_expiry: default uses; closed_reason says why
-- a question was closed unanswered.
ALTER TABLE questions ADD COLUMN expires_at INTEGER NOT NULL DEFAULT 0;
UPDATE questions SET expires_at = asked_at + 14400000000000;
ALTER TABLE questions ADD COLUMN default_answer TEXT;
ALTER TABLE questions ADD COLUMN closed_reason TEXT NOT NULL DEFAULT '';
UPDATE questions SET closed_reason = 'its task was cancelled' WHERE closed_at IS NOT NULL;
CREATE INDEX questions_expiry ON questions (expires_at)
    WHERE answer IS NULL AND timed_out_at IS NULL AND closed_at IS NULL;
-- The agent of the run that asked, for a task its answer made READY again:
-- the scheduler prefers it, so that the CLI resumes its session.
ALTER TABLE tasks ADD COLUMN prefer_agent_id TEXT NOT NULL DEFAULT '';
