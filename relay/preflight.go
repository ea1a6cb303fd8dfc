package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/usererr"
)

// preflight checks the source and the store before anything is written,
// waits for the slot (standby), and returns the position to stream from:
// the slot's confirmed position, or the consistent point of a first start
// (which discards repl first: its bootstrap needs a walsender of its own).
//
// The store's checks run beside the database's, which on S3 hides a
// start's store requests behind its queries: the store's marker of the
// source is read (reads only) beside the publication check; the store's
// write probe starts once the publication and the identity passed, beside
// the slot's first reading. Errors come in the order of the checks: the
// server's version (migrations.MinMajor), wal_level, the publication, the
// identity, the store's writability, the slot; a start refused before the
// probe has written nothing.
func (r *Relay) preflight(ctx, hard context.Context, sql *pgx.Conn, repl *predial) (pglogrepl.LSN, error) {
	if err := migrations.CheckServerVersion(hard, sql); err != nil {
		return 0, err
	}
	if err := pgsource.CheckWALLevel(hard, sql); err != nil {
		return 0, err
	}
	src, err := pgsource.Identify(hard, sql, r.cfg.Slot)
	if err != nil {
		return 0, err
	}
	rctx, cancelResolve := context.WithCancel(hard)
	defer cancelResolve()
	resolved := async(func() (catalog.Identity, error) { return catalog.ResolveAppID(rctx, r.store, src.Source, r.cfg.AppID) })
	if err := r.checkPublication(hard, sql); err != nil {
		cancelResolve() // a store that does not answer must not delay this error
		resolved.wait()
		return 0, err
	}
	id, err := resolved.wait()
	if err != nil {
		return 0, err
	}
	writable := async(func() (struct{}, error) { return struct{}{}, r.checkWritable(hard, id.AppID) })
	slot, err := pgsource.ReadSlot(hard, sql, r.cfg.Slot)
	if _, werr := writable.wait(); werr != nil {
		return 0, werr
	}
	if err != nil {
		return 0, err
	}
	if slot.ActivePID != nil {
		if slot, id, src, err = r.waitSlotFree(ctx, hard, sql, repl, id, src); err != nil {
			return 0, err
		}
	}
	r.bind(hard, id)
	marked := id.Marker != nil
	switch {
	case marked && id.Marker.RecoveringSince != nil:
		return 0, usererr.New(nil, "a `relay bootstrap --recover` begun at %s did not finish, so the replication slot is not safe to stream from; run `relay bootstrap --recover` again",
			id.Marker.RecoveringSince.Format(time.RFC3339))
	case !slot.Exists && marked:
		return 0, usererr.New(nil, "replication slot %q does not exist but store %s already holds this relay's events: the slot was dropped or lost (a failover to a standby that did not have it?), so events may be missing; run `relay bootstrap --recover` to re-read the outbox into the topics and resume", r.cfg.Slot, r.store)
	case !marked:
		// No slot: a first start. A slot without a marker: a first start
		// that never finished (its exported snapshot died with it): redo.
		repl.discard()
		return r.firstStart(ctx)
	}
	if err := slot.CheckUsable(sql.Config().Database); err != nil {
		return 0, err
	}
	if err := r.followTimeline(hard, src, slot); err != nil {
		return 0, err
	}
	r.setFailover = nil
	if want := !r.cfg.NoFailoverSlot; slot.Failover != nil && *slot.Failover != want {
		r.setFailover = &want // PostgreSQL 17 and later: START_REPLICATION's connection alters it first
	}
	return slot.ConfirmedLSN, nil
}

// followTimeline makes the session's positions the source's: when the
// marker names another timeline than the server's (a promotion or a
// point-in-time recovery happened since the relay last streamed), the
// FollowTimeline hook first records the fork and any new epoch. The WAL
// end read with the free slot is the one every topic's position is
// checked against when the session opens it (topics.get): no relay that
// held the slot before received a transaction past it.
func (r *Relay) followTimeline(ctx context.Context, src pgsource.Identity, slot pgsource.Slot) error {
	m := *r.id.Marker
	if m.Timeline != src.Timeline && src.Timeline != 0 && r.FollowTimeline != nil {
		var err error
		if m, err = r.FollowTimeline(ctx, r.id, src, slot.ConfirmedLSN); err != nil {
			return err
		}
		r.id.Marker = &m
	}
	pos, err := m.Positions()
	if err != nil {
		return usererr.New(err, "%s: the store's record of this source is damaged", err)
	}
	r.positions, r.walEnd = pos, slot.WALEnd
	r.metrics.forks(m.Timeline, r.id.AppID, nil)
	if m.Timeline > 1 || len(m.Epochs) > 0 {
		go r.reportForks(ctx, m.Timeline, r.id.AppID) // a source that failed over: its phantoms, off the start's path
	}
	return nil
}

// reportForks reads the store's fork records into the phantom metric.
func (r *Relay) reportForks(ctx context.Context, timeline uint32, appID string) {
	forks, err := catalog.ListForks(ctx, r.store)
	if err != nil {
		r.log.Warn("the source's fork records could not be read for deltabus_phantom_events", "err", err)
		return
	}
	r.metrics.forks(timeline, appID, forks)
}

// checkPublication checks the publication and its tables (migrations.Check
// without its wal_level query: preflight has just made it).
func (r *Relay) checkPublication(ctx context.Context, sql *pgx.Conn) error {
	err := migrations.CheckPublication(ctx, sql, migrations.Options{Publication: r.cfg.Publication, Mappings: r.mappings})
	if err == nil || pgsource.ConnectionLost(err) || errors.Is(err, context.Canceled) {
		return err // the server went away mid-check: a new session retries
	}
	return usererr.New(err, "%s", err)
}

