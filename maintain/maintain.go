// Package maintain keeps a store's topic tables fast for months: per
// topic it compacts small files (sink/topic.Compact: OPTIMIZE commits with
// dataChange=false that commute with the relay's appends), deletes log
// entries older than delta.logRetentionDuration (delta.CleanupLog: the
// newest checkpoint at or before the horizon and every commit after it
// stay), and deletes data files no reader within
// delta.deletedFileRetentionDuration needs plus stale temporary files of
// killed writers (delta.Vacuum, storage.Sweeper).
//
// Guarantees:
//   - Never a row lost or doubled: compaction rewrites rows in (commit_lsn,
//     seq) order and never touches txn actions; the relay's exactly-once
//     position survives.
//   - A topic held by the relay (rebuild, missing or incompatible table) is
//     skipped: its table is the operator's until the hold is lifted.
//   - One topic's failure does not stop the others: it is reported in the
//     Report and the run goes on.
//
// `relay run` calls Loop in the background (--maintenance, default 1h);
// `relay compact` and `relay vacuum` call Run once.
package maintain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// Options choose what a run does. The zero value compacts, cleans the log
// and vacuums every registered topic with each table's own retention
// settings.
type Options struct {
	Topics []string // only these (default: every registered topic)
	// SkipCompact, SkipCleanup and SkipVacuum leave one step out.
	SkipCompact, SkipCleanup, SkipVacuum bool
	DryRun                               bool // clean-up and vacuum list, delete nothing; no compaction
	Compact                              topic.CompactOptions
	// LogRetention and FileRetention override the tables' properties
	// (accelerated soak tests); zero takes each table's setting.
	LogRetention, FileRetention time.Duration
	// TempAge is how old a hidden temporary file must be before it is
	// swept (default 24h: far above any commit's duration or clock skew).
	TempAge time.Duration
	Now     func() time.Time
	Logger  *slog.Logger
	Tracer  trace.TracerProvider // spans of runs, topics and steps (trace.go); nil: none
}

// TopicReport is what one run did to one topic.
type TopicReport struct {
	Topic          string        `json:"topic"`
	Skipped        string        `json:"skipped,omitempty"` // why nothing was done
	Compacted      int           `json:"filesCompacted"`    // input files rewritten
	Written        int           `json:"filesWritten"`
	LogDeleted     int           `json:"logFilesDeleted"`
	Earliest       int64         `json:"earliestVersion"`
	FilesDeleted   int           `json:"dataFilesDeleted"`
	BytesDeleted   int64         `json:"dataBytesDeleted"`
	TempSwept      int           `json:"tempFilesSwept"`
	ActiveFiles    int           `json:"activeFiles"`
	Errors         []string      `json:"errors,omitempty"`
	Took           time.Duration `json:"tookNs"`
	compactVersion []int64
}

// Report is one run over the topics.
type Report struct {
	Topics []TopicReport `json:"topics"`
	Took   time.Duration `json:"tookNs"`
}

// Failed reports whether any topic had an error.
func (r Report) Failed() bool {
	for _, t := range r.Topics {
		if len(t.Errors) > 0 {
			return true
		}
	}
	return false
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TempAge <= 0 {
		o.TempAge = 24 * time.Hour
	}
	if o.Compact.Logger == nil {
		o.Compact.Logger = o.Logger
	}
	return o
}

// Run maintains each topic once.
func Run(ctx context.Context, root storage.Store, opts Options) (rep Report, err error) {
	opts = opts.withDefaults()
	start := time.Now()
	ctx, span := opts.startSpan(ctx, "")
	defer func() { endSpan(span, err, attribute.Int("deltabus.topics", len(rep.Topics))) }()
	names := opts.Topics
	if len(names) == 0 {
		var err error
		if names, err = catalog.ListTopics(ctx, root); err != nil {
			return Report{}, err
		}
	}
	leases := &leaseCache{root: root}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		rep.Topics = append(rep.Topics, maintainTopic(ctx, root, name, opts, leases))
	}
	rep.Took = time.Since(start)
	return rep, nil
}

// leaseCache lists the writers' leases (catalog.Lease) at most every 30 s:
// a lease written after a listing protects files younger than any allowed
// file retention (delta.MinExplicitRetention), so a listing that recent
// is enough.
type leaseCache struct {
	root   storage.Store
	at     time.Time
	leases []catalog.Lease
}

