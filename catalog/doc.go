// Package catalog is what DeltaBus keeps in its store besides the topic
// tables, and the one place that says why the relay delivers every outbox
// event to its topic exactly once, in source commit order.
//
// Every key of a catalog object is built by Key and read back by Parse;
// nothing else in DeltaBus writes a key under Prefix.
//
// # Store layout
//
// A store is a local folder (file:///path) or an S3 prefix (s3://b/p):
//
//	<topic>/                          one Delta table per topic (sink/topic, sink/delta)
//	  _delta_log/NNNNNNNNNNNNNNNNNNNN.json        commits, written put-if-absent
//	  _delta_log/NNNNNNNNNNNNNNNNNNNN.checkpoint.parquet, _last_checkpoint
//	  part-*.parquet                  data files; unreferenced ones are orphans of
//	                                  a batch that never committed (VACUUM removes them)
//	_group.<group>/                   one Delta table per topic group, shared by its topics
//	                                  (Group): rows of many topics in each data file
//	_dead_letter/                     the dead-letter topic: rows the relay could not route
//	_reconciliation/                  the reconciler's results (package reconcile)
//	_transactions/                    one record per source transaction that published
//	                                  events (package txlog)
//	_republished/                     one row per event a redrive or repair considered:
//	                                  published, present or refused, by which run (package republish)
//	_deltabus/                        the catalog (Prefix)
//	  topics/<topic>                  registry entry, written right after the table's
//	                                  version 0: a registered topic without a table was
//	                                  deleted, never "not created yet" (a table whose
//	                                  creator stopped before its entry is registered by
//	                                  the next writer that opens it); a grouped topic's
//	                                  names its group's table and that table's id
//	                                  (Placement), written before its first rows
//	  groups/<group>.json             Group: topic-name patterns whose new topics share
//	                                  the group's table, and its commit interval
//	  relays/<appId>.json             Marker: the relay's first start committed its snapshot;
//	                                  it names the source (Source: system id, database, slot),
//	                                  the timeline its progress is on and its epochs (Positions)
//	  forks/<appId>/<timeline>.json   Fork: the source moved to that timeline; the events
//	                                  published from the old one past the fork (phantoms)
//	  rebuilds/<topic>/<appId>/record.json    RebuildRecord: a rebuild's files and seam (relay rebuild)
//	  rebuilds/<topic>/<appId>/state.json     RebuildState: whether that relay holds the topic
//	  rebuilds/<topic>/<appId>/intents/<id>.json  Intent: a rebuild or abort the operator asked for
//	  rebuilds/<topic>/<appId>/release.json   Release: the operator lifts that relay's
//	                                  circuit-breaker hold (relay deadletter release)
//	  leases/<holder>.json            Lease: a writer's uncommitted files, kept from VACUUM
//	  claims/<table>/<appId>.json     Claim: which table (its Delta id) holds that source's
//	                                  progress of each topic of the table, and up to where
//	  consumers/<group>/<topic>.json  a consumer group's checkpoint (package subscribe)
//	  members/<group>/<topic>/        a group served to parallel members (package subscribe/members):
//	    log/NNNNNNNNNNNNNNNNNNNN.json   its state changes, written put-if-absent, in order
//	    snapshots/NNNN....json          its state after an entry
//	    protect.json, hold.json         retention that waits for it, and the hold maintenance keeps
//	  upcasts/<topic>/<type>/<v>.json  a JSON Patch turning version v of an event type into v+1 (members)
//	  probes/<name>                   written and deleted by the relay's preflight
//	  topicmeta/<topic>.json          TopicMeta: a topic's owner and description
//	                                  (relay topics describe; package topicmeta)
//	  unitycatalog/<appId>.json       the relay's Unity Catalog registrations (package governance)
//	  resolved/<appId>.json           Resolved: the source's resolved position
//	  republish/<id>.json             RepublishRun: a redrive's or repair's record (who,
//	                                  when, what, how many); ids sort by time
//
// Topic names are lowercase `[a-z0-9][a-z0-9._-]*` (names starting with "_"
// are internal), relay appIds are `deltabus-<system id>-<slot>` (or an
// earlier release's `deltabus-<slot>`), consumer groups follow
// the topic rule, ids are random hex: no name holds a "/", so every name is
// exactly one key segment and Parse(Key(kind, names...)) returns kind and
// names. Two objects never share a key, whatever names producers choose (the
// first layout kept a record at rebuilds/<topic>.json and a state at
// rebuilds/<topic>.relay.json, so topic "a.relay"'s record was topic "a"'s
// state; such legacy objects are still read when the new key is absent and
// they name the topic asked for). Every object is replaced atomically
// (storage.Store.Put): a reader sees the old or the new one, never a mix.
//
// # Exactly once, in commit order
//
// Notation: a source transaction T commits at LSN c(T) and ends at e(T);
// PostgreSQL sends transactions in commit order. The relay reads the slot
// from its confirmed position P and groups whole transactions, in order,
// into batches (never splitting one). A batch B is committed as one Delta
// commit per topic it touches, each carrying the Delta txn action
// {appId, version = c(last transaction of B)}; batches are committed one
// after another. Write v(t) for topic t's txn version of our appId.
//
// Group commit closes a batch as soon as the file stage is free (no
// timer). By default the file stage takes batch B+1 only once B is
// durable, so one batch is in flight. With --commit-overlap it pipelines
// two batches: the relay writes batch B+1's data files while B's log
// entries are being made durable. Only the data files overlap:
// the log entries of B+1 are written after every topic commit of B has
// returned, by one goroutine that takes batches in order, and B+1 is
// aborted (its files left as orphans, no log entry) when any commit of B
// fails. Data files no log entry references are invisible to every
// reader, so the argument below holds with "committed" meaning "its log
// entry landed", as before.
//
//  1. Acknowledge only the durable. The relay moves its durable position to
//     e(last transaction of B) only after every topic commit of B has
//     returned (put-if-absent of the commit file succeeded: it is durable),
//     and the flush position it sends PostgreSQL is that durable position,
//     capped by any hold (below). So every transaction that ends at or
//     before P has each of its events in a committed version of its topic.
//     A paced topic (relay --topic-commit-interval) may sit out a batch:
//     its rows are carried, uncommitted and in order, into the next batch
//     and committed with it (version = c(last transaction of that batch)),
//     and until then the durable position stops at the end of the batch
//     before the carried rows' first transaction.
//  2. Replay everything after P. After any crash or restart PostgreSQL
//     sends again every transaction that ends after P. With 1, no event is
//     lost.
//  3. Skip what a topic already holds. When a session opens topic t it reads
//     v(t) and drops every streamed transaction with c(T) <= v(t): t holds
//     it, because the commit that set v(t) held every event of t of every
//     transaction up to c(T) (batches are committed in order and v only
//     grows). Transactions with c(T) > v(t) are not in t (the commit that
//     would hold them never landed: its files are orphans). So each event is
//     in its topic once, whatever the crash point: after data files (of
//     one batch or of two, pipelined), after some topic commits of a
//     batch, before the acknowledgement.
//  4. Order. Batches are committed in order (the log stage takes them one
//     at a time, in the order the session closed them, and starts B+1
//     only after B is durable), so versions of a topic are in
//     commit order; within a data file rows are in (commit_lsn, seq) order.
//     A consumer reading versions in order, or sorting by (commit_lsn, seq),
//     sees source commit order.
//  5. Fencing. A commit that finds our appId already at or beyond its
//     version was written by another instance of this relay (a zombie after
//     a standby took over): the relay stops (delta.ErrAlreadyCommitted)
//     instead of writing the batch twice. PostgreSQL lets one process stream
//     from a slot at a time, and the appId names the slot's cluster, so
//     that other instance read the same source.
//  6. Idle slots move. When nothing is batched, committing or inside a
//     transaction, the relay acknowledges the server's WAL end from a
//     keepalive: every transaction before it was decoded and, by 1, is
//     durable; so WAL written by other tables is not held.
//  7. Holds. A topic held for a rebuild, because its table is missing or
//     was changed incompatibly, or because an event broke its contract
//     under a hold policy (H = that event's commit LSN), drops its events
//     from the hold position H on, and the relay never acknowledges beyond
//     H, so those events are sent again once the hold is lifted. Other
//     topics stream on; on their replay they skip what they hold (3). A
//     hold that starts while rows of its topic from transactions before H
//     wait in the open batch (a batch delay, a busy committer, rows
//     carried by pacing) caps the topic's position in that batch's commit
//     just below H's (sink.Batch.Hold), never at the batch's own, which is
//     past H: every row of the topic in the batch is of a transaction
//     before H, so v(t) < H, and the re-read after the lift takes the
//     topic's events from H on instead of skipping them as held (3).
//     A topic's circuit breaker (too many of its rows refused in a
//     window: HoldDeadLetterRate, package relay) holds _dead_letter from
//     the same H too, capped alike: its position is every topic's, and a
//     held topic's dead letter must not be skipped on the re-read as
//     below a position another topic's dead letter moved. Its hold is
//     recorded and restored by every session, and lifted only by the
//     operator (Release).
//
// Rows the router cannot turn into events go to _dead_letter under the
// same rules; a DELETE of an outbox row is not an event. So do events
// their contracts refuse, on every path that writes events (the stream,
// the first start's snapshot, a recovery, a rebuild) by one judgement
// (contract.Cache.Judge), with one dead letter each: an event is in its
// topic or in _dead_letter, never both (a rebuild skips the events
// _dead_letter holds from its source). Under a hold policy a snapshot
// path writes nothing and fails instead: it has no commit order to hold
// a topic at. The stream keeps that true when it reads a row again: a
// row of a transaction at or below _dead_letter's position, whose topic's
// position is older (the topic had no row in that batch, or its commit
// had not landed), is judged again, and after a fix of its contract or
// mapping would pass; so a replayed event that _dead_letter holds (by
// source, commit LSN and seq) stays a dead letter. Only a redrive brings
// it back (below).
//
// # Transaction records and resolved positions
//
// With transaction records on (the default), the relay also keeps, per
// source, the _transactions table (package txlog) and a resolved position
// (Resolved, resolved/<appId>.json). Write R(A) for the txn version of
// appId A in _transactions.
//
//  8. A record after its events. The session counts each transaction's
//     rows by the table they go to, whether the batch takes them or the
//     table already holds them (3), and adds the transaction's record to
//     the batch that acknowledges it (a paced table's carried rows take
//     their transactions' records with them into the next batch). The
//     committer commits a batch's records, with the txn {A, version = c(last
//     recorded transaction)}, after every topic commit of the batch
//     returned, and moves the durable position only then. So a record seen
//     means every event it counts is in a committed version of its table.
//  9. One record per transaction. A crash before the records' commit
//     leaves the durable position where it was: PostgreSQL sends the
//     transactions again (2), the topics skip them (3), their rows are
//     counted all the same, and the records are written once. A session
//     adds no record for a transaction with c(T) <= R(A) (recorded before
//     a restart); a records commit that finds A at or beyond its version
//     was made by another instance and fences this one (5).
//  10. Holds stop records. A transaction with a row a hold drops (7) gets
//     no record in this session, nor does any transaction after it: R(A)
//     only grows, so records stay in commit order, and since nothing past
//     the hold is acknowledged, the next session records them once the
//     hold is lifted. While a topic is held, records and the resolved
//     position stop at the hold for every topic of the source.
//  11. Resolved positions. The relay publishes the position it
//     acknowledges (the durable position L, capped by its holds) as
//     Resolved.LSN and its position P = Pos(L) as Resolved.Position, at most
//     every --resolved-interval, never lower than the one stored. Every
//     transaction T of the source with Pos(c(T)) < P ended at or before L,
//     so by 1 and 8 each of its events is in its topic and it has its
//     record; every transaction committing later has Pos(c(T)) >= P. A
//     reader that keeps, of several topics, the source's rows whose
//     position is below P, less the phantoms and phantom records the fork
//     records name, holds each source transaction whole or not at all: a
//     consistent cut across the topics (subscribe.ReadCut). Positions, not
//     commit LSNs: after a failover with phantoms the new timeline's LSNs
//     restart below the old P ("Timelines"), and a cut in LSNs would skip
//     them. Rows a bootstrap or rebuild copied carry c = cp - 1 and no
//     record: a snapshot has no transactions.
//
// # Events published outside the stream: redrives and repairs
//
// A dead letter whose topic now admits it (`relay deadletter redrive`,
// package deadletter) and an event reconcile found missing from its topic
// (`relay reconcile --repair`) are published by package republish, not
// by the stream. Write S for an event's source (its appId) and X for its
// event id: (S, X) is a topic's deduplication key. Each event is judged
// as the stream judges it (its topic's table as S's relay sees it, claims
// included; contract.Cache.Judge; its personal data), and published into
// its topic t only when:
//
//  12. t does not hold (S, X). The run reads which of its events t's table
//     holds (the files whose topic, source and occurred_at bounds may hold
//     one) and writes the others, in the order given, as one blind append
//     per (t, S).
//  13. Nobody added (S, X) since. The append carries no txn of S (v(t) does
//     not move; steps 1 to 7 never see it) but S's republish counter
//     (RepublishAppID: a txn of its own, never a position) at the value
//     read plus one, so a concurrent run for S in the same table that
//     committed first makes it fail without writing; and a Conflict judge
//     reads every commit that won a version from it (any writer: the
//     stream, a rebuild, another source's run) and refuses it when a file
//     it adds holds one of the events. A refused append writes nothing (its
//     files are deleted) and the run judges its events against the table
//     again (12). So a second run finds them present, and concurrent runs,
//     beside a running relay, publish each event once.
//  14. The stream does not write it later. A redriven event's row is a
//     dead letter: read again, it stays one ("Rows the router cannot turn
//     into events", above). A repaired event was missing from a closed window
//     (package reconcile): its transaction ended below a position the relay
//     acknowledged, so no hold dropped it (7), and it is in no topic and not
//     in _dead_letter: the stream never decoded its row (its table was
//     outside the publication, or it was written with replication off), or
//     what it wrote was lost with its table, which the relay then holds as
//     lost (Lost tables). Either way the stream does not write it again.
//  15. Identity and order. A redriven event keeps its event_id, source,
//     commit_lsn, seq, xid and commit time: consumers' (source, event_id)
//     dedupe and reconcile find it as the event it always was. It lands in
//     a later Delta version than events committed after it: a topic's
//     order is its Delta versions', so a consumer reading in version order
//     meets it when it was redriven; sorting by (commit_lsn, seq) puts it
//     back in its source's commit order. PostgreSQL keeps no commit
//     position of a row, so a repaired event carries the source's WAL
//     insert position when the repair read it as commit_lsn (it sorts
//     after what the source had committed then), seq by (occurred_at, id),
//     and the xid that inserted its row. Neither has a transaction record
//     (8); a consistent cut (11) holds one only once it is committed.
//  16. Records. A run writes its RepublishRun first as running, then done
//     or failed with its counts, and one _republished row per event
//     (republished, with the table version, present, or refused, with the
//     reason); its commits name the run in commitInfo. A run that dies
//     stays "running": its commits stand, and the next run finds their
//     events present. A table that holds S's republish counter holds
//     events of S, so a bootstrap that is redone reads its ids as it reads
//     those S's relay wrote.
//
// # Many sources, one store
//
// Each relay reads one source: a slot of one database of one cluster
// (Source). Its appId is the source's, deltabus-<system id>-<slot>
// (ResolveAppID), so two clusters never share one whatever their slot
// names; a legacy appId deltabus-<slot> is used only by the source its
// marker names. Steps 1 to 7 hold for each appId A on its own, in every
// topic table that several sources share:
//
//   - v_A(t) is read from A's txn only. Another appId's txn is another
//     source's position, in another LSN space, and is never compared with
//     A's (the release before source identity gave every relay the same
//     appId, and one source skipped the other's events as its own).
//   - Commits of different appIds race for table versions. A commit that
//     loses version n reads the winners (delta.Table's catch-up): a blind
//     append of another appId, a compaction (it removes files, never ones
//     A's pending commit adds) or a property change commutes with A's
//     append, which is retried at n+1 with the same data files; our own
//     appId at or beyond A's version fences A (5); a schema, protocol or
//     table-id change holds the topic (7). Before putting version n the
//     commit checks that n-1 is still in the log (log clean-up may have
//     freed the name), so no commit lands where no reader looks; on S3
//     the read is made beside the commit's data files and trusted for at
//     most 250 ms (delta.Table.CheckAhead), far less than any log
//     retention, and it was never atomic with the put anyway. A lost race is
//     counted (deltabus_commit_races_total), not an error.
//   - Within a topic each source's rows are in that source's commit order
//     (4, per appId); across sources they are in the order of the Delta
//     versions that hold them. Every row names its source (the source
//     column = the appId): the total order of a topic is (Delta version,
//     commit_lsn, seq), and (source, event_id) is its deduplication key.
//   - Holds and rebuilds are per source: rebuild records, states and
//     intents are kept under rebuilds/<topic>/<appId>/, a bootstrap or a
//     rebuild skips only the events its own source already holds (by the
//     source column), and maintenance skips a topic any source holds.
//   - Files uploaded and not yet committed are covered by their writer's
//     Lease: other relays' VACUUM keeps them whatever its retention.
//
// # Timelines: failover and point-in-time recovery
//
// A physical standby promoted in the primary's place keeps the system
// identifier, so it is the same source; but an asynchronous standby may
// not have received every transaction the relay already published. The
// promotion starts a new timeline at the fork point F (the end of the WAL
// the standby replayed): transactions of the old timeline committed at or
// past F exist in no database any more, and the new timeline's own
// transactions get commit LSNs from F on, below positions the topics hold.
// Comparing them with v(t) as step 3 does would skip them. A point-in-time
// recovery forks a timeline the same way.
//
// So a position is not a commit LSN but a function of it (Positions): the
// Marker records the timeline T the relay's progress is made on, and the
// source's epochs, each a commit LSN where positions begin anew with an
// offset. Every txn version the relay writes is Pos(c) for the commit LSN
// c of the batch's last transaction, and step 3 drops T exactly when
// c <= Through(v(t)), the last LSN of the current timeline whose position
// is at most v(t). Without an epoch, Pos(c) = c and the argument above is
// unchanged. Pos is strictly increasing along the current timeline's
// history, so steps 1 to 7 hold with positions in place of LSNs.
//
// When a session (or `relay bootstrap --recover`) finds the server on
// another timeline than the marker's, before anything is committed:
//
//  1. It reads the new timeline's history (TIMELINE_HISTORY) and the
//     commit LSN F where the marker's timeline ended in it. A server on an
//     older timeline, or on one that does not descend from T, is refused
//     with one line: the relay cannot tell which of its events the source
//     holds.
//  2. A slot confirmed past F was created on the new timeline after the
//     promotion: the transactions between F and its creation reached no
//     slot, so streaming from it would lose them. It is refused, naming
//     `relay bootstrap --recover`. A slot confirmed at or before F (a
//     failover slot the standby synchronised, PostgreSQL 17 and later) is
//     safe: every transaction ending at or before its position is in the
//     shared history and, by 1, in its topics.
//  3. It reads every table holding a position of the source: the highest
//     position H, and the events of the source with a commit LSN at or
//     past F that no earlier fork names. Those are the phantoms: published
//     from the old timeline, absent from the new one. They stay in their
//     topics (the log is append-only) and are written to a Fork record,
//     where reconcile, status, the operator's page and verify find them.
//  4. If H >= Pos(F), the new timeline begins an epoch at F whose offset
//     makes Pos(F) = H + 1: every transaction of the new timeline is above
//     every position, so none is skipped; the shared history below F keeps
//     its positions and is still skipped where held. Then the marker is
//     written with the new timeline and epochs.
//
// Each step is repeatable: until the marker names the new timeline nothing
// of it is committed, so a run that dies finds the same phantoms again. A
// recovery marks the marker (RecoveringSince) before it drops or creates a
// slot, and clears it with the marker that ends it: a relay never streams
// from the slot of a recovery that did not finish. A recovery whose
// snapshot position is not above H (the source's LSNs went back with no
// timeline to say where: a database restored in place, or a marker of an
// earlier release) begins an epoch at its consistent point cp - 1, above
// H; its snapshot holds every event the outbox has that the topics lack
// (by event_id) and the stream starts at cp, so nothing below is met
// again, and reconcile names the events the source lacks. A relay whose
// topic holds a position past the server's WAL end refuses to stream,
// naming the recovery: that is such a restore.
//
// # Topic groups
//
// A topic group (Group) makes many low-rate topics share one table, so
// that a batch's rows of all of them are one commit (one data file and one
// log entry, whatever their number). Steps 1 to 7 hold per (source,
// topic) inside a group's table unchanged, with these readings:
//
//   - v(t) is the txn of appId A/t (Placement.TxnAppID), not A: each topic
//     of the group has its own position. A batch commits the group's
//     table once, with one txn {A/t, version = c(last transaction of B)}
//     per topic t it holds rows of, in the same commit as those rows; so
//     for every t, v(t) moves exactly when t's rows land, as a topic's own
//     table's txn does (step 3 reads v(t) per topic when a session opens
//     it). A topic of the group without rows in a batch keeps its v(t),
//     as a topic absent from a batch does.
//   - Fencing (5) refuses the whole group commit when any of its txns is
//     at or beyond its version: a zombie's batch lands for no topic.
//   - Holds (7) are per topic: a held topic's events are dropped before
//     they reach the batch, so the group commit holds the other topics
//     only, and the held topic's v(t) does not reach H (its txn in the
//     commit that holds its rows from before H is capped below it).
//   - A rebuild of topic T commits T's snapshot files to the group's table
//     with txn A/T = R alone (a commit of its own): the other topics'
//     positions are not touched, and the seam argument is T's alone.
//   - Placement is decided once: a topic not registered joins the first
//     group (in name order) whose pattern matches it, and is registered
//     with the group table's id before the commit of its first rows
//     (Register, put-if-absent: two writers that placed it differently
//     are told apart, the loser reads the entry again). So a topic's
//     events are never split between two tables. A registered grouped
//     topic whose group table is gone, or has another id (deleted and
//     created again: the topic's rows went with the old one), is held as
//     a missing table is (7), never restarted empty.
//
// Readers of one topic of a group read the group's table and keep the rows
// whose topic column is the topic; every data file's stats bound the topic
// column, so files that hold no row of it are skipped unread.
//
// Where the relay cannot prove that progress it meets is its source's (a
// marker of this appId for another database, a legacy marker without a
// system identifier) it refuses to start with one line naming both; it
// never reads another source's progress as its own. A data directory
// copied with its slots (not pg_basebackup, which leaves them behind) is
// the same source to DeltaBus: drop its slots, as PostgreSQL advises for
// copies.
//
// # Lost tables
//
// By step 1 a source's events are out of the slot once their commit is
// durable: the table is their only copy. A table that lost them (deleted;
// replaced by a new table, e.g. by another source's rebuild; restored to
// an older copy of itself from a backup or S3 object versions, with the
// same table id and a lower latest version) must never be written on as
// if the position it records were the source's, or step 3 skips nothing
// and the lost events stay lost with no hold. So:
//
//   - A writer never commits on a log that went back: the version a
//     commit follows must still be the commit it knows (sink/delta), else
//     the commit fails as for a deleted table.
//   - Each source keeps a Claim per table: per topic, the id of the table
//     holding its progress and the txn version it was seen to hold. The
//     claim binding a topic to a table is written by the commit that puts
//     the source's first position into that table, before the relay
//     acknowledges it; the position is refreshed now and then, at a
//     graceful stop, and at once when a relay finds the table gone, or
//     gone back.
//   - When a source opens a topic whose table holds less of its progress
//     than it claims (v_A(t) below the claimed version: a table created
//     again holds none of it), the topic is held as a missing table is
//     (7), for that source only, and `relay rebuild --topic T` by that
//     source restores it: the rebuild commits R past every position the
//     source had, so the table holds the claim again. Another source's
//     rebuild restores its own events only, so it never lifts the loss
//     for others; a table that lost nothing of a source (its commits were
//     kept) is not held for it. An abort (`relay rebuild --abort`)
//     resumes the topic from its hold instead, as the operator asked.
//
// The one loss a claim cannot see is a table restored, while its relay
// was killed, to a copy newer than that source's last claim written (the
// relay refreshes it at most a minute apart while it commits); the
// dead-letter table, recreated when lost, has no claim.
//
// # The first start: snapshot, then stream
//
// With no slot and no Marker, the relay creates the slot with an exported
// snapshot S at consistent point cp. Every transaction visible in S
// committed before cp, and every transaction committing at or after cp is
// streamed from the slot and is not visible in S. The bootstrap copies the
// rows S sees, commits each topic once with txn version cp - 1 (its rows
// carry commit_lsn = cp - 1, which sorts before every streamed row), writes
// the Marker, and streaming starts at cp: with 3, no transaction is lost or
// doubled at the seam. A bootstrap that dies is redone with a new slot and
// snapshot, skipping events the topics already hold by event_id. A missing
// slot with a Marker, or an invalidated slot, is an error naming `relay
// bootstrap --recover`, never a restart from "now".
//
// # Rebuilding one topic
//
// `relay rebuild --topic T` re-snapshots T while the others stream:
//
//  1. It writes Intent{id, T, rebuild}, then emits a pause watermark
//     M = pg_logical_emit_message(true, WatermarkPrefix, {pause, id, T}).
//  2. The relay, reaching M, checks the intent (a watermark without one is
//     ignored: anyone can emit a logical message, only the operator can
//     write the store), makes T's events before M durable, then drops T's
//     events and holds the acknowledged position at M, and records
//     RebuildState{Paused: id, PausedAt: M}.
//  3. The rebuild waits for that state, then for every transaction in
//     progress to end (each that committed before M is then visible), opens
//     a snapshot S and reads, in the same statement, pg_current_snapshot()
//     and the WAL insert position Q: no transaction committing at or after Q
//     is visible in S. It copies T's rows S sees, skipping events T holds,
//     and writes RebuildRecord{R = max(M, v(T) + 1), Q, S, files}, then a
//     commit watermark.
//  4. The relay commits the files with txn version R, records M as resolved
//     (ResolvedThrough, LastResolved = id), deletes the intent, and starts
//     a new session from the held position. T then skips transactions with
//     c <= R (3) and those with c in [R+1, Q) whose xid S sees (Seam): their
//     rows came with the snapshot. Nothing is lost or doubled at the seam.
//
// An abort watermark (the rebuild failed, or `relay rebuild --abort`, with
// its own IntentAbort) resolves the pause; the relay streams T again from
// M. A pause re-read after it was resolved (its LSN is at or below
// ResolvedThrough) is ignored. A rebuild that dies leaves T held; the relay
// warns every minute, naming both ways out.
//
// # Retention
//
// The janitor (package reconcile) deletes outbox rows older than its
// retention and below the slot's confirmed position, which by 1 are in
// their topics; the reconciler can only check what the outbox still holds.
package catalog
