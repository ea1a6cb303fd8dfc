// Package delta is DeltaBus's Delta Lake transaction log: action types,
// snapshot reconstruction (checkpoint + JSON replay), classic checkpoints,
// the blind-append commit loop with txn-based idempotency, change-feed reads
// and the inspect/tail helpers behind the CLI. It is generic: the topic
// tables (sink/topic) build on it. A storage.Store scoped to the table root
// is the only I/O dependency; keys look like "_delta_log/00000000000000000000.json".
//
// # Reading
//
// LoadSnapshot starts from _last_checkpoint when it parses (a missing, empty,
// corrupt or stale hint falls back to listing), lists _delta_log with strict
// name patterns (20-digit NNN.json, classic and complete multi-part
// checkpoints; .crc, .tmp, temp dirs, compacted, staged and UUID/v2 files are
// ignored), and replays the newest readable checkpoint at or before the
// target plus the commits after it. An unreadable checkpoint falls back to
// an older one or to JSON-only replay. Commits after the checkpoint must be
// contiguous: a gap is an error naming the missing version. The latest
// protocol and metaData win, the latest txn per appId (in log order) wins,
// and files are keyed by their path URL-decoded exactly once plus the
// deletion-vector id. Checkpoints written by delta-spark (MAP key_value),
// arrow-rs/delta-rs (MAP entries) and 2019 Spark (fewer columns) are read
// with arrow-go; a corrupt checkpoint never panics.
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
//   - On a lost race Commit reads the winning commits: a protocol or
//     metaData change aborts (ErrConcurrentMetadataChange); a winner carrying
//     our appId at a version ≥ ours means a zombie committed the batch
//     (ErrAlreadyCommitted, nothing more is written); at a lower version it
//     is a concurrent live writer (ErrConcurrentWriter). Other blind appends
//     never conflict: Commit retries at the next version.
//   - An unknown storage outcome is retried with the same bytes (the Store
//     resolves it), then reported; the handle reloads the log before its
//     next commit, so a retried batch is deduplicated by its txn.
//   - Only tables whose writer protocol we honour are written: writer ≤ 7,
//     known features only, legacy 3–6 and feature-listed constraints,
//     generated/identity columns, invariants, column mapping and defaults
//     only while unused.
//
// After committing version v with v % delta.checkpointInterval == 0 (default
// 10), the handle writes a classic checkpoint in delta-spark's physical
// layout (protocol, metaData, txns, domains, adds and unexpired tombstones
// sorted by path with dataChange=false; no commitInfo or cdc) and then
// _last_checkpoint {version,size,sizeInBytes,numOfAddFiles}. A checkpoint
// failure is logged and never fails the commit. Loading a snapshot therefore
// reads one checkpoint and fewer than interval commits, whatever the age of
// the table.
//
// # Change feed
//
// ReadChanges yields, per version, the cdc files when the version has any,
// otherwise adds (insert) and removes (delete) with dataChange=true; each
// with _commit_version and _commit_timestamp (inCommitTimestamp, else
// commitInfo.timestamp, else the commit file's mtime). ReadParquetRows,
// ReadChangeRows and Tail turn files into rows, with partition values from
// the log typed by the schema.
//
// Not implemented: deletion vectors, column mapping, v2 checkpoints, log
// cleanup and VACUUM, setTransactionRetentionDuration expiry of txns (all
// txns are kept), and writing cdc files (appends need none).
package delta
