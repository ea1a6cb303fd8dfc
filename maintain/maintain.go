// Package maintain keeps a store's tables fast for months: per table (a
// topic's own, or a topic group's, shared by its topics, maintained once,
// and the transaction records' _transactions) it compacts small files (sink/topic.Compact: OPTIMIZE commits with
// dataChange=false that commute with the relay's appends; a group's
// table is compacted into files of one topic each), deletes log
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
//   - A table is skipped while any of its topics is held by any relay
//     (rebuild, missing or incompatible table): it is the operator's until
//     the hold is lifted. A group's table waits for every topic's hold.
//   - One table's failure does not stop the others: it is reported in the
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
	"github.com/deltabus/deltabus/subscribe/members"
	"github.com/deltabus/deltabus/txlog"
)

// Options choose what a run does. The zero value compacts, cleans the log
// and vacuums the table of every registered topic and of every group,
// each once, with each table's own retention settings.
type Options struct {
	// Topics and Groups: only these topics' tables (a grouped topic's is
	// its group's) and these groups' (default: every table).
	Topics, Groups []string
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
	Tracer  trace.TracerProvider // spans of runs, tables and steps (trace.go); nil: none
}

// TableReport is what one run did to one table.
type TableReport struct {
	Table        string   `json:"table"`             // its folder under the store root
	Topic        string   `json:"topic,omitempty"`   // a topic's own table: the topic
	Group        string   `json:"group,omitempty"`   // a group's table: the group
	Topics       []string `json:"topics,omitempty"`  // a group's table: its registered topics
	Skipped      string   `json:"skipped,omitempty"` // why nothing was done
	Compacted    int      `json:"filesCompacted"`    // input files rewritten
	Written      int      `json:"filesWritten"`
	LogDeleted   int      `json:"logFilesDeleted"`
	Earliest     int64    `json:"earliestVersion"`
	FilesDeleted int      `json:"dataFilesDeleted"`
	BytesDeleted int64    `json:"dataBytesDeleted"`
	TempSwept    int      `json:"tempFilesSwept"`
	ActiveFiles  int      `json:"activeFiles"`
	// HeldFor lists the protected consumer groups clean-up and VACUUM
	// kept versions for; Released those released past their maximum hold.
	HeldFor        []string      `json:"heldFor,omitempty"`
	Released       []string      `json:"released,omitempty"`
	Errors         []string      `json:"errors,omitempty"`
	Took           time.Duration `json:"tookNs"`
	compactVersion []int64
}

// Report is one run over the tables.
type Report struct {
	Tables []TableReport `json:"tables"`
	Took   time.Duration `json:"tookNs"`
}

