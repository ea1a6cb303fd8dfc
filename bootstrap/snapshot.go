package bootstrap

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/sync/errgroup"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/storage"
)

// Snapshot drops the relay's slot if it exists (it must be idle), creates
// it again with an exported snapshot, copies every outbox row that snapshot
// sees into the topics, skipping events a topic already holds from this
// relay, commits each topic once with txn{appId, consistentPoint-1}, then
// writes the relay marker. It is the first start, the redo of an
// interrupted first start, and the core of Recover. Repeating it after a
// failure at any point is safe.
func Snapshot(ctx context.Context, cfg Config, store storage.Store, opts Options) (res Result, err error) {
	start := time.Now()
	cfg, opts = cfg.withDefaults(), opts.withDefaults()
	log := opts.Log.With("slot", cfg.Slot)
	ctx, sp := opts.startSpan(ctx, "bootstrap", attribute.String("deltabus.slot", cfg.Slot))
	defer func() {
		sp.end(err, attribute.Int64("deltabus.rows", res.Rows), attribute.Int("deltabus.topics", len(res.Topics)),
			attribute.String("deltabus.consistent_point", res.ConsistentPoint.String()))
	}()
	sql, err := pgsource.Connect(ctx, cfg.Source)
	if err != nil {
		return Result{}, err
	}
	defer sql.Close(context.WithoutCancel(ctx))
	var id catalog.Identity
	var src pgsource.Identity
	if cfg, id, src, err = identifyOn(ctx, sql, cfg, store); err != nil {
		return Result{}, err
	}
	log = log.With("app_id", cfg.AppID)
	if res.DroppedSlot, err = dropLeftoverSlot(ctx, sql, cfg.Slot, opts, log); err != nil {
		return res, err
	}
	pl, existing, err := readExistingIDs(ctx, store, cfg.AppID, opts)
	if err != nil {
		return res, err
	}
	holder := catalog.LeaseName(cfg.AppID, "bootstrap")
	lease, err := catalog.HoldLease(ctx, store, holder, nil, func() time.Time { return start }, log)
	if err != nil {
		return res, fmt.Errorf("bootstrap: %w", err)
	}
	defer lease.Release(context.WithoutCancel(ctx), store, holder)
	pctx, ps := opts.startSpan(ctx, "bootstrap.create_slot")
	slot, err := createExportedSlot(pctx, cfg.Source, cfg.Slot, !cfg.NoFailoverSlot)
	if ps.end(err); err != nil {
		return res, fmt.Errorf("bootstrap: %w", err)
	}
	defer slot.close()
	res.ConsistentPoint = slot.consistentPoint
	m, version, err := snapshotMarker(id, src, existing, slot, log)
	if err != nil {
		return res, err
	}
	m.Publication, m.SystemID, m.Database = cfg.Publication, slot.systemID, sql.Config().Database
	log.Info("bootstrap: slot created with an exported snapshot", "consistent_point", slot.consistentPoint,
		"snapshot", slot.snapshotName, "topics_with_events", len(existing))
	job, err := copySnapshot(ctx, cfg, store, opts, slot, existing, pl, log)
	if err != nil {
		return res, err
	}
	if res.Topics, err = commitSnapshot(ctx, job, cfg.AppID, m, version, opts); err != nil {
		return res, err
	}
	res.Rows, res.Took = job.rows.Load(), time.Since(start)
	log.Info("bootstrap: snapshot committed", "rows", res.Rows, "topics", len(res.Topics),
		"took", res.Took.Round(time.Millisecond), "rows_per_s", int64(float64(res.Rows)/res.Took.Seconds()),
		"stream_from", res.ConsistentPoint)
	return res, nil
}

