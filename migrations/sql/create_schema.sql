-- The schema that holds the outbox table.
CREATE SCHEMA IF NOT EXISTS {{.Schema}};
