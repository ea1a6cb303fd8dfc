// Package delta is DeltaBus's Delta Lake transaction log: action types,
// snapshot reconstruction (checkpoint + JSON replay), classic checkpoints,
// the blind-append commit loop with txn-based idempotency, the maintenance
// operations (compaction commits, table properties, log clean-up, VACUUM),
// change-feed reads and the inspect/tail helpers behind the CLI. It is
// generic: the topic tables (sink/topic) build on it. A storage.Store scoped
// to the table root is the only I/O dependency; keys look like
// "_delta_log/00000000000000000000.json".
//
// # Reading
//
// LoadSnapshot starts from _last_checkpoint when it parses and lists
// _delta_log only from that checkpoint on (List's startAfter; S3's
// StartAfter); a missing, empty, corrupt or wrong hint falls back to a
// full listing. It lists with strict name patterns (20-digit NNN.json,
// classic and complete multi-part checkpoints; .crc, .tmp, temp dirs,
// compacted, staged and UUID/v2 files are ignored), and replays the newest
// readable checkpoint at or before the target plus the commits after it.
// An unreadable checkpoint falls back to an older one or to JSON-only
// replay. Commits after the checkpoint must be contiguous: a gap is an
// error naming the missing version (ErrBrokenLog). A version older than
// the oldest the log can still reconstruct (log clean-up deleted what it
// needs) is a LogCleanedError (ErrLogCleaned) naming the earliest version.
// The latest protocol and metaData win, the latest txn per appId (in log
// order) wins, and files are keyed by their path URL-decoded exactly once
// plus the deletion-vector id. Checkpoints written by delta-spark (MAP
// key_value), arrow-rs/delta-rs (MAP entries) and 2019 Spark (fewer
// columns) are read with arrow-go (adds and removes of the usual types
// decoded directly, anything else through JSON), or, for the readers' load
// of the usual layouts, leaf by leaf with package parquetpage's page
// reader; a corrupt checkpoint never panics.
//
// LoadSnapshot is the readers' load: it skips the checkpoint row groups
// that hold only tombstones (this package writes them apart) and the
// writer-only add fields, so Snapshot.Tombstones has the removes of the
// commits after the checkpoint only, and a compacted table holding a
// week of tombstones loads about as fast as a young one. Writers
// (OpenTable) and Vacuum read everything.
//
// The reader refuses, with a one-line error naming the cause, tables it
// would read wrongly: minReaderVersion > 3, any reader feature other than
// timestampNtz, vacuumProtocolCheck and columnMapping (deletionVectors,
// v2Checkpoint, catalogManaged, ... are refused by name), and column mapping
// mode name or id.
//
// # Writing
//
// CreateTable writes version 0 with PutIfAbsent. Table.Commit appends: the
// commit file holds commitInfo first (operation, JSON-string
// operationParameters, readVersion, isolationLevel Serializable,
// isBlindAppend, engineInfo, a txnId UUID and inCommitTimestamp when ICT is
// on), then the adds (dataChange=true), then the txn with lastUpdated, one
// action per line, written with PutIfAbsent so a version is never
// overwritten. Guarantees:
//
//   - Exactly once per (appId, txn version): a batch whose txn version is
//     already reached is never written (ErrAlreadyCommitted); the adds and
//     the txn land in one atomic commit.
//   - On a lost race Commit reads the winning commits. A protocol or
//     metaData change is followed when the new protocol is still writable
//     (CheckWritable) and the metaData keeps its id, schema (compared as
//     JSON) and partition columns: only configuration, name or description
//     changed, as Spark's ALTER TABLE SET TBLPROPERTIES and delta-rs
//     set_table_properties write it; the append goes on at the next
//     version. Any other change is an IncompatibleChangeError
//     (ErrIncompatibleChange; "schema changed", "table replaced (new id
//     ...)", "partition columns changed ...", "protocol: table requires
//     writer feature ..."), and the handle refuses every later commit until
//     the table is reopened. Refresh, and the reload after an unknown
//     outcome, apply the same rule. A winner carrying our appId at a
//     version ≥ ours means a zombie committed the batch
//     (ErrAlreadyCommitted, nothing more is written); at a lower version it
//     is a concurrent live writer (ErrConcurrentWriter). Other commits
//     (blind appends, compactions) never conflict: Commit retries at the
//     next version.
//   - An unknown storage outcome is retried with the same bytes (the Store
//     resolves it), then reported; the handle reloads the log before its
//     next commit, so a retried batch is deduplicated by its txn.
//   - A handle idle for more than Options.ReloadAfter (a minute) reloads
//     the log before it commits: log clean-up frees old version numbers
//     for PutIfAbsent, and a handle that slept through one must not
//     commit at a cleaned-up version.
//   - Never on a log that went back: before its put, a commit checks that
//     the version it follows is still the commit the handle knows (its
//     commitInfo's txnId), and a reload that finds the latest version
//     below the handle's, or another commit at it, is refused too. A table
//     restored to an older copy of itself (a backup, S3 object versions)
//     lost the commits past the copy; writing on would hide the loss, so
//     the handle fails with ErrRolledBack (which wraps ErrTableGone: to
//     this writer the table is as good as deleted) and refuses every later
//     commit.
//   - Only tables whose writer protocol we honour are written: writer ≤ 7,
//     known features only, legacy 3–6 and feature-listed constraints,
//     generated/identity columns, invariants, column mapping and defaults
//     only while unused.
//
// After committing version v with v % delta.checkpointInterval == 0 (default
// 10), the handle writes a classic checkpoint in delta-spark's physical
// layout: protocol, metaData, txns, domains and the adds sorted by path in
// the first row group(s), then the tombstones removed inside
// delta.deletedFileRetentionDuration, sorted by path, in row groups of
// their own (file actions with dataChange=false; no commitInfo or cdc;
// column statistics only on remove.path, which readers use to skip those
// row groups), then _last_checkpoint {version,size,sizeInBytes,
// numOfAddFiles}. Each action is shredded straight into the 53 leaf
// columns and written by package parquetpage (checkpoint_rows.go); the
// tests hold arrow-go's pqarrow writer as the oracle every checkpoint
// must read the same as. The handle forgets expired tombstones at each
// checkpoint, so its memory does not grow with every file ever removed. A
// checkpoint failure is logged and never fails the commit. With
// Options.AsyncCheckpoints the checkpoint is encoded in the background from
// the checkpointer's own copy of the state, which replays the commits the
// handle applied since (checkpoint_shadow.go), in chunks that yield the
// processor: the commits behind it neither copy the state nor wait; with
// Options.CheckpointSpacing a checkpoint due sooner than that after the
// last is skipped, up to 10 intervals (Table.spaced). Loading a snapshot
// therefore reads one checkpoint and fewer than interval commits (10
// intervals on a table checkpointed with spacing), whatever the age of the
// table.
//
// # Maintenance
//
//   - Table.CommitRewrite commits a compaction (operation OPTIMIZE):
//     removes of active files (deletionTimestamp, extendedFileMetadata,
//     partitionValues, size) and adds, all dataChange=false, no txn, so
//     every txn stays and change-feed readers see nothing. Blind appends
//     commute with it; a winner that removed one of its files is
//     ErrRewriteConflict, and nothing of the rewrite is committed.
//   - Table.UpdateMetadata commits a metaData change made on a copy of
//     the current one, keeping id and partition columns and appending only
//     nullable columns; on a lost race it re-applies the change to the
//     winner's metaData. SetProperties and UnsetProperties change table
//     properties through it, validated by ValidateProperty (known delta.*
//     keys only; durations in "interval N days" form and at least
//     MinRetention; delta.setTransactionRetentionDuration refused).
//   - CleanupLog deletes commits, checkpoints, .crc and log compaction
//     files older than delta.logRetentionDuration (30 days), keeping the
//     newest readable checkpoint at or before the horizon, its JSON and
//     everything after (the protocol's Metadata Cleanup, delta-rs
//     cleanup_expired_logs_for); nothing without such a checkpoint.
//   - Vacuum deletes data files no version inside
//     delta.deletedFileRetentionDuration (7 days) needs: removed before the
//     horizon, or never referenced, and in both cases last written before
//     it; never a file the snapshot references, never a hidden path
//     (_delta_log included). Temporary files are the storage layer's: a
//     SweepTemp hook calls it.
//
// Both retentions can be overridden (CleanupOptions, VacuumOptions) for
// tests and accelerated soak runs.
//
// # Change feed
//
// ReadChanges yields, per version, the cdc files when the version has any,
// otherwise adds (insert) and removes (delete) with dataChange=true; each
// with _commit_version and _commit_timestamp (inCommitTimestamp, else
// commitInfo.timestamp, else the commit file's mtime). A compaction
// (dataChange=false) yields nothing. ReadParquetRows, ReadChangeRows and
// Tail turn files into rows, with partition values from the log typed by
// the schema.
//
// Not implemented: deletion vectors, column mapping, v2 checkpoints,
// setTransactionRetentionDuration expiry of txns (all txns are kept, and
// SetProperties refuses the property), writing cdc files (appends need
// none), writing .crc and log compaction files, VACUUM START/END commits,
// and delta.checkpointRetentionDuration (CleanupLog keeps checkpoints by
// delta.logRetentionDuration alone).
package delta
