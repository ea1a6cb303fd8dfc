package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/deltasink"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

// RebuildOptions tune a topic rebuild.
type RebuildOptions struct {
	Options
	// PauseWait bounds the wait for the relay to reach the pause watermark
	// (default 10m); CommitWait the wait for it to commit the snapshot
	// (default 10m; the rebuild is handed over either way).
	PauseWait, CommitWait time.Duration
}

// RebuildResult says what a rebuild did.
type RebuildResult struct {
	ID         string
	Topic      string
	Rows       int64         // rows of the topic the snapshot saw
	Added      int64         // events the rebuild adds to the table
	Present    int64         // events the table already held
	TxnVersion pglogrepl.LSN // txn version of the snapshot commit
	SeamEnd    pglogrepl.LSN
	Committed  bool // the relay committed it within CommitWait
	Took       time.Duration
	// Table is the folder of the table holding the topic: its own name, or
	// its group's table (catalog.GroupTable).
	Table string
	// Held lists, when the rebuild restored a grouped topic whose group
	// table was gone or replaced, the group's other topics whose events
	// were in the lost table: each stays held (Missing) until it is
	// rebuilt or aborted on its own.
	Held []string
}

// Rebuild re-snapshots one topic while the relay streams the others (see
// relay/rebuild.go for the watermark protocol): it pauses the topic through
// the stream, copies the rows an exact snapshot sees, skipping events the
// table already holds, and hands the files to the relay, which commits them
// and re-reads the stream from the pause. A table that cannot be read must
// be moved away first: the rebuild then creates a new one.
func Rebuild(ctx context.Context, cfg Config, store storage.Store, name string, opts RebuildOptions) (res RebuildResult, err error) {
	start := time.Now()
	cfg, opts = cfg.withDefaults(), opts.withDefaults()
	res = RebuildResult{ID: catalog.NewID(), Topic: name}
	log := opts.Log.With("topic", name, "rebuild", res.ID)
	ctx, sp := opts.startSpan(ctx, "rebuild", attribute.String("deltabus.topic", name), attribute.String("deltabus.rebuild", res.ID))
	defer func() {
		sp.end(err, attribute.Int64("deltabus.rows", res.Rows), attribute.Int64("deltabus.added", res.Added),
			attribute.String("deltabus.txn_version", res.TxnVersion.String()), attribute.Bool("deltabus.committed", res.Committed))
	}()
	if cfg, _, err = Identify(ctx, cfg, store); err != nil {
		return res, fmt.Errorf("rebuild: %w", err)
	}
	log = log.With("app_id", cfg.AppID)
	before, pl, p, err := findRebuildTable(ctx, cfg, store, name)
	if err != nil {
		return res, err
	}
	res.Table = p.Table
	log = log.With("table", p.Table)
	sql, err := connectToSlot(ctx, cfg, log)
	if err != nil {
		return res, err
	}
	defer sql.Close(context.WithoutCancel(ctx))
	wm := catalog.Watermark{ID: res.ID, Topic: name, AppID: cfg.AppID}
	pauseLSN, err := pauseTopic(ctx, sql, store, wm, opts.Options)
	if err != nil {
		return res, err
	}
	handedOver := false
	defer func() {
		var kp keepPaused
		if err != nil && !handedOver && !errors.As(err, &kp) {
			abortRebuild(context.WithoutCancel(ctx), sql, wm, log)
		}
	}()
	if err := waitUntilPaused(ctx, sql, store, wm, pauseLSN, opts, log); err != nil {
		return res, err
	}
	release, err := leaseRebuild(ctx, store, cfg.AppID, p, log)
	if err != nil {
		return res, err
	}
	defer release()
	rec, err := copyAndRecord(ctx, cfg, store, pl, p, pauseLSN, opts.Options, &res, log)
	if err != nil {
		return res, err
	}
	if err := handOver(ctx, sql, wm, rec, res, opts.Options, log); err != nil {
		return res, err
	}
	handedOver = true
	err = waitRelayCommitted(ctx, store, p, before, rec, opts, &res)
	res.Took = time.Since(start)
	return res, err
}