// checkWritable proves the store takes the relay's writes, conditional
// ones included (catalog.CheckWritable), as a one-line error.
func (r *Relay) checkWritable(ctx context.Context, appID string) error {
	err := catalog.CheckWritable(ctx, r.store, appID)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, catalog.ErrNoConditionalWrites):
		return usererr.New(err, "store %s: %s: use an S3 server that supports conditional writes (AWS S3, versitygw, MinIO 2024 or later)", r.store, catalog.ErrNoConditionalWrites)
	}
	return usererr.Retry(err, "store %s is not writable: %s; check DELTABUS_STORE, its permissions (the relay's user must own a local store's folder) and credentials", r.store, pgsource.RootCause(err))
}

// waitSlotFree waits while another process holds the slot (a standby;
// without --standby it fails at once, naming the holder) and then reads
// the source's identity again: the holder may have moved on meanwhile, and
// the server may have been promoted onto another timeline.
func (r *Relay) waitSlotFree(ctx, hard context.Context, sql *pgx.Conn, repl *predial, id catalog.Identity,
	src pgsource.Identity) (pgsource.Slot, catalog.Identity, pgsource.Identity, error) {
	waiting, waited := r.standbyWaiting(), false
	slot, err := pgsource.WaitSlotFree(ctx, sql, r.cfg.Slot, r.cfg.Standby, 2*time.Second, func(s pgsource.Slot) {
		repl.discard() // a standby may wait for hours: it holds no walsender meanwhile
		waited = true
		waiting(s)
	})
	if err != nil || !waited {
		return slot, id, src, err
	}
	src, id, err = r.identify(hard, sql)
	return slot, id, src, err
}

// standbyWaiting logs, at most once a minute, who holds the slot.
func (r *Relay) standbyWaiting() func(pgsource.Slot) {
	var said time.Time
	return func(s pgsource.Slot) {
		if time.Since(said) < time.Minute {
			return
		}
		said = time.Now()
		r.log.Info("standby: the slot is held by another process; waiting to take over", "slot", s.Name, "holder", s.HolderText())
	}
}

// identify reads which source the DSN leads to and which appId its
// progress is kept under in the store (catalog.ResolveAppID).
func (r *Relay) identify(ctx context.Context, sql *pgx.Conn) (pgsource.Identity, catalog.Identity, error) {
	src, err := pgsource.Identify(ctx, sql, r.cfg.Slot)
	if err != nil {
		return src, catalog.Identity{}, err
	}
	id, err := catalog.ResolveAppID(ctx, r.store, src.Source, r.cfg.AppID)
	return src, id, err
}

func (r *Relay) firstStart(ctx context.Context) (pglogrepl.LSN, error) {
	if r.FirstStart == nil {
		return 0, errors.New("first start needs a bootstrap (Relay.FirstStart)")
	}
	r.log.Info("first start: creating replication slot and copying existing outbox rows", "slot", r.cfg.Slot, "source", r.id.Source.String(), "app_id", r.id.AppID)
	lsn, err := r.FirstStart(ctx, r.id) // SIGTERM may stop a bootstrap: it is safe to redo
	if err != nil {
		return 0, fmt.Errorf("first start: %w", err)
	}
	m, ok, err := catalog.ReadMarker(ctx, r.store, r.id.AppID)
	if err != nil || !ok {
		return 0, fmt.Errorf("first start: the marker it wrote cannot be read: %w", err)
	}
	r.id.Marker = &m
	if r.positions, err = m.Positions(); err != nil {
		return 0, fmt.Errorf("first start: %w", err)
	}
	r.walEnd = lsn // every position the snapshot committed is below its consistent point
	return lsn, nil
}

func (r *Relay) startReplication(ctx context.Context, repl *predial, start pglogrepl.LSN) (replicationConn, error) {
	conn, err := repl.take(ctx)
	if err != nil {
		return nil, err
	}
	r.alterFailover(ctx, conn)
	err = pglogrepl.StartReplication(ctx, conn, r.cfg.Slot, start, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", fmt.Sprintf("publication_names '%s'", r.cfg.Publication), "messages 'true'"},
	})
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55006" {
			return nil, usererr.Retry(pgsource.ErrSlotBusy, "replication slot %q is in use by another process: stop the other relay, or start this one with --standby to wait and take over", r.cfg.Slot)
		}
		return nil, fmt.Errorf("start replication on slot %q: %w", r.cfg.Slot, err)
	}
	return &pgReplication{PgConn: conn}, nil
}

// alterFailover makes the slot a failover slot, or a local one, as
// Config.NoFailoverSlot asks, when preflight found it otherwise. A failure
// is logged, not fatal: the relay streams as before, and relay doctor
// reports the slot.
func (r *Relay) alterFailover(ctx context.Context, conn *pgconn.PgConn) {
	if r.setFailover == nil {
		return
	}
	want := *r.setFailover
	r.setFailover = nil
	_, err := conn.Exec(ctx, fmt.Sprintf("ALTER_REPLICATION_SLOT %s (FAILOVER %t)", r.cfg.Slot, want)).ReadAll()
	if err != nil {
		r.log.Warn("the replication slot's failover setting could not be changed; streaming without", "slot", r.cfg.Slot, "failover", want, "err", err)
		return
	}
	r.log.Info("replication slot's failover setting changed", "slot", r.cfg.Slot, "failover", want)
}
