// Package subscribe reads DeltaBus topic tables as consumer groups:
// Subscribe polls a topic's Delta log after the group's checkpoint and
// hands its events, in batches, to a Handler, then commits the position.
// The bus has no broker: a group's position is a Checkpoint (Delta version,
// event offset inside the version) kept where the consumer chooses.
//
// # Guarantees
//
//   - At least once: a batch's position is committed only after the handler
//     returned nil for it. A handler error stops Subscribe with the
//     checkpoint before the batch; a crash delivers again what was handled
//     after the last committed checkpoint (one batch with pgcheckpoint; up
//     to two with StoreCheckpoints, whose writes run in the background while
//     the next batch is handled). Nothing is skipped.
//   - Effectively once with pgcheckpoint: the checkpoint is written in the
//     transaction the handler gets (Batch.Tx), so the handler's state change
//     and the position commit together; a crash anywhere leaves them in
//     agreement. The row lock on the checkpoint fences a second consumer of
//     the group (ErrCheckpointMoved), so a batch is never applied twice.
//   - Order: versions in order; within a version the data files in the order
//     of their add actions and rows in file order, which is (commit_lsn, seq)
//     order for everything the relay streams. Rows a bootstrap or rebuild
//     copied from a snapshot share one commit_lsn and come in file order.
//     Deduplicate by event_id.
//   - Only data: versions whose actions change no data (compaction's
//     remove+add with dataChange=false, metadata, commitInfo-only) deliver
//     nothing, and the checkpoint moves past them. A version that deletes or
//     updates rows (remove with dataChange=true, cdc files) stops the
//     subscription: topic tables are append-only.
//   - Cheap when idle: once caught up, a poll (Options.PollInterval, default
//     250 ms) is one List of _delta_log starting after the last version read
//     (startAfter), never from 0, and no snapshot is reloaded.
//   - Bounded memory whatever a version's size: data files are read one
//     at a time per decoder (two decoders read ahead), from their column
//     chunks into chunks of 1,024 events (PLAIN and dictionary pages are
//     decoded straight from the page bytes by package parquetpage; other
//     encodings and codecs, and files not laid out as the relay writes
//     them, through arrow-go); a batch holds at most
//     Options.BatchSize events. Data files over Options.MaxFileBytes are
//     refused. The strings of one column of one 1,024-event chunk share an
//     allocation (never reused, so events may be kept): keeping one event's
//     string keeps that chunk's column, or, for a dictionary-encoded column,
//     the file's dictionary of it (up to 64 KiB). While there is something to read,
//     each decoder keeps its page readers' buffers (the largest compressed
//     page and the last dictionary of each column) and, on local disk, the
//     buffer of its last data file (up to 32 MiB), for the next file; they
//     are dropped once caught up.
//   - The table's identity: a checkpoint records the Delta table id; a
//     topic table deleted and recreated (its versions restart) is an error,
//     as is a commit already read that changed or vanished.
//
// # Topics of a group
//
// A topic of a topic group (catalog.Group) lives in its group's shared
// table (catalog.Locate): the subscription polls that table's log, reads
// of each version only the data files whose topic bounds in the log may
// hold the topic (sink/topic.MayHold; files of other topics only are
// never opened) and of those only the rows whose topic column is the
// topic. A position is (version of the group table, offset among the
// topic's events of that version); a version without any of them delivers
// nothing and the checkpoint moves past it, as past a compaction. The
// checkpoint stays keyed by (group, topic) and records the group table's
// id; retention, Reset, FromTime and FromLatest work on the group table's
// log. A grouped topic not registered yet (no event committed) is read
// where the groups' patterns place it, and its registry entry is read
// again at each poll until it is (one Get more): should the relay
// register it in another table (a group created meanwhile, first in name
// order), the subscription stops with an error.
//
// # Retention
//
// Log clean-up deletes commits older than delta.logRetentionDuration,
// keeping the newest checkpoint before that horizon, and VACUUM deletes data
// files a compaction replaced. A group whose position the log no longer
// holds fails with a RetentionError, "retention passed this group's
// position (version N, earliest M)"; it never jumps forward on its own. The
// earliest version is read from the listing (the first commit present). A
// new group starts at version 0, so on a cleaned log it fails the same way:
// choose a start (FromVersion, FromTime, FromLatest) or Reset explicitly.
// `relay check consumers` shows each group's headroom before clean-up
// passes it.
//
// # Replay and rebuilding an output
//
// Reset moves a group to a version or to the first version committed at or
// after a time (a compare-and-set: a running consumer of the group fails its
// next commit rather than overwrite it). To rebuild what a consumer
// materialises without stopping it, run a second consumer with a new group
// into a new table from the version you need (examples/materialize
// --group orders-v2 --table orders_v2 --from-version 0); when `relay check
// consumers` shows it caught up and complete, switch readers to the new
// table (e.g. CREATE OR REPLACE VIEW), stop the old consumer and drop its
// table and checkpoint.
//
// # Deduplication
//
// Options.Dedup = n drops an event whose event_id is among the last n ids
// this subscription delivered: a ring of n ids plus a map, about 100 bytes
// per id (n = 100,000 is ~10 MB). It catches duplicates within the topic
// that lie within n events of each other (the bus itself writes each event
// once; re-copies by hand or by another writer do not). It is per process:
// it does not stand in for pgcheckpoint against redelivery after a crash.
//
// # Batches by column
//
// Options.Columns hands each batch over as Batch.Columns instead of
// Batch.Events: event i's fields are read one by one (Columns.Payload(i),
// Columns.CommitLSN(i), ..., or Columns.Event(i) whole) straight from the
// decoded columns, so no Event is built and written into the batch per
// event. Same events, order, positions, checkpoints and guarantees; the
// strings read may be kept. A batch by column keeps the decoded chunks it
// spans until it is handled, so it is handed over early (fewer than
// BatchSize events) when it spans more than 32 of them (many small files).
//
// # Tracing
//
// Each handler call runs in a span, "deltabus.subscribe.handle"
// (Options.Tracer, default the global provider), linked to the producer
// spans whose W3C trace context the events carry in their headers (at
// most MaxProducerLinks). A handler continues one event's producer trace
// with Event.TraceContext(ctx).
//
// # Checkpoint stores
//
// Checkpoints is the interface; StoreCheckpoints keeps
// _deltabus/consumers/<group>/<topic>.json objects in the DeltaBus store
// (CheckpointKey; group names follow the topic-name rules, ValidGroup);
// subscribe/pgcheckpoint keeps a table in the consumer's PostgreSQL.
// subscribe/checkpointtest is the conformance suite both pass.
package subscribe
