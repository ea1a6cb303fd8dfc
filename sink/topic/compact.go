package topic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// Defaults of CompactOptions.
const (
	DefaultTargetFileBytes = 128 << 20
	DefaultSmallFileBytes  = 16 << 20
	DefaultMaxCommitFiles  = 10_000
	DefaultMaxCommitBytes  = 1 << 30
	DefaultMaxOpenFiles    = 64
	DefaultMaxOpenBytes    = 256 << 20
)

// compactMemoryBuffer is how much of an output file Compact keeps in
// memory before writing it to the store as it grows.
const compactMemoryBuffer = 1 << 20

// CompactOptions configure Compact. Zero fields take the defaults.
type CompactOptions struct {
	// TargetFileBytes is the encoded size at which an output file is
	// closed (checked after each row group): default 128 MiB.
	TargetFileBytes int64
	// RowGroupRows is the row group size of the outputs (default
	// DefaultRowGroupRows).
	RowGroupRows int
	// SmallFileBytes: files smaller are compacted (default 16 MiB, or
	// TargetFileBytes/2 when that is smaller). An output below it is merged
	// again by the next run with the files written since, so each run
	// rewrites at most this much of earlier output: a busy topic's hourly
	// outputs settle between SmallFileBytes and TargetFileBytes, a quiet
	// topic's keep growing towards SmallFileBytes. Raise it (up to
	// TargetFileBytes) for fewer, larger files at more rewriting.
	SmallFileBytes int64
	// MinFiles is the fewest files worth a commit: default 2.
	MinFiles int
	// MaxCommitFiles and MaxCommitBytes bound the input of one compaction
	// commit (default 10,000 files, 1 GiB), hence its size in the log.
	MaxCommitFiles int
	MaxCommitBytes int64
	// MaxOpenFiles and MaxOpenBytes bound the input files a merge holds at
	// once, which only files with overlapping (commit_lsn, seq) ranges
	// need (default 64 files, 256 MiB); a cluster needing more is skipped.
	MaxOpenFiles int
	MaxOpenBytes int64
	// SplitTopics: the table is a group's (catalog.GroupTable), whose
	// files mix the rows of many topics. Each row then goes to an output
	// of its topic, so every output file holds one topic and a reader of
	// one topic skips every other topic's outputs by the log alone
	// (MayHold); files only need merging together when they may share a
	// topic (splitClusters). A topic's own table needs none of it.
	SplitTopics bool
	// SplitMemoryBytes bounds the memory the outputs of a split hold
	// together, one writer per topic (default 32 MiB; BoundPending).
	SplitMemoryBytes int64
	Now              func() time.Time // nil = time.Now; the removes' deletionTimestamp
	Logger           *slog.Logger     // nil = slog.Default()
}

