-- The scheduling rules in force, in order (body: a models.Rule as JSON),
-- and where the set came from: the configuration file ("config", followed
-- at each start) or the API ("api", kept across restarts). No rule_set
-- row means no set was ever stored.
CREATE TABLE rules (
    position INTEGER PRIMARY KEY,
    body     TEXT NOT NULL
);
CREATE TABLE rule_set (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    source     TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    updated_by TEXT NOT NULL
);
-- A task's own rules (a batch entry's rules), JSON array of models.Rule.
ALTER TABLE tasks ADD COLUMN rules TEXT NOT NULL DEFAULT '[]';
