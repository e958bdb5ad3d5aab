-- Core schema: projects, repos, tasks with per-edge dependency facts, the
-- task audit log, agents, hooks, the append-only token ledger, the outbox
-- and the daemon lease. Times are Unix nanoseconds (UTC).

CREATE TABLE projects (
    id                    TEXT PRIMARY KEY,
    name                  TEXT NOT NULL,
    credit_weight         REAL NOT NULL CHECK (credit_weight > 0),
    max_concurrent_agents INTEGER NOT NULL CHECK (max_concurrent_agents > 0),
    status                TEXT NOT NULL CHECK (status IN ('ACTIVE', 'PAUSED', 'ARCHIVED')),
    total_tokens_used     INTEGER NOT NULL DEFAULT 0,
    budget_limit          INTEGER,
    discord_channel_id    TEXT,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);

CREATE TABLE repos (
    id                 TEXT PRIMARY KEY,
    project_id         TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    source_type        TEXT NOT NULL CHECK (source_type IN ('CLONE', 'LINK', 'INIT')),
    url                TEXT NOT NULL DEFAULT '',
    source_path        TEXT NOT NULL DEFAULT '',
    default_branch     TEXT NOT NULL DEFAULT 'main',
    checkout_base_path TEXT NOT NULL DEFAULT '',
    in_place           INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX repos_project ON repos (project_id);

CREATE TABLE tasks (
    id                  TEXT PRIMARY KEY,
    project_id          TEXT NOT NULL REFERENCES projects (id),
    title               TEXT NOT NULL,
    description         TEXT NOT NULL DEFAULT '',
    priority            INTEGER NOT NULL DEFAULT 100,
    status              TEXT NOT NULL CHECK (status IN ('DEFINED', 'READY', 'ASSIGNED', 'IN_PROGRESS',
                            'WAITING_INPUT', 'PAUSED', 'VERIFYING', 'AWAITING_APPROVAL', 'COMPLETED',
                            'FAILED', 'BLOCKED')),
    verification_type   TEXT NOT NULL CHECK (verification_type IN ('AUTO_TEST', 'QA_AGENT', 'HUMAN')),
    retry_count         INTEGER NOT NULL DEFAULT 0,
    max_retries         INTEGER NOT NULL DEFAULT 3,
    parent_task_id      TEXT REFERENCES tasks (id),
    repo_id             TEXT,
    assigned_agent_id   TEXT,
    branch_name         TEXT,
    resume_after        INTEGER,
    requires_approval   INTEGER NOT NULL DEFAULT 0,
    pr_url              TEXT,
    plan_source         TEXT,
    is_plan_subtask     INTEGER NOT NULL DEFAULT 0,
    kind                TEXT NOT NULL DEFAULT '',
    metadata            TEXT NOT NULL DEFAULT '{}',
    created_by          TEXT NOT NULL DEFAULT '',
    not_before          INTEGER,
    expected_count      INTEGER NOT NULL DEFAULT 0,
    success_count       INTEGER NOT NULL DEFAULT 0,
    failure_count       INTEGER NOT NULL DEFAULT 0,
    acceptance_criteria TEXT NOT NULL DEFAULT '[]',
    test_commands       TEXT NOT NULL DEFAULT '[]',
    status_reason       TEXT NOT NULL DEFAULT '',
    cascade_root_id     TEXT NOT NULL DEFAULT '',
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    CHECK (retry_count >= 0 AND retry_count <= max_retries),
    CHECK (status != 'PAUSED' OR resume_after IS NOT NULL),
    CHECK (status NOT IN ('ASSIGNED', 'IN_PROGRESS') OR assigned_agent_id IS NOT NULL)
);
CREATE INDEX tasks_status ON tasks (status);
CREATE INDEX tasks_project_status ON tasks (project_id, status, priority);
CREATE INDEX tasks_project_kind_status ON tasks (project_id, kind, status);
CREATE INDEX tasks_parent ON tasks (parent_task_id) WHERE parent_task_id IS NOT NULL;

-- One row per dependency edge: downstream depends on upstream. SATISFIED is
-- final; BROKEN means the upstream is BLOCKED and the edge requires success.
CREATE TABLE task_dependencies (
    downstream         TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    upstream           TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    requires_success   INTEGER NOT NULL DEFAULT 1,
    resolution         TEXT NOT NULL DEFAULT 'PENDING' CHECK (resolution IN ('PENDING', 'SATISFIED', 'BROKEN')),
    resolved_at        INTEGER,
    resolving_event_id INTEGER REFERENCES task_events (id),
    PRIMARY KEY (downstream, upstream),
    CHECK (downstream != upstream)
) WITHOUT ROWID;
CREATE INDEX task_dependencies_upstream ON task_dependencies (upstream, downstream);

-- The audit log: one row per status change, written in its transaction.
CREATE TABLE task_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id     TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    from_status TEXT NOT NULL,
    to_status   TEXT NOT NULL,
    event       TEXT NOT NULL,
    reason      TEXT NOT NULL DEFAULT '',
    actor       TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL
);
CREATE INDEX task_events_task ON task_events (task_id, id);

