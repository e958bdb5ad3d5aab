-- The chat thread of each task: created at the task's first notice that
-- needs one and reused on retries, so a restart never opens a second.
CREATE TABLE chat_threads (
    task_id    TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL,
    thread_id  TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);
