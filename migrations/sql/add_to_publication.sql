-- Several outbox tables (in different schemas) can share one publication.
ALTER PUBLICATION {{.Publication}} ADD TABLE {{.Table}};