func (o CompactOptions) withDefaults() CompactOptions {
	orDefault(&o.TargetFileBytes, DefaultTargetFileBytes)
	orDefault(&o.SmallFileBytes, min(DefaultSmallFileBytes, o.TargetFileBytes/2))
	orDefault(&o.MinFiles, 2)
	orDefault(&o.MaxCommitFiles, DefaultMaxCommitFiles)
	orDefault(&o.MaxCommitBytes, DefaultMaxCommitBytes)
	orDefault(&o.MaxOpenFiles, DefaultMaxOpenFiles)
	orDefault(&o.MaxOpenBytes, DefaultMaxOpenBytes)
	orDefault(&o.SplitMemoryBytes, DefaultSplitMemoryBytes)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// CompactResult says what Compact committed.
type CompactResult struct {
	Versions     []int64 // the compaction commits, in order
	FilesRemoved int
	FilesAdded   int
	BytesRemoved int64
	BytesAdded   int64
	Rows         int64 // rows rewritten
	Skipped      int   // small files left alone (see CompactOptions.MaxOpenFiles)
}

// Compact bin-packs the small data files of the topic table under
// tableStore into files of about TargetFileBytes. Each chunk of inputs
// becomes one OPTIMIZE commit (delta.Table.CommitRewrite: removes and adds
// with dataChange=false), so change-feed readers see nothing, every txn
// stays as it is, and the relay's blind appends, which only add files,
// commute with it. Inputs are runs of consecutive small files in
// (commit_lsn, seq) order; their rows are merged in that order, so every
// output file, and the outputs in the order of the commit's adds (and of
// their part-NNNNN names), are in source commit order. Rows are copied as
// they are, NULLs included, and counted against the log; memory holds one
// batch per open input (files overlap only after a bootstrap) and one row
// group of output, never a whole topic.
//
// A group's table (CompactOptions.SplitTopics) is planned the same way,
// and each row of a chunk, mixed files (a group commit's) and files of one
// topic alike, is written to an output of its topic, in merge order: each
// output file holds one topic, its rows in the order they had, and the
// commits are the same OPTIMIZE rewrites (dataChange=false, no txn).
//
// Compact works on tables with today's event or dead-letter schema and
// refuses others (a table upgraded by a newer DeltaBus: rewriting it would
// drop columns it does not know). When another commit removed a file it
// replaces first, it stops with an error wrapping delta.ErrRewriteConflict
// and deletes its uncommitted output (best effort; Vacuum takes what is
// left); the commits made until then stand.
func Compact(ctx context.Context, tableStore storage.Store, opts CompactOptions) (CompactResult, error) {
	opts = opts.withDefaults()
	var res CompactResult
	tbl, err := delta.OpenTable(ctx, tableStore, delta.Options{Logger: opts.Logger, Now: opts.Now})
	if err != nil {
		return res, fmt.Errorf("compact %s: %w", tableStore, err)
	}
	defer tbl.Wait()
	deadLetter, err := knownSchema(tbl.Metadata())
	if err != nil {
		return res, fmt.Errorf("compact %s: %w", tableStore, err)
	}
	plan := planCompaction(tbl.Files(), opts)
	res.Skipped = plan.skipped
	for _, chunk := range plan.chunks {
		if err := compactChunk(ctx, tbl, tableStore, chunk, deadLetter, opts, &res); err != nil {
			return res, fmt.Errorf("compact %s: %w", tableStore, err)
		}
	}
	if len(res.Versions) > 0 {
		opts.Logger.Info("topic: compacted", "table", tableStore.String(), "commits", len(res.Versions),
			"removed", res.FilesRemoved, "added", res.FilesAdded, "rows", res.Rows, "skipped", res.Skipped)
	}
	return res, nil
}

// compactOutput is where a chunk's merged rows go: one FileWriter, or a
// topicSplit of a group table.
type compactOutput interface {
	rowSink
	close(ctx context.Context) ([]delta.Add, error)
	abort()
	deleteUploaded(adds []delta.Add)
}

// oneOutput is a FileWriter as a compactOutput.
type oneOutput struct{ *FileWriter }

func (w oneOutput) close(ctx context.Context) ([]delta.Add, error) { return w.Close(ctx) }
func (w oneOutput) abort()                                         { w.Abort() }

// compactChunk merges one chunk into new files and commits the rewrite.
func compactChunk(ctx context.Context, tbl *delta.Table, store storage.Store, chunk []inputFile, deadLetter bool,
	o CompactOptions, res *CompactResult) error {
	// Outputs are large: they go to the store as they grow, past 1 MiB.
	fo := FileOptions{DeadLetter: deadLetter, MaxFileBytes: o.TargetFileBytes, MaxFileRows: math.MaxInt32,
		RowGroupRows: o.RowGroupRows, MemoryBuffer: compactMemoryBuffer}
	var w compactOutput = oneOutput{NewFileWriter(store, fo)}
	if o.SplitTopics {
		w = newTopicSplit(store, fo, o.SplitMemoryBytes)
	}
	defer w.abort()
	n, err := mergeInto(ctx, store, w, tableColumns(deadLetter), chunk, o.SplitTopics)
	if err != nil {
		return err
	}
	var want, inBytes int64
	removes := make([]string, len(chunk))
	for i, f := range chunk {
		want, inBytes, removes[i] = want+f.rows, inBytes+f.add.Size, f.add.Path
	}
	if n != want {
		return fmt.Errorf("merged %d rows from files whose stats hold %d", n, want)
	}
	adds, err := w.close(ctx)
	if err != nil {
		return err
	}
	v, err := tbl.CommitRewrite(ctx, delta.Rewrite{Removes: removes, Adds: adds})
	if errors.Is(err, delta.ErrRewriteConflict) || errors.Is(err, delta.ErrIncompatibleChange) {
		w.deleteUploaded(adds) // nothing of ours landed: every attempt lost cleanly
	}
	if err != nil {
		return err
	}
	res.Versions = append(res.Versions, v)
	res.FilesRemoved += len(chunk)
	res.FilesAdded += len(adds)
	res.BytesRemoved += inBytes
	for _, a := range adds {
		res.BytesAdded += a.Size
	}
	res.Rows += n
	return nil
}

// knownSchema tells which of this release's schemas a table has.
func knownSchema(m delta.Metadata) (deadLetter bool, err error) {
	switch {
	case delta.SameSchema(m.SchemaString, SchemaString(false)):
		return false, nil
	case delta.SameSchema(m.SchemaString, SchemaString(true)):
		return true, nil
	}
	return false, fmt.Errorf("%w: the table's schema is not one this DeltaBus release writes", ErrForeignSchema)
}
