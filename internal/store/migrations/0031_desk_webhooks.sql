-- Escalations to be POSTed to a desk webhook (one of the daemon's
-- desk.webhooks, by name: the URL stays in the configuration), written in
-- the transaction of the escalation's mark and delivered after commit,
-- retried with backoff: a crash loses none, a delivery is made once.
CREATE TABLE desk_webhooks (
    key             TEXT PRIMARY KEY,
    webhook         TEXT NOT NULL,
    payload         TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    delivered_at    INTEGER,
    given_up_at     INTEGER,
    last_error      TEXT NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL
);
CREATE INDEX desk_webhooks_due ON desk_webhooks (next_attempt_at) WHERE delivered_at IS NULL AND given_up_at IS NULL;