func (c *leaseCache) get(ctx context.Context) ([]catalog.Lease, error) {
	if time.Since(c.at) < 30*time.Second {
		return c.leases, nil
	}
	l, err := catalog.ListLeases(ctx, c.root)
	if err != nil {
		return nil, err
	}
	c.leases, c.at = l, time.Now()
	return l, nil
}

func maintainTopic(ctx context.Context, root storage.Store, name string, opts Options, leases *leaseCache) (tr TopicReport) {
	start := time.Now()
	tr = TopicReport{Topic: name, Earliest: -1}
	ctx, span := opts.startSpan(ctx, ".topic", attribute.String("deltabus.topic", name))
	defer func() {
		tr.Took = time.Since(start)
		var err error
		if len(tr.Errors) > 0 {
			err = errors.New(strings.Join(tr.Errors, "; "))
		}
		endSpan(span, err, attribute.String("deltabus.skipped", tr.Skipped))
	}()
	states, err := catalog.ListRebuildStates(ctx, root, name)
	if err != nil {
		tr.Errors = append(tr.Errors, err.Error())
		return tr
	}
	for _, st := range states {
		if st.Paused != "" {
			tr.Skipped = "held by relay " + st.AppID + " (" + st.Paused + "): maintenance waits until the hold is lifted"
			return tr
		}
	}
	table := storage.Sub(root, name)
	if _, err := delta.LoadSnapshot(ctx, table, -1); errors.Is(err, delta.ErrNoTable) {
		tr.Skipped = "no table"
		return tr
	}
	fail := func(step string, err error) {
		tr.Errors = append(tr.Errors, fmt.Sprintf("%s: %v", step, err))
		opts.Logger.Warn("maintenance step failed (the next run tries again)", "topic", name, "step", step, "err", err)
	}
	if !opts.SkipCompact && !opts.DryRun {
		sctx, span := opts.startSpan(ctx, ".compact")
		res, err := topic.Compact(sctx, table, opts.Compact)
		endSpan(span, err, attribute.Int("deltabus.files_removed", res.FilesRemoved), attribute.Int("deltabus.files_added", res.FilesAdded))
		tr.Compacted, tr.Written, tr.compactVersion = res.FilesRemoved, res.FilesAdded, res.Versions
		if err != nil && !errors.Is(err, delta.ErrRewriteConflict) {
			fail("compact", err)
		}
	}
	if !opts.SkipCleanup {
		sctx, span := opts.startSpan(ctx, ".cleanup")
		res, err := delta.CleanupLog(sctx, table, delta.CleanupOptions{Now: opts.Now(), Retention: opts.LogRetention, DryRun: opts.DryRun, Logger: opts.Logger})
		endSpan(span, err, attribute.Int("deltabus.log_files_deleted", len(res.Deleted)), attribute.Int64("deltabus.earliest_version", res.Earliest))
		if err != nil {
			fail("clean up the log", err)
		}
		tr.LogDeleted, tr.Earliest = len(res.Deleted), res.Earliest
	}
	if !opts.SkipVacuum {
		vo := delta.VacuumOptions{Now: opts.Now(), Retention: opts.FileRetention, DryRun: opts.DryRun, Logger: opts.Logger}
		if leases, err := leases.get(ctx); err != nil {
			fail("vacuum", fmt.Errorf("read the writers' leases: %w", err))
			return tr
		} else if since, ok := catalog.InFlightSince(leases, name, time.Now()); ok {
			vo.InFlightSince = since
		}
		if sw, ok := table.(storage.Sweeper); ok && !opts.DryRun {
			vo.SweepTemp = func(ctx context.Context, prefix string, _ time.Time) error {
				n, err := sw.SweepTemp(ctx, prefix, opts.TempAge)
				tr.TempSwept += n
				if errors.Is(err, errors.ErrUnsupported) {
					return nil
				}
				return err
			}
		}
		sctx, span := opts.startSpan(ctx, ".vacuum")
		res, err := delta.Vacuum(sctx, table, vo)
		endSpan(span, err, attribute.Int("deltabus.data_files_deleted", len(res.Deleted)), attribute.Int64("deltabus.bytes_deleted", res.DeletedBytes))
		if err != nil {
			fail("vacuum", err)
		}
		tr.FilesDeleted, tr.BytesDeleted, tr.ActiveFiles = len(res.Deleted), res.DeletedBytes, res.Active
	}
	return tr
}
