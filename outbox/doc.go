// Package outbox is the contract between producers, the outbox table and
// the topic tables: the Event and DeadLetter types, topic-name rules, the
// column Mapping of an outbox table, the Router that turns decoded rows
// into events, and Write, the producer's helper.
//
// # Routing guarantees
//
// Router.Route is total: every INSERT into a published table becomes
// exactly one Event or exactly one DeadLetter, never nothing and never an
// error, whatever the row holds. Nothing is dropped and a bad row never
// blocks the stream:
//
//   - An INSERT whose mapped columns all hold usable values becomes an
//     Event. Payload and Headers are the JSON text exactly as PostgreSQL
//     sent it (jsonb text output; json/jsonb columns are not re-parsed,
//     other column types are checked to be JSON). OccurredAt is UTC with
//     microsecond precision. Optional columns that are unmapped or NULL
//     take their defaults: schema version 1, no headers, occurred_at = the
//     source commit time.
//   - Any other INSERT becomes a DeadLetter naming every problem found
//     (missing or NULL id, id not a uuid, NULL or invalid topic, a mapped
//     column missing from the table, NULL key/type/payload, schema_version
//     not an int32, payload or headers not JSON, occurred_at unparsable, a
//     binary or unchanged-TOAST value), with the source table, the raw row
//     as a JSON object and the fields that could be read. Its ID is never
//     empty: the row's uuid, or "dl-<commit LSN hex>-<seq>".
//   - An UPDATE of an outbox row becomes a DeadLetter (ReasonUpdate):
//     outbox rows are immutable.
//   - DELETE (retention clean-up) and TRUNCATE are ignored and counted.
//
// Events and dead letters copy what they keep: they stay valid after the
// decoder reuses its buffers. Column positions are resolved once per
// *decoding.Relation; a valid row costs two allocations.
//
// The relay must read values in text format with DateStyle ISO (the
// replication connection's defaults); any TimeZone is fine.
//
// # Topic names
//
// ValidTopic: 1 to 128 characters of [a-z0-9._-], starting with a letter
// or digit, no "..". Topics are path segments of the store; names starting
// with "_" are reserved (DeadLetterTopic).
//
// # Producing
//
// Write (or Writer.Write for another table or layout) inserts events
// inside the caller's transaction, all in one statement, in argument
// order; it checks every event before sending and writes nothing if one
// is invalid. It records the caller's W3C trace context (traceparent,
// tracestate, baggage) in each event's headers without replacing a field
// the caller set (see TraceContext); the relay keeps headers unchanged, so
// consumers continue the producer's trace (Event.TraceContext). See
// example/producer.
package outbox
