-- The outbox table. Producers INSERT rows in their business transaction;
-- the relay reads them from the replication stream. Rows are immutable:
-- an UPDATE becomes a dead letter, a DELETE (retention clean-up) is ignored.
-- gen_random_uuid() is built in since PostgreSQL 13.
CREATE TABLE IF NOT EXISTS {{.Table}} (
    id             uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    topic          text        NOT NULL,
    key            text        NOT NULL,
    type           text        NOT NULL,
    schema_version int         NOT NULL DEFAULT 1,
    payload        jsonb       NOT NULL,
    headers        jsonb,
    occurred_at    timestamptz NOT NULL DEFAULT now()
);
