-- Runners: agentqueued runner processes on other machines that hold agents
-- and connect out to the daemon (docs/runners.md). A runner's id is its
-- name; token_hash is the hex SHA-256 of its token, which is never stored;
-- labels is a JSON array of ids; capacity is the most runs it holds at once
-- (0: as many as it has agents). last_seen_at, version and address are
-- those of its latest request, NULL and empty before its first.
CREATE TABLE runners (
    id           TEXT PRIMARY KEY,
    token_hash   TEXT NOT NULL UNIQUE,
    labels       TEXT NOT NULL DEFAULT '[]',
    capacity     INTEGER NOT NULL DEFAULT 0 CHECK (capacity >= 0),
    state        TEXT NOT NULL CHECK (state IN ('ACTIVE', 'DRAINING')),
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER,
    version      TEXT NOT NULL DEFAULT '',
    address      TEXT NOT NULL DEFAULT ''
);
-- The runner an agent is on; NULL for the daemon's own agents. A runner is
-- removed with its agents (Store.RemoveRunner), so the key never dangles.
ALTER TABLE agents ADD COLUMN runner_id TEXT REFERENCES runners (id);
CREATE INDEX agents_runner ON agents (runner_id) WHERE runner_id IS NOT NULL;
