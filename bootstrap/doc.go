// Package bootstrap starts a relay on a database that already has outbox
// rows, and recovers one whose slot was lost: snapshot, then stream, with no
// gap and no duplicate at the seam.
//
// # Guarantees
//
// After Snapshot (the relay's first-start hook, FirstStart) returns the
// consistent point cp, every outbox row committed before cp is in its topic
// exactly once (rows the router rejects are in the dead-letter topic), every
// row committed after cp is in the replication stream from cp, and the relay
// marker `_deltabus/relays/<appId>.json` exists. Snapshot is idempotent: if
// it fails or the process dies at any moment, running it again (the relay
// does so on restart: the slot exists, the marker does not) ends in the same
// state, each event once.
//
// # How
//
//  1. An idle leftover slot is dropped (a bootstrap that never finished, or
//     a lost slot during Recover).
//  2. The identity of every event already in a topic written by this relay
//     (a topic whose table holds our txn for it: appId in a topic's own
//     table, appId/topic in a group's) is read: 16 bytes per event (the
//     uuid; for dead letters a hash of source table and raw row), kept as
//     a sorted slice. A group's table is read once for all of its topics:
//     files whose topic bounds (topic.MayHold) hold none of them are
//     skipped unread, and of the others only those topics' rows are kept.
//  3. `CREATE_REPLICATION_SLOT <slot> LOGICAL pgoutput (SNAPSHOT 'export')`
//     on a replication connection. Options.Connections (default 1) normal
//     connections each run `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;
//     SET TRANSACTION SNAPSHOT '<name>'` (with synchronize_seqscans off).
//     The replication connection stays open, idle, until the marker is
//     written (step 5): the slot stays active, so a second relay starting
//     meanwhile finds it in use and stops, instead of taking it for an idle
//     leftover and dropping it.
//  4. With one connection each table of the publication
//     (pg_publication_tables) is one unit, read by `COPY (SELECT <all
//     columns> FROM t) TO STDOUT (FORMAT binary)`: a sequential scan, every
//     heap page read once whatever the number of topics, through a small
//     ring of buffers. With several, each table is split into units of at
//     most 8192 heap blocks (64 MiB), at least one per connection, the last
//     open-ended, which connections take from a shared queue and read with
//     `... WHERE ctid >= '(a,0)' AND ctid < '(b,0)'`, a TID range scan
//     (PostgreSQL < 14 has none: each table is then one unit). A unit's rows
//     go, in 256 KiB chunks of whole tuples, to Options.Workers (default 2)
//     goroutines that build and encode the events, each into its own
//     files: encoding costs more CPU than the server's read. Each topic's
//     rows go to one worker while that keeps the workers' loads within 5/4
//     of even (fewer files, larger row groups within the memory bound);
//     otherwise (one topic is most of the rows) chunks are dealt in turn
//     (topicRoute). Binary is
//     used when every column's text output can be rebuilt exactly from it
//     (text, varchar, bpchar, name, json, jsonb, uuid, bool, int2/4/8,
//     timestamp; timestamptz when the session's TimeZone is UTC; DateStyle
//     ISO), else the table is read in text format, the one pgoutput sends.
//     When the mapped columns have their usual types (uuid id, text topic,
//     key and type, json/jsonb/text payload and headers, int schema_version,
//     timestamp[tz] occurred_at) a row becomes an event straight from its
//     binary values. Any row that is not plainly valid (a NULL, an invalid
//     topic, bad JSON, an out-of-range value), and every row of other
//     tables, is turned into its exact text tuple and routed by
//     outbox.Router exactly as streamed rows are, so dead letters and their
//     reasons are the stream's. Each worker streams rows into one
//     topic.FileWriter per topic it meets, writing under the folder of the
//     topic's table (catalog.Placement: its own, or its group's for a
//     topic a group places; groups are read once, when the copy starts).
//     A grouped topic's files thus hold that topic only, and readers of
//     the group's other topics skip them by their stats. Past 8 MiB of
//     unencoded rows across them the largest is encoded into a row group,
//     so memory is bounded by the writers' buffers, never by the table.
//     Events already present (step 2) are skipped. Every other event of a
//     topic with contracts is judged as the stream judges it
//     (Options.Contracts, contracts.go): a refused one goes to
//     _dead_letter with the stream's reason, and in a topic that holds on
//     violations it fails the bootstrap, nothing written. When a unit is
//     done its files are uploaded; they stay invisible (unreferenced)
//     until step 5.
//  5. One Delta commit per topic holds all of its snapshot files, in unit
//     and worker order, with txn{appId, version = cp - 1}: appId/topic in a
//     group's table, whose topics are committed one after the other
//     (deltasink.Sink.CommitFiles, which registers a grouped topic with
//     the table's id). A topic whose placement changed since its files
//     were written (a group created meanwhile) fails the bootstrap, which
//     is redone. Topics whose rows were all present get no commit. Then
//     the marker is written, then cp returned.
//
// # What snapshot rows carry
//
//   - commit_lsn = cp - 1: strictly below the commit LSN of every streamed
//     transaction (those commit at or after cp), and it is the txn version of
//     the snapshot commit, so the stream's exactly-once rule (skip source
//     transactions with commit LSN <= the topic's txn version) skips nothing
//     the snapshot did not copy.
//   - seq: unique within the topic (a counter the workers share) and
//     increasing within each data file, whose snapshot rows are in the
//     table's physical order (for an append-only outbox, about insertion
//     order). A snapshot has no commit order to offer; occurred_at is the
//     event's own order. Sorting a topic by (commit_lsn, seq) puts the
//     snapshot rows first, then the streamed ones in commit order; so does
//     reading it by Delta version. Dead letters get a seq unique across
//     units.
//   - xid = 0; commit_time = when the slot was created.
//
// # Crashes and recovery
//
// The exported snapshot dies with the process that created the slot, so a
// bootstrap cannot be resumed: it is redone with a new slot and snapshot,
// deduplicated by event id against what a previous attempt committed. Topic
// commits of an earlier attempt carry a lower txn version (LSNs only grow;
// Snapshot refuses otherwise), so the new commits are accepted. Files of
// an attempt that died before its commit are unreferenced orphans.
//
// Recover (`relay bootstrap --recover`) handles a missing or invalidated
// slot (wal_status = 'lost') of a relay that has a marker: the same steps,
// deduplicated against everything the topics hold. Events deleted from the
// outbox while no slot retained WAL cannot be recovered (RecoverWarning);
// the reconciler shows them. After it, `relay run` streams from the new
// consistent point.
//
// # Rebuilding one topic
//
// Rebuild (`relay rebuild --topic T`) re-snapshots one topic while the
// running relay keeps streaming the others, DBLog-style: watermarks in the
// stream (pg_logical_emit_message), the relay pausing T at the first and
// holding the slot there, an exact snapshot, and a seam check by xid. The
// protocol and its proof are in relay/rebuild.go. Its rows carry commit_lsn
// = R, the snapshot commit's txn version (max of the pause watermark and the
// table's txn version + 1), and seq in (occurred_at, id) order (it reads
// the one topic through the topic index, in per-topic units); events the
// table already holds are skipped, so a rebuild of a healthy table adds
// nothing. Events _dead_letter holds from this source are skipped too (an
// event is in its topic or in _dead_letter, never both, whatever the
// registry says since), and the other events are judged against their
// contracts as the stream does: dead letters _dead_letter lacks (an event
// the registry refuses now) are committed to it by the rebuild, before it
// hands the snapshot over, and a refusal in a topic that holds on
// violations fails the rebuild with the topic kept paused. A table that
// cannot be read must be moved away first; Rebuild refuses it with that
// instruction.
//
// A grouped topic is rebuilt the same way inside its group's table: the
// events it holds and its txn (appId/topic) are read from its rows there,
// its snapshot files (of it alone) are written to that table's folder,
// and the relay commits them with the topic's txn while it streams the
// group's other topics into the same table. When the group's table was
// deleted, the rebuild recreates it and registers the topic with the new
// table's id; the group's other topics stay held (Missing) until each is
// rebuilt or aborted (RebuildResult.Held lists them).
//
// # Limits
//
//   - Rebuild reads its topic through the index led by the topic column;
//     without one, with a full scan plus a sort.
//   - Each connection parses and encodes its rows in one goroutine; on two
//     cores the PostgreSQL backends take the rest.
//   - A unit keeps up to 128 KiB of encoded data per topic writer in memory
//     before spilling to a temporary file: a unit meeting hundreds of
//     topics holds that much per topic.
//   - A session TimeZone other than UTC makes tables with timestamptz
//     columns use the text format (about 1.6 times the CPU per row,
//     PostgreSQL and relay together).
//   - seq is an int32: at most 2^31 snapshot rows per topic.
//   - Step 2 holds 16 bytes per event of our topics in memory (32 MB for two
//     million events).
package bootstrap
