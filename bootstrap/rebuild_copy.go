package bootstrap

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

// copyRebuild copies the topic's rows under a new snapshot, once the relay
// has paused the topic (its table no longer changes) and every transaction
// that committed before the pause watermark is visible. Events the table
// holds are skipped (in a group's table, the topic's rows only, with the
// topic's txn appId/topic). Its files are written to the topic's table's
// folder (its group's for a grouped topic). It returns the record the
// relay commits from.
func copyRebuild(ctx context.Context, cfg Config, store storage.Store, pl *places, p catalog.Placement, pauseLSN pglogrepl.LSN,
	opts Options, log *slog.Logger) (catalog.RebuildRecord, error) {
	name := p.Topic
	pos, err := sourcePositions(ctx, store, cfg.AppID)
	if err != nil {
		return catalog.RebuildRecord{}, err
	}
	rec := catalog.RebuildRecord{Topic: name, AppID: cfg.AppID, TxnVersion: pos.Pos(pauseLSN), Created: time.Now().UTC()}
	set, err := topicIDs(ctx, store, p, cfg.AppID)
	if err != nil {
		return rec, keepPaused{unreadable(store, p, err)}
	}
	if set != nil && set.txn >= rec.TxnVersion {
		rec.TxnVersion = set.txn + 1 // the relay committed past the watermark before pausing
	}
	dead, err := deadLettersOf(ctx, store, cfg.AppID, name)
	if err != nil {
		return rec, fmt.Errorf("rebuild: %w", err)
	}
	coord, snapName, err := openExportingConn(ctx, cfg.Source, &rec)
	if err != nil {
		return rec, err
	}
	conns := []*pgx.Conn{coord}
	defer func() {
		for _, c := range conns {
			c.Close(context.WithoutCancel(ctx))
		}
	}()
	for len(conns) < opts.Connections {
		c, err := openSnapshotConn(ctx, cfg.Source, snapName)
		if err != nil {
			return rec, err
		}
		conns = append(conns, c)
	}
	srcs, err := publishedSources(ctx, coord, cfg.Publication, opts.Mappings)
	if err != nil {
		return rec, err
	}
	all, err := planUnits(ctx, coord, srcs)
	if err != nil {
		return rec, err
	}
	var units []*unit
	for _, u := range all {
		if u.topic != nil && *u.topic == name {
			units = append(units, u)
		}
	}
	log.Info("rebuild: copying the topic under the snapshot", "snapshot", rec.Snapshot, "seam_end", rec.SeamEnd,
		"events_in_table", set.len(), "units", len(units))
	opts.Files.Source = cfg.AppID
	// Events the stream dead-lettered are skipped as the table's are, and
	// dead letters _dead_letter holds are not written again.
	existing := map[string]*idSet{name: set.union(dead.events), outbox.DeadLetterTopic: dead.letters}
	job := &copyJob{root: store, opts: opts, lsn: pglogrepl.LSN(pos.Through(rec.TxnVersion)), takenAt: rec.Created,
		existing: existing, places: pl, metrics: newMetrics(opts.Metrics), results: map[string][]unitFiles{},
		added: map[string]int64{}, skipped: map[string]int64{}}
	stop := job.reportProgress(ctx, 0)
	defer stop()
	if err := job.copyUnits(ctx, conns, units); err != nil {
		return rec, fmt.Errorf("rebuild: %w", err)
	}
	// Dead letters _dead_letter lacks (the registry refuses now what it
	// admitted when the events were streamed) are committed before the
	// record: the topic never gets those events, so _dead_letter must.
	if err := commitDeadLetters(ctx, store, cfg.AppID, sortedAdds(job.results[outbox.DeadLetterTopic])); err != nil {
		return rec, fmt.Errorf("rebuild: %w", err)
	}
	groups, err := catalog.ListGroups(ctx, store)
	if err != nil {
		return rec, fmt.Errorf("rebuild: %w", err)
	}
	if err := checkPlaced(ctx, store, groups, p); err != nil {
		return rec, fmt.Errorf("rebuild: %w", err)
	}
	rec.Adds = sortedAdds(job.results[name])
	rec.Rows, rec.Added, rec.Present = job.rows.Load(), job.added[name], job.skipped[name]
	return rec, nil
}

// unreadable is the instruction for a topic whose table cannot be read.
// Moving a group's table away takes every topic of the group with it:
// each is then held until it is rebuilt or aborted.
func unreadable(store storage.Store, p catalog.Placement, err error) error {
	if p.Shared() {
		return usererr.New(err, "rebuild: the table of topic %q, group %q's table at %s, cannot be read (%v). "+
			"The topic stays paused, so nothing writes there for it: move the table away (every topic of group %q is then held until it is rebuilt, or aborted, one by one), "+
			"then run `relay rebuild --topic %s` again (or --abort to resume streaming it)",
			p.Topic, p.Group(), storage.Sub(store, p.Table), err, p.Group(), p.Topic)
	}
	return usererr.New(err, "rebuild: the table of topic %q at %s cannot be read (%v). "+
		"The topic stays paused, so nothing writes there: move the table away, then run `relay rebuild --topic %s` again (or --abort to resume streaming it)",
		p.Topic, storage.Sub(store, p.Table), err, p.Topic)
}

// openExportingConn opens the rebuild's snapshot and records what the seam
// needs: the snapshot (which xids it sees) and the WAL insert position read
// after it was taken (no transaction committing at or after it is visible).
func openExportingConn(ctx context.Context, dsn string, rec *catalog.RebuildRecord) (*pgx.Conn, string, error) {
	conn, err := openSnapshotConn(ctx, dsn, "")
	if err != nil {
		return nil, "", err
	}
	var name string
	err = conn.QueryRow(ctx, "SELECT pg_current_snapshot()::text, pg_export_snapshot(), pg_current_wal_insert_lsn()::text").
		Scan(&rec.Snapshot, &name, &rec.SeamEnd)
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, "", fmt.Errorf("rebuild: take snapshot: %w", err)
	}
	return conn, name, nil
}