// withDefaults fills what o leaves unset: its Options' defaults, and 10
// minutes for each wait.
func (o RebuildOptions) withDefaults() RebuildOptions {
	o.Options = o.Options.withDefaults()
	o.PauseWait = cmpOr(o.PauseWait, 10*time.Minute)
	o.CommitWait = cmpOr(o.CommitWait, 10*time.Minute)
	return o
}

// findRebuildTable refuses what a rebuild cannot do (checkRebuildable) and
// finds the table that holds the topic: its own, or its group's. It returns
// the topic as the relay's sink saw it before the rebuild and its placement.
func findRebuildTable(ctx context.Context, cfg Config, store storage.Store, name string) (sink.Topic, *places, catalog.Placement, error) {
	before, err := checkRebuildable(ctx, cfg, store, name)
	if err != nil {
		return before, nil, catalog.Placement{}, err
	}
	pl, err := newPlaces(ctx, store)
	if err != nil {
		return before, nil, catalog.Placement{}, fmt.Errorf("rebuild: %w", err)
	}
	p, err := pl.of(ctx, name)
	if err != nil {
		return before, pl, p, fmt.Errorf("rebuild: %w", err)
	}
	return before, pl, p, nil
}

// connectToSlot connects to the source and checks the relay's slot there
// (checkSlotStreaming).
func connectToSlot(ctx context.Context, cfg Config, log *slog.Logger) (*pgx.Conn, error) {
	sql, err := pgsource.Connect(ctx, cfg.Source)
	if err != nil {
		return nil, err
	}
	if err := checkSlotStreaming(ctx, sql, cfg.Slot, log); err != nil {
		sql.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return sql, nil
}

// pauseTopic writes the rebuild's intent, then its pause watermark, and
// returns the watermark's LSN.
func pauseTopic(ctx context.Context, sql *pgx.Conn, store storage.Store, wm catalog.Watermark, opts Options) (pglogrepl.LSN, error) {
	// The intent comes first: the relay honours a watermark only if the
	// store holds the intent it names.
	if err := catalog.WriteIntent(ctx, store, catalog.Intent{ID: wm.ID, Topic: wm.Topic, AppID: wm.AppID, Kind: catalog.IntentRebuild}); err != nil {
		return 0, fmt.Errorf("rebuild: %w", err)
	}
	pctx, ps := opts.startSpan(ctx, "rebuild.pause")
	pauseLSN, err := emitWatermark(pctx, sql, wm, catalog.WatermarkPause)
	ps.end(err, attribute.String("deltabus.watermark", pauseLSN.String()))
	return pauseLSN, err
}

// waitUntilPaused waits for the relay to pause the topic at the watermark
// (waitPaused), then for every transaction older than the pause to end
// (waitOlderTransactions): the copy may then begin.
func waitUntilPaused(ctx context.Context, sql *pgx.Conn, store storage.Store, wm catalog.Watermark, pauseLSN pglogrepl.LSN, opts RebuildOptions, log *slog.Logger) error {
	log.Info("rebuild: pause watermark written; waiting for the relay to reach it", "watermark", pauseLSN)
	pctx, ps := opts.startSpan(ctx, "rebuild.wait_relay")
	err := waitPaused(pctx, store, wm, pauseLSN, opts.PauseWait, log)
	if ps.end(err); err != nil {
		return err
	}
	pctx, ps = opts.startSpan(ctx, "rebuild.wait_transactions")
	err = waitOlderTransactions(pctx, sql, log)
	ps.end(err)
	return err
}

// leaseRebuild holds the rebuild's lease until release is called.
func leaseRebuild(ctx context.Context, store storage.Store, appID string, p catalog.Placement, log *slog.Logger) (release func(), err error) {
	holder, copyStart := catalog.LeaseName(appID, "rebuild"), time.Now()
	// The lease names the topic and, for a grouped one, its group's table,
	// under which the files are written.
	leased := []string{p.Topic}
	if p.Shared() {
		leased = append(leased, p.Table)
	}
	lease, err := catalog.HoldLease(ctx, store, holder, leased, func() time.Time { return copyStart }, log)
	if err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	return func() { lease.Release(context.WithoutCancel(ctx), store, holder) }, nil
}

// copyAndRecord copies the topic (copyRebuild), notes in res what the copy
// found, and writes the record the relay commits from.
func copyAndRecord(ctx context.Context, cfg Config, store storage.Store, pl *places, p catalog.Placement, pauseLSN pglogrepl.LSN,
	opts Options, res *RebuildResult, log *slog.Logger) (catalog.RebuildRecord, error) {
	pctx, ps := opts.startSpan(ctx, "rebuild.copy")
	rec, err := copyRebuild(pctx, cfg, store, pl, p, pauseLSN, opts, log)
	if ps.end(err, attribute.Int64("deltabus.rows", rec.Rows), attribute.Int64("deltabus.added", rec.Added)); err != nil {
		return rec, err
	}
	rec.ID = res.ID
	res.Rows, res.Added, res.Present = rec.Rows, rec.Added, rec.Present
	res.TxnVersion = pglogrepl.LSN(rec.TxnVersion)
	res.SeamEnd, _ = pglogrepl.ParseLSN(rec.SeamEnd)
	pctx, ps = opts.startSpan(ctx, "rebuild.record")
	err = catalog.WriteRebuildRecord(pctx, store, rec)
	if ps.end(err); err != nil {
		return rec, fmt.Errorf("rebuild: %w", err)
	}
	return rec, nil
}

// handOver writes the commit watermark, which hands the snapshot to the
// relay: it commits the files the record lists. A failure after it writes
// no abort watermark.
func handOver(ctx context.Context, sql *pgx.Conn, wm catalog.Watermark, rec catalog.RebuildRecord, res RebuildResult, opts Options, log *slog.Logger) error {
	pctx, ps := opts.startSpan(ctx, "rebuild.commit_watermark")
	_, err := emitWatermark(pctx, sql, wm, catalog.WatermarkCommit)
	if ps.end(err); err != nil {
		return err
	}
	log.Info("rebuild: snapshot handed to the relay", "rows", rec.Rows, "added", rec.Added, "present", rec.Present,
		"txn_version", res.TxnVersion, "seam_end", res.SeamEnd)
	return nil
}

// waitRelayCommitted waits up to CommitWait for the relay to commit the
// snapshot (res.Committed); when it restored a grouped topic whose table
// was lost, it lists the group's topics still held (res.Held).
func waitRelayCommitted(ctx context.Context, store storage.Store, p catalog.Placement, before sink.Topic, rec catalog.RebuildRecord,
	opts RebuildOptions, res *RebuildResult) error {
	var err error
	pctx, ps := opts.startSpan(ctx, "rebuild.wait_commit")
	res.Committed, err = waitCommitted(pctx, store, p, rec.AppID, rec.TxnVersion, opts.CommitWait)
	ps.end(err)
	if err == nil && p.Shared() && before.Status == sink.Missing {
		res.Held, err = heldInGroup(ctx, store, p)
	}
	return err
}

// AbortRebuild writes an abort intent and its watermark for the topic: a
// relay holding the topic for any rebuild (or for a missing table) resumes
// streaming it from the hold.
func AbortRebuild(ctx context.Context, cfg Config, store storage.Store, name string) (pglogrepl.LSN, error) {
	cfg = cfg.withDefaults()
	if err := catalog.CheckName("topic", name); err != nil {
		return 0, usererr.New(err, "rebuild --abort: %v", err)
	}
	cfg, _, err := Identify(ctx, cfg, store)
	if err != nil {
		return 0, fmt.Errorf("rebuild --abort: %w", err)
	}
	in := catalog.Intent{ID: catalog.NewID(), Topic: name, AppID: cfg.AppID, Kind: catalog.IntentAbort}
	if err := catalog.WriteIntent(ctx, store, in); err != nil {
		return 0, fmt.Errorf("rebuild --abort: %w", err)
	}
	sql, err := pgsource.Connect(ctx, cfg.Source)
	if err != nil {
		return 0, err
	}
	defer sql.Close(context.WithoutCancel(ctx))
	return emitWatermark(ctx, sql, catalog.Watermark{ID: in.ID, Topic: name, AppID: cfg.AppID}, catalog.WatermarkAbort)
}

func abortRebuild(ctx context.Context, sql *pgx.Conn, wm catalog.Watermark, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := emitWatermark(ctx, sql, wm, catalog.WatermarkAbort); err != nil {
		log.Error("rebuild failed and its abort watermark could not be written: the relay keeps the topic paused; run `relay rebuild --topic "+wm.Topic+" --abort`", "err", err)
		return
	}
	log.Warn("rebuild failed: abort watermark written, the relay resumes the topic from its pause")
}

// checkRebuildable refuses what a rebuild cannot do, before anything is
// written, and returns the topic as the relay's sink sees it.
func checkRebuildable(ctx context.Context, cfg Config, store storage.Store, name string) (sink.Topic, error) {
	if err := outbox.ValidTopic(name); err != nil {
		return sink.Topic{}, usererr.New(err, "rebuild: %q is not a topic name: %v", name, err)
	}
	if name == outbox.DeadLetterTopic {
		return sink.Topic{}, usererr.New(nil, "rebuild: the dead-letter topic holds rows the relay could not route; it cannot be rebuilt from the outbox")
	}
	t, err := deltasink.New(store, deltasink.Options{AppID: cfg.AppID}).Open(ctx, name)
	if err != nil {
		return t, fmt.Errorf("rebuild: %w", err)
	}
	if t.Status == sink.Foreign || t.Status == sink.Incompatible {
		what := fmt.Sprintf("the table of topic %q", name)
		if g, ok := catalog.GroupOfTable(t.Table); ok {
			what = fmt.Sprintf("group %q's table %s, which holds topic %q,", g, t.Table, name)
		}
		return t, usererr.New(nil, "rebuild: %s cannot take this relay's events (%s): move it away, then run the rebuild again", what, t.Reason)
	}
	if _, ok, err := catalog.ReadMarker(ctx, store, cfg.AppID); err != nil {
		return t, fmt.Errorf("rebuild: %w", err)
	} else if !ok {
		return t, usererr.New(nil, "rebuild: store %s has no relay %q yet: start `relay run`, whose first start copies every topic", store, cfg.AppID)
	}
	return t, nil
}

// keepPaused is a failure after which the topic stays paused (no abort
// watermark): the operator fixes something, then runs the rebuild again.
type keepPaused struct{ error }

func (k keepPaused) Unwrap() error { return k.error }

// checkSlotStreaming requires the relay's slot; a slot nobody streams from
// only gets a warning (the relay may be restarting).
func checkSlotStreaming(ctx context.Context, sql *pgx.Conn, slot string, log *slog.Logger) error {
	var active *bool
	err := sql.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
	if errors.Is(err, pgx.ErrNoRows) {
		return usererr.New(nil, "rebuild: replication slot %q does not exist: run `relay bootstrap --recover` first", slot)
	}
	if err != nil {
		return fmt.Errorf("rebuild: read slot %q: %w", slot, err)
	}
	if active == nil || !*active {
		log.Warn("rebuild: no relay is streaming from the slot right now; the rebuild waits for one to reach its watermark", "slot", slot)
	}
	return nil
}

// emitWatermark writes a transactional logical message and returns its LSN.
func emitWatermark(ctx context.Context, sql *pgx.Conn, wm catalog.Watermark, op string) (pglogrepl.LSN, error) {
	wm.Op = op
	var lsn string
	err := sql.QueryRow(ctx, "SELECT pg_logical_emit_message(true, $1, $2)::text", catalog.WatermarkPrefix, wm.Encode()).Scan(&lsn)
	if err != nil {
		return 0, fmt.Errorf("rebuild: write %s watermark: %w", op, err)
	}
	return pglogrepl.ParseLSN(lsn)
}

func cmpOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// sortedAdds flattens a topic's files in unit order.
func sortedAdds(files []unitFiles) []delta.Add {
	slices.SortFunc(files, compareFiles)
	var adds []delta.Add
	for _, f := range files {
		adds = append(adds, f.adds...)
	}
	return adds
}