CREATE TABLE agents (
    id                  TEXT PRIMARY KEY,
    name                TEXT NOT NULL,
    agent_type          TEXT NOT NULL,
    state               TEXT NOT NULL CHECK (state IN ('IDLE', 'STARTING', 'BUSY', 'PAUSED', 'ERROR')),
    current_task_id     TEXT REFERENCES tasks (id),
    checkout_path       TEXT,
    repo_id             TEXT,
    pid                 INTEGER,
    last_heartbeat      INTEGER,
    total_tokens_used   INTEGER NOT NULL DEFAULT 0,
    session_tokens_used INTEGER NOT NULL DEFAULT 0,
    created_at          INTEGER NOT NULL
);
CREATE INDEX agents_state ON agents (state);

CREATE TABLE hooks (
    id                 TEXT PRIMARY KEY,
    project_id         TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name               TEXT NOT NULL,
    enabled            INTEGER NOT NULL DEFAULT 1,
    trigger            TEXT NOT NULL,
    context_steps      TEXT NOT NULL DEFAULT '[]',
    prompt_template    TEXT NOT NULL DEFAULT '',
    llm_config         TEXT,
    cooldown_seconds   INTEGER NOT NULL DEFAULT 3600,
    max_tokens_per_run INTEGER,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
);
CREATE INDEX hooks_project ON hooks (project_id);

CREATE TABLE hook_runs (
    id              TEXT PRIMARY KEY,
    hook_id         TEXT NOT NULL REFERENCES hooks (id) ON DELETE CASCADE,
    project_id      TEXT NOT NULL,
    trigger_reason  TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'skipped')),
    event_data      TEXT,
    context_results TEXT,
    prompt_sent     TEXT,
    llm_response    TEXT,
    actions_taken   TEXT,
    skipped_reason  TEXT,
    tokens_used     INTEGER NOT NULL DEFAULT 0,
    started_at      INTEGER NOT NULL,
    completed_at    INTEGER
);
CREATE INDEX hook_runs_hook ON hook_runs (hook_id, started_at);
CREATE INDEX hook_runs_status ON hook_runs (status) WHERE status = 'running';

-- Token usage, append-only: budgets and fair share are sums over it.
CREATE TABLE token_ledger (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id         TEXT NOT NULL REFERENCES projects (id),
    task_id            TEXT NOT NULL DEFAULT '',
    agent_id           TEXT NOT NULL DEFAULT '',
    hook_run_id        TEXT NOT NULL DEFAULT '',
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    created_at         INTEGER NOT NULL
);
CREATE INDEX token_ledger_project_time ON token_ledger (project_id, created_at);
CREATE TRIGGER token_ledger_no_update BEFORE UPDATE ON token_ledger
BEGIN
    SELECT RAISE(ABORT, 'token_ledger is append-only');
END;
CREATE TRIGGER token_ledger_no_delete BEFORE DELETE ON token_ledger
BEGIN
    SELECT RAISE(ABORT, 'token_ledger is append-only');
END;

-- Notifications written with the state change, delivered after commit.
CREATE TABLE outbox (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    key             TEXT NOT NULL UNIQUE,
    kind            TEXT NOT NULL,
    project_id      TEXT NOT NULL DEFAULT '',
    task_id         TEXT NOT NULL DEFAULT '',
    payload         TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error      TEXT NOT NULL DEFAULT '',
    delivered_at    INTEGER,
    created_at      INTEGER NOT NULL
);
CREATE INDEX outbox_undelivered ON outbox (id) WHERE delivered_at IS NULL;

-- At most one daemon per database.
CREATE TABLE daemon_lease (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    owner       TEXT NOT NULL,
    hostname    TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    renewed_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