// dropLeftoverSlot drops the relay's slot if it exists (it must be idle):
// its snapshot was never committed, or it was lost. It says whether there
// was one.
func dropLeftoverSlot(ctx context.Context, sql *pgx.Conn, slot string, opts Options, log *slog.Logger) (bool, error) {
	pctx, ps := opts.startSpan(ctx, "bootstrap.drop_slot")
	dropped, err := dropSlot(pctx, sql, slot)
	if ps.end(err); err != nil {
		return dropped, fmt.Errorf("bootstrap: %w", err)
	}
	if dropped {
		log.Warn("bootstrap: dropped the existing replication slot: its snapshot was never committed, or it was lost; copying again")
	}
	return dropped, nil
}

// readExistingIDs finds where each topic lives and reads the identity of
// every event this relay already wrote to a topic (existingIDs).
func readExistingIDs(ctx context.Context, store storage.Store, appID string, opts Options) (*places, map[string]*idSet, error) {
	pl, err := newPlaces(ctx, store)
	if err != nil {
		return nil, nil, fmt.Errorf("bootstrap: %w", err)
	}
	pctx, ps := opts.startSpan(ctx, "bootstrap.existing_ids")
	existing, err := existingIDs(pctx, store, appID, pl)
	if ps.end(err, attribute.Int("deltabus.topics", len(existing))); err != nil {
		return nil, nil, fmt.Errorf("bootstrap: read events already in the topics: %w", err)
	}
	return pl, existing, nil
}

// snapshotMarker returns the marker the snapshot will write (the one it
// replaces, if any, on the source's current timeline, its recovery done)
// and the txn version of the snapshot commit: the position of cp - 1.
//
// A recovery whose snapshot position is not above every position the
// topics hold for the source (its LSNs went back without a timeline to
// say where: a database restored in place, or a marker of an earlier
// release) begins a new epoch at cp - 1: the snapshot holds every event
// the outbox has that the topics lack (by event_id), and the stream
// starts at cp, so nothing below it is met again. A first start is
// refused instead: the topics hold this source's events and no marker
// says whose progress they are.
func snapshotMarker(id catalog.Identity, src pgsource.Identity, existing map[string]*idSet, slot *exportedSlot,
	log *slog.Logger) (catalog.Marker, int64, error) {
	m := catalog.Marker{AppID: id.AppID, Slot: id.Source.Slot}
	if id.Marker != nil {
		m = *id.Marker
	}
	m.ConsistentPoint, m.Timeline, m.RecoveringSince = slot.consistentPoint.String(), src.Timeline, nil
	pos, err := m.Positions()
	if err != nil {
		return m, 0, err
	}
	highest, name := int64(-1), ""
	for n, set := range existing {
		if set.txn > highest {
			highest, name = set.txn, n
		}
	}
	version := pos.Pos(slot.consistentPoint - 1)
	if highest < version {
		return m, version, nil
	}
	if id.Marker == nil {
		return m, 0, fmt.Errorf("bootstrap: topic %q records txn version %d, at or past the new slot's consistent point %s: the source's LSNs went backwards (a restored or different database?)",
			name, highest, slot.consistentPoint)
	}
	if m.Epochs, err = catalog.Next(m.Epochs, src.Timeline, slot.consistentPoint-1, highest); err != nil {
		return m, 0, fmt.Errorf("bootstrap: %w", err)
	}
	log.Warn("recover: the source's LSNs are below positions the topics hold (a database restored in place, or a marker of an earlier release): "+
		"its positions begin a new epoch above them; `relay reconcile` names every event the topics hold that the source lacks",
		"topic", name, "position", highest, "consistent_point", slot.consistentPoint)
	if pos, err = catalog.NewPositions(m.Epochs); err != nil {
		return m, 0, err
	}
	return m, pos.Pos(slot.consistentPoint - 1), nil
}

// copySnapshot copies every outbox row the slot's snapshot sees into files
// of the topics (copyAll), skipping the events existing holds; the job
// returned holds the files to commit.
func copySnapshot(ctx context.Context, cfg Config, store storage.Store, opts Options, slot *exportedSlot, existing map[string]*idSet,
	pl *places, log *slog.Logger) (*copyJob, error) {
	opts.Files.Source = cfg.AppID
	job := &copyJob{root: store, opts: opts, lsn: slot.consistentPoint - 1, takenAt: slot.takenAt, existing: existing, places: pl,
		metrics: newMetrics(opts.Metrics), results: map[string][]unitFiles{}, added: map[string]int64{}, skipped: map[string]int64{}}
	pctx, ps := opts.startSpan(ctx, "bootstrap.copy")
	err := job.copyAll(pctx, cfg, slot, log)
	if ps.end(err, attribute.Int64("deltabus.rows", job.rows.Load())); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	return job, nil
}

