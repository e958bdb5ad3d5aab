-- A verification's note in columns of its own: the event that completes
-- the task once its work has landed, the person who decided, and the text
-- (reason, note, or what the phase waits for). Before, one detail column
-- packed "EVENT\nreason" (deliver; landing of a VERIFYING task) or
-- "actor\ntext" (approved, rejected; landing of a task awaiting approval).
ALTER TABLE verifications RENAME COLUMN detail TO text;
ALTER TABLE verifications ADD COLUMN event TEXT NOT NULL DEFAULT '';
ALTER TABLE verifications ADD COLUMN actor TEXT NOT NULL DEFAULT '';

UPDATE verifications SET
    event = CASE WHEN instr(text, char(10)) > 0 THEN substr(text, 1, instr(text, char(10)) - 1) ELSE text END,
    text = CASE WHEN instr(text, char(10)) > 0 THEN substr(text, instr(text, char(10)) + 1) ELSE '' END
WHERE phase = 'deliver'
    OR phase = 'landing' AND coalesce((SELECT status FROM tasks WHERE id = verifications.task_id), '') != 'AWAITING_APPROVAL';

UPDATE verifications SET
    actor = CASE WHEN instr(text, char(10)) > 0 THEN substr(text, 1, instr(text, char(10)) - 1) ELSE text END,
    text = CASE WHEN instr(text, char(10)) > 0 THEN substr(text, instr(text, char(10)) + 1) ELSE '' END
WHERE phase IN ('approved', 'rejected')
    OR phase = 'landing' AND (SELECT status FROM tasks WHERE id = verifications.task_id) = 'AWAITING_APPROVAL';
