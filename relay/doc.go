// Package relay is DeltaBus's streaming pipeline: it reads one logical
// replication slot (pgoutput), routes outbox rows into events and dead
// letters (package outbox), groups whole source transactions into batches,
// commits each batch as one commit per topic through a sink.Sink, and
// acknowledges to PostgreSQL only what is durable.
//
// Why this delivers every event to its topic exactly once, in source commit
// order, across crashes at any point, is argued in one place: the package
// doc of catalog ("Exactly once, in commit order", "Holds", "Rebuilding
// one topic"). This package implements that argument: the committer
// (commit.go) moves the durable position only after every topic commit of
// a batch returned, and never past rows a paced topic carries into the
// next batch (pace.go: Config.TopicCommitInterval bounds how often a topic
// commits, so S3 request costs stay bounded at high rates, and
// pace_state.go paces a table whose in-memory state has grown large, so
// the relay's memory stays bounded under sustained load); a session
// skips, per topic, what the topic's position says it holds (route.go);
// holds cap the acknowledged position (holds.go); rebuild watermarks are
// honoured only with a matching intent in the store (watermark.go); a
// topic whose rows are refused past Config.Breaker's rate is held instead
// of filling _dead_letter, until the operator releases it (breaker.go);
// a replayed row that was dead-lettered stays a dead letter (replay.go).
//
// Failure handling: any error ends the session (the open batch is
// discarded, the committer drained); Run logs it once, reports not ready
// (Ready) and starts a new session from the slot's confirmed position with
// backoff. A graceful stop (ctx cancelled) commits and acknowledges the
// current batch; past Config.ShutdownTimeout every blocking call is
// cancelled, so a stop never hangs on a hung store or database.
//
// Dead connections: a replication stream silent for the stream timeout
// (max(wal_sender_timeout, 10 s) unless Config.StreamTimeout says
// otherwise), a reply having been asked for and not come, ends the session
// with a *StreamTimeoutError (liveness.go); /readyz is false while the
// stream is silent past that bound, and the next session ends this
// process's abandoned walsender if the server still holds the slot with
// it. Every query of a session waits at most pgsource.QueryTimeout, and
// every connection dials with TCP keepalives and TCP_USER_TIMEOUT
// (package keepalive), so no state waits on the network without a
// deadline.
//
// Observability: Metrics are OpenTelemetry instruments served on /metrics
// under their Prometheus names (package telemetry); per-row updates are
// atomics. With Relay.Tracer set, each batch is a span and each topic
// commit a child span linked to the producer spans found in its events'
// headers (trace.go); headers are read only for sampled batches and never
// changed.
package relay