// commitSnapshot commits each topic's files once with txn{appId, version},
// then writes the relay marker.
func commitSnapshot(ctx context.Context, job *copyJob, appID string, m catalog.Marker, version int64,
	opts Options) (map[string]TopicResult, error) {
	pctx, ps := opts.startSpan(ctx, "bootstrap.commit", attribute.Int64("deltabus.txn_version", version))
	topics, err := job.commitTopics(pctx, appID, version)
	if ps.end(err, attribute.Int("deltabus.topics", len(topics))); err != nil {
		return topics, fmt.Errorf("bootstrap: %w", err)
	}
	pctx, ps = opts.startSpan(ctx, "bootstrap.marker")
	err = writeMarker(pctx, job.root, m)
	if ps.end(err); err != nil {
		return topics, fmt.Errorf("bootstrap: %w", err)
	}
	return topics, nil
}

// copyAll imports the snapshot into opts.Connections transactions and
// copies every unit.
func (j *copyJob) copyAll(ctx context.Context, cfg Config, slot *exportedSlot, log *slog.Logger) error {
	conns := make([]*pgx.Conn, 0, j.opts.Connections)
	defer func() {
		for _, c := range conns {
			c.Close(context.WithoutCancel(ctx))
		}
	}()
	for range j.opts.Connections {
		c, err := openSnapshotConn(ctx, cfg.Source, slot.snapshotName)
		if err != nil {
			return err
		}
		conns = append(conns, c)
	}
	// The replication connection stays open, idle, until the marker is
	// written: the slot stays active, so a second relay starting meanwhile
	// finds it in use instead of idle and dropping it as a dead bootstrap.
	srcs, err := publishedSources(ctx, conns[0], cfg.Publication, j.opts.Mappings)
	if err != nil {
		return err
	}
	units, err := planRanges(ctx, conns[0], srcs, len(conns))
	if err != nil {
		return err
	}
	var est int64
	for _, s := range srcs {
		est += s.estRows
	}
	log.Info("bootstrap: copying", "tables", len(srcs), "block_ranges", len(units), "estimated_rows", est, "connections", len(conns))
	j.metrics.setEstimate(est)
	stop := j.reportProgress(ctx, est)
	defer stop()
	return j.copyUnits(ctx, conns, units)
}

// copyUnits has the connections take units from a shared queue.
func (j *copyJob) copyUnits(ctx context.Context, conns []*pgx.Conn, units []*unit) error {
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range conns {
		router := outbox.NewRouter(j.opts.Mappings)
		g.Go(func() error {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(units) {
					return nil
				}
				if err := j.copyUnit(gctx, c, router, units[i]); err != nil {
					return err
				}
			}
		})
	}
	return g.Wait()
}

// reportProgress logs rows done, rate and ETA every opts.ProgressEvery.
func (j *copyJob) reportProgress(ctx context.Context, est int64) (stop func()) {
	done := make(chan struct{})
	go func() {
		start := time.Now()
		t := time.NewTicker(j.opts.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rows := j.rows.Load()
			el := time.Since(start).Seconds()
			rate := float64(rows) / el
			attrs := []any{"rows", rows, "rows_per_s", int64(rate)}
			if total := max(est, rows); total > 0 && rate > 0 {
				attrs = append(attrs, "estimated_total", total, "percent", 100*rows/total,
					"eta", time.Duration(float64(total-rows)/rate*float64(time.Second)).Round(time.Second))
			}
			j.opts.Log.Info("bootstrap: progress", attrs...)
		}
	}()
	return func() { close(done) }
}