// Failed reports whether any table had an error.
func (r Report) Failed() bool {
	for _, t := range r.Tables {
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

// Run maintains each table once.
func Run(ctx context.Context, root storage.Store, opts Options) (rep Report, err error) {
	opts = opts.withDefaults()
	start := time.Now()
	ctx, span := opts.startSpan(ctx, "")
	defer func() { endSpan(span, err, attribute.Int("deltabus.tables", len(rep.Tables))) }()
	tables, err := targets(ctx, root, opts)
	if err != nil {
		return Report{}, err
	}
	leases := &leaseCache{root: root}
	protected, err := protectedGroups(ctx, root)
	if err != nil {
		return Report{}, fmt.Errorf("read the protected consumer groups: %w", err)
	}
	for _, t := range tables {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		tr := maintainTable(ctx, root, t, opts, leases, protected)
		if t.unplaced && tr.Skipped == skipNoTable {
			continue // a group no topic was placed in yet
		}
		rep.Tables = append(rep.Tables, tr)
	}
	rep.Took = time.Since(start)
	return rep, nil
}

// skipNoTable is TableReport.Skipped of a table that does not exist.
const skipNoTable = "no table"

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

func maintainTable(ctx context.Context, root storage.Store, t target, opts Options, leases *leaseCache, protected map[string][]*members.Stored) (tr TableReport) {
	start := time.Now()
	tr = t.report()
	ctx, span := opts.startSpan(ctx, ".table", attribute.String("deltabus.table", t.table), attribute.String("deltabus.group", t.group))
	defer func() {
		tr.Took = time.Since(start)
		var err error
		if len(tr.Errors) > 0 {
			err = errors.New(strings.Join(tr.Errors, "; "))
		}
		endSpan(span, err, attribute.String("deltabus.skipped", tr.Skipped))
	}()
	if t.err != nil {
		tr.Errors = append(tr.Errors, t.err.Error())
		return tr
	}
	why, err := held(ctx, root, t)
	if err != nil {
		tr.Errors = append(tr.Errors, err.Error())
		return tr
	}
	if why != "" {
		tr.Skipped = why
		return tr
	}
	table := storage.Sub(root, t.table)
	if _, err := delta.LoadSnapshot(ctx, table, -1); errors.Is(err, delta.ErrNoTable) {
		tr.Skipped = skipNoTable
		return tr
	}
	run := tableRun{opts: opts, t: t, root: root, table: table, tr: &tr}
	if !opts.SkipCompact && !opts.DryRun {
		run.compact(ctx)
	}
	if opts.SkipCleanup && opts.SkipVacuum {
		return tr
	}
	h, err := run.holdsFor(ctx, protected)
	if err != nil { // what protected groups need is unknown: delete nothing
		run.fail("read what protected consumer groups need", err)
		return tr
	}
	var heldBack bool
	if !opts.SkipCleanup {
		heldBack = run.cleanup(ctx, h)
	}
	if !opts.SkipVacuum {
		heldBack = run.vacuum(ctx, leases, h) || heldBack
	}
	if err := run.recordHolds(ctx, h, heldBack); err != nil {
		run.fail("record the consumer groups' holds", err)
	}
	return tr
}

// tableRun is the steps of one table's maintenance, each recording what
// it did, or its error, in tr.
type tableRun struct {
	opts  Options
	t     target
	root  storage.Store
	table storage.Store
	tr    *TableReport
}

// fail records a step's error; the next run tries again.
func (r tableRun) fail(step string, err error) {
	r.tr.Errors = append(r.tr.Errors, fmt.Sprintf("%s: %v", step, err))
	r.opts.Logger.Warn("maintenance step failed (the next run tries again)", "table", r.t.table, "step", step, "err", err)
}

func (r tableRun) compact(ctx context.Context) {
	if r.t.table == txlog.Table {
		r.compactRecords(ctx)
		return
	}
	co := r.opts.Compact
	co.SplitTopics = r.t.group != "" // a group's table: outputs of one topic each
	ctx, span := r.opts.startSpan(ctx, ".compact")
	res, err := topic.Compact(ctx, r.table, co)
	endSpan(span, err, attribute.Int("deltabus.files_removed", res.FilesRemoved), attribute.Int("deltabus.files_added", res.FilesAdded))
	r.tr.Compacted, r.tr.Written, r.tr.compactVersion = res.FilesRemoved, res.FilesAdded, res.Versions
	if err != nil && !errors.Is(err, delta.ErrRewriteConflict) {
		r.fail("compact", err)
	}
}

// compactRecords merges the transaction records' small files (txlog).
func (r tableRun) compactRecords(ctx context.Context) {
	ctx, span := r.opts.startSpan(ctx, ".compact")
	res, err := txlog.Compact(ctx, r.root, r.opts.Logger)
	endSpan(span, err, attribute.Int("deltabus.files_removed", res.FilesRemoved), attribute.Int("deltabus.files_added", res.FilesAdded))
	r.tr.Compacted, r.tr.Written, r.tr.compactVersion = res.FilesRemoved, res.FilesAdded, res.Versions
	if err != nil {
		r.fail("compact", err)
	}
}

// cleanup deletes expired log entries, except what protected groups (h)
// need; heldBack says they kept something the retention would delete.
func (r tableRun) cleanup(ctx context.Context, h consumerHold) (heldBack bool) {
	o := r.opts
	ctx, span := o.startSpan(ctx, ".cleanup")
	co := delta.CleanupOptions{Now: o.Now(), Retention: o.LogRetention, DryRun: o.DryRun, Logger: o.Logger, KeepFrom: max(h.keepFrom, 0)}
	if h.keepFrom == 0 {
		co.DryRun = true // a group at version 0 needs the whole log: only see whether it holds something
	}
	res, err := delta.CleanupLog(ctx, r.table, co)
	if h.keepFrom == 0 {
		res.HeldBack, res.Deleted, res.Earliest = len(res.Deleted) > 0, nil, 0
	}
	endSpan(span, err, attribute.Int("deltabus.log_files_deleted", len(res.Deleted)), attribute.Int64("deltabus.earliest_version", res.Earliest))
	if err != nil {
		r.fail("clean up the log", err)
	}
	r.tr.LogDeleted, r.tr.Earliest = len(res.Deleted), res.Earliest
	return res.HeldBack
}

// vacuum deletes unreferenced data files, except what protected groups
// (h) need; heldBack says they kept something the retention would delete.
func (r tableRun) vacuum(ctx context.Context, leases *leaseCache, h consumerHold) (heldBack bool) {
	o := r.opts
	vo := delta.VacuumOptions{Now: o.Now(), Retention: o.FileRetention, DryRun: o.DryRun, Logger: o.Logger}
	if h.keepFrom >= 0 {
		vo.KeepRemovedSince = h.keepSince
		if vo.KeepRemovedSince.IsZero() {
			vo.KeepRemovedSince = time.Unix(0, 1) // the group's version is gone: keep every removed file
		}
	}
	if leases, err := leases.get(ctx); err != nil {
		r.fail("vacuum", fmt.Errorf("read the writers' leases: %w", err))
		return false
	} else if since, ok := inFlightSince(leases, r.t, time.Now()); ok {
		vo.InFlightSince = since
	}
	if sw, ok := r.table.(storage.Sweeper); ok && !o.DryRun {
		vo.SweepTemp = func(ctx context.Context, prefix string, _ time.Time) error {
			n, err := sw.SweepTemp(ctx, prefix, o.TempAge)
			r.tr.TempSwept += n
			if errors.Is(err, errors.ErrUnsupported) {
				return nil
			}
			return err
		}
	}
	ctx, span := o.startSpan(ctx, ".vacuum")
	res, err := delta.Vacuum(ctx, r.table, vo)
	endSpan(span, err, attribute.Int("deltabus.data_files_deleted", len(res.Deleted)), attribute.Int64("deltabus.bytes_deleted", res.DeletedBytes))
	if err != nil {
		r.fail("vacuum", err)
	}
	r.tr.FilesDeleted, r.tr.BytesDeleted, r.tr.ActiveFiles = len(res.Deleted), res.DeletedBytes, res.Active
	return res.HeldBack > 0
}
