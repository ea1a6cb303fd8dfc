-- Serves the reconciler (rows of a topic over a time window) and the
-- retention janitor.
CREATE INDEX IF NOT EXISTS {{.Index}} ON {{.Table}} ({{.IndexColumns}});
