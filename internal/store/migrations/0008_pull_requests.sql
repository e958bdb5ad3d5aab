-- The pull request each task lands through (the newest one of its
-- attempts), and what the watcher last saw of it.
CREATE TABLE pull_requests (
    task_id        TEXT PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
    project_id     TEXT NOT NULL,
    owner          TEXT NOT NULL,
    repo           TEXT NOT NULL,
    number         INTEGER NOT NULL,
    url            TEXT NOT NULL,
    branch         TEXT NOT NULL,
    state          TEXT NOT NULL DEFAULT 'open',
    etag           TEXT NOT NULL DEFAULT '',
    reviews_etag   TEXT NOT NULL DEFAULT '',
    last_review_id INTEGER NOT NULL DEFAULT 0,
    next_check_at  INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
CREATE UNIQUE INDEX pull_requests_number ON pull_requests (owner, repo, number);
CREATE INDEX pull_requests_due ON pull_requests (next_check_at) WHERE state = 'open';
