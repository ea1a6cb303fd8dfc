// Package topic implements DeltaBus topic tables: the event schema every
// topic table shares, the table's protocol and metadata, and the parquet
// data files the relay writes for a batch, with their Delta add actions;
// compaction of those files and the in-place schema upgrade of a topic
// table. Committing the adds (with the txn that makes them exactly-once)
// is the job of sink/delta and the relay; this package writes to
// _delta_log only through sink/delta (Compact's OPTIMIZE commits and
// CheckOrUpgrade's metaData commit).
//
// # Schema
//
// Columns, in order: event_id string NOT NULL, topic string, key string,
// type string, schema_version integer, payload string, headers string (JSON
// text, NULL when the outbox row has none), occurred_at timestamp,
// commit_lsn long, seq integer, xid long, commit_time timestamp. The
// _dead_letter table (outbox.DeadLetterTopic) adds dead_letter_reason,
// source_table and raw_row (strings). Timestamps are UTC microseconds,
// stored as parquet INT64 TIMESTAMP(isAdjustedToUTC=true, MICROS); a zero
// time.Time (a dead letter whose time could not be read) is stored as NULL.
// Tables are unpartitioned, protocol (1, 7, writerFeatures appendOnly and
// changeDataFeed), delta.appendOnly and delta.enableChangeDataFeed on from
// version 0, checkpoint interval 100, log retention 30 days.
//
// # Guarantees of FileWriter
//
//   - Order: rows are stored in the order they were appended, within each
//     file, and Close returns the adds in that same order (file i holds rows
//     before file i+1; names are part-<i>-<uuid>.c000.snappy.parquet, i
//     zero-padded to 5 digits). The relay appends in (commit_lsn, seq)
//     order, so every file, and the concatenation of the returned adds, is
//     in source commit order.
//   - Readable by any Parquet reader: data pages v1, PLAIN or
//     RLE_DICTIONARY values (dictionary for topic, key, type,
//     schema_version, headers, dead_letter_reason and source_table, unless
//     a row group's dictionary passes 1 MiB), RLE definition levels, and
//     footer statistics (null_count, min/max) for every column but
//     event_id, payload, headers and raw_row, as pqarrow wrote them
//     (see package parquetpage).
//   - Stats: every add carries stats as a JSON string: numRecords (exact),
//     nullCount of every column (exact), and minValues/maxValues of every
//     non-string column (schema_version, commit_lsn, seq, xid, occurred_at,
//     commit_time) and of topic and source (exact strings: a reader of one
//     topic of a group's shared table skips files whose topic bounds
//     exclude it, MayHold). Timestamp bounds are ISO-8601 UTC with milliseconds; the
//     minimum is rounded down and the maximum up to the millisecond, so the
//     bounds always enclose the true microsecond values (data skipping never
//     drops a matching file). A column with only NULLs has no min/max.
//   - Bounded memory: rows wait in column buffers (pooled Go slices) only
//     until a row group is full (FileOptions.RowGroupRows / RowGroupBytes,
//     default 64Ki rows / 32 MiB), then they are encoded straight from
//     those buffers into the open file by parquetpage (data pages v1 of at
//     most about 1 MiB, PLAIN or dictionary-encoded, snappy: measured ~30%
//     less relay CPU than zstd, whose pooled encoders are rebuilt after
//     each GC), whose scratch buffers are pooled too. A file is closed when it reaches MaxFileRows or
//     MaxFileBytes (default 1,000,000 rows / 32 MiB encoded) and the next
//     one starts. An open file lives in memory up to MemoryBuffer (8 MiB),
//     then is written to the store as it grows (storage.Store.Create) and
//     committed by Close. So a 1M-row source transaction costs one row
//     group of memory, not the whole transaction, and no file is ever
//     read back.
//   - Nothing is visible before Close: files are uploaded (Put, or the
//     Commit of a created object) only in Close, with names no one else
//     uses; they become part of the table only when the caller commits
//     the adds. A failed Close deletes what it uploaded (best effort);
//     Abort uploads nothing and removes temporary
//     files. An uncommitted leftover is an orphan no Delta reader reads.
//
// # Reading
//
// ReadEvents, ReadDeadLetters and ReadEventIDs decode one data file, in
// file order; ReadEventIDs decodes only event_id, commit_lsn, seq and
// occurred_at. Values are copied out of Arrow buffers, so callers may keep
// them. A nullable column a file lacks (written before the column was
// added) reads as NULL, as Delta requires.
//
// # Compaction
//
// Compact bin-packs a topic table's small files (below
// CompactOptions.SmallFileBytes, 16 MiB) into files of about
// TargetFileBytes (128 MiB, checked after each row group), one OPTIMIZE
// commit (delta.Table.CommitRewrite, dataChange=false) per chunk of at most
// 10,000 input files or 1 GiB. Guarantees:
//
//   - Order: inputs are runs of consecutive small files in (commit_lsn,
//     seq) order (a large file ends a run); their rows are merged in that
//     order, so each output file, and the outputs in the order of the adds
//     and of their part-NNNNN names, hold rows in source commit order, and
//     a run's outputs do not overlap the files left in place.
//   - Nothing changes for readers: rows are copied as they are, NULLs
//     included, and counted against the log's stats; change-feed readers
//     see nothing; every txn (the relay's appId) stays as it is.
//   - Never destructive against the relay: its blind appends only add
//     files and commute with a compaction; a compaction that loses the
//     race rebases, unless the winner removed one of its inputs, then it
//     stops with delta.ErrRewriteConflict and deletes its uncommitted
//     output (VACUUM takes anything left). Neither side loses a commit.
//   - Bounded memory: files are merged, never a topic loaded; one small
//     decoded batch per open input (inputs overlap only after a bootstrap:
//     at most 64 files / 256 MiB open at once, else the cluster is left
//     alone) and one row group of output.
//   - Only this release's schemas are compacted (ErrForeignSchema
//     otherwise): rewriting a table of a newer release would drop its
//     columns.
//
// Each run rewrites at most SmallFileBytes of earlier output per run of
// files, so a busy topic's hourly outputs settle between 16 and 128 MiB.
// Per-topic retention (delta.logRetentionDuration,
// delta.deletedFileRetentionDuration) is a table property:
// delta.SetProperties changes it, and delta.CleanupLog and delta.Vacuum
// follow it.
//
// # Schema evolution
//
// A DeltaBus release may add columns to the topic schemas, only nullable
// and only at the end. CheckOrUpgrade, which the relay calls when it opens
// a table, compares the table's schema with this release's, column by
// column (name, type, nullability, metadata):
//
//   - the same: nothing to do;
//   - an older DeltaBus schema (every column of the table identical and in
//     place, this release's extra columns nullable): upgraded in place by
//     a metaData commit "ADD COLUMNS" with the same table id and
//     partitioning; data files are not rewritten and their rows read NULL
//     in the new columns;
//   - a newer DeltaBus schema (this release's columns, then nullable ones
//     it does not know): left as it is and written to, rows from this
//     release leaving the newer columns NULL (a rollback keeps working);
//     Compact refuses such a table;
//   - anything else, including an event table at the dead-letter path or
//     the reverse: ErrForeignSchema, naming the first difference.
package topic
