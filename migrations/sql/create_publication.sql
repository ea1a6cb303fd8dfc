-- The publication the relay's slot reads; it publishes every operation so
-- that UPDATEs reach the dead-letter topic.
CREATE PUBLICATION {{.Publication}} FOR TABLE {{.Table}};
