package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

// poll calls check every interval until it reports done, ctx ends or
// limit passes; every 10 s it logs waiting.
func poll(ctx context.Context, limit, interval time.Duration, check func() (bool, error), waiting func(time.Duration)) (bool, error) {
	start, said := time.Now(), time.Now()
	for {
		done, err := check()
		if done || err != nil {
			return done, err
		}
		if time.Since(start) > limit {
			return false, nil
		}
		if time.Since(said) >= 10*time.Second {
			said = time.Now()
			waiting(time.Since(start))
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(interval):
		}
	}
}

// waitPaused waits until the relay reports the topic paused for this
// rebuild: every event of the topic before the watermark is then durable
// and the table stays as it is until the commit watermark.
func waitPaused(ctx context.Context, store storage.Store, wm catalog.Watermark, at pglogrepl.LSN, limit time.Duration, log *slog.Logger) error {
	ok, err := poll(ctx, limit, 100*time.Millisecond, func() (bool, error) {
		st, _, err := catalog.ReadRebuildState(ctx, store, wm.AppID, wm.Topic)
		if err != nil {
			return false, err
		}
		if st.Paused == wm.ID {
			return true, nil
		}
		if done, _ := pglogrepl.ParseLSN(st.ResolvedThrough); st.ResolvedThrough != "" && done >= at {
			return false, fmt.Errorf("rebuild: the relay resolved the pause at %s before it took effect (%s): another rebuild or an abort of topic %q ran at the same time", at, st.Last, wm.Topic)
		}
		return false, nil
	}, func(d time.Duration) {
		log.Info("rebuild: still waiting for the relay to reach the pause watermark; is `relay run` streaming from this slot?", "waited", d.Round(time.Second), "watermark", at)
	})
	if err != nil {
		return err
	}
	if !ok {
		return usererr.New(nil, "rebuild: the relay did not reach the pause watermark %s within %s: start `relay run` (or wait for it to catch up) and run the rebuild again", at, limit)
	}
	return nil
}

// waitOlderTransactions waits until every transaction in progress now has
// ended. A transaction whose commit record precedes the pause watermark may
// still be in progress for a moment after it; once it ended, a new
// snapshot sees it.
func waitOlderTransactions(ctx context.Context, sql *pgx.Conn, log *slog.Logger) error {
	var snap string
	if err := sql.QueryRow(ctx, "SELECT pg_current_snapshot()::text").Scan(&snap); err != nil {
		return fmt.Errorf("rebuild: read the current snapshot: %w", err)
	}
	_, err := poll(ctx, 24*time.Hour, 20*time.Millisecond, func() (bool, error) {
		var running int
		err := sql.QueryRow(ctx, `SELECT count(*) FROM pg_snapshot_xip($1::pg_snapshot) x
			WHERE pg_xact_status(x) = 'in progress'`, snap).Scan(&running)
		return running == 0, err
	}, func(d time.Duration) {
		log.Info("rebuild: waiting for transactions that began before the pause watermark to end", "waited", d.Round(time.Second), "snapshot", snap)
	})
	if err != nil {
		return fmt.Errorf("rebuild: wait for older transactions: %w", err)
	}
	return nil
}

// waitCommitted waits until the topic's table records the rebuild's txn
// version for the topic (txn appId/topic in a group's table); false when
// limit passed first (the relay commits it when its stream reaches the
// commit watermark).
func waitCommitted(ctx context.Context, store storage.Store, p catalog.Placement, appID string, version int64, limit time.Duration) (bool, error) {
	return poll(ctx, limit, 100*time.Millisecond, func() (bool, error) {
		snap, err := delta.LoadSnapshot(ctx, storage.Sub(store, p.Table), -1)
		if errors.Is(err, delta.ErrNoTable) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("rebuild: read %s: %w", tableName(p.Table), err)
		}
		txn, ok := snap.Txns[p.TxnAppID(appID)]
		return ok && txn.Version >= version, nil
	}, func(time.Duration) {})
}

// heldInGroup lists the topics, other than p's, registered in p's group
// table with another table id than its current one (or whose table is
// gone): their events were in a table that was lost, and the relay holds
// each (Missing) until it is rebuilt or aborted.
func heldInGroup(ctx context.Context, store storage.Store, p catalog.Placement) ([]string, error) {
	id := ""
	snap, err := delta.LoadSnapshot(ctx, storage.Sub(store, p.Table), -1)
	switch {
	case err == nil:
		id = snap.Metadata.ID
	case !errors.Is(err, delta.ErrNoTable):
		return nil, fmt.Errorf("rebuild: read %s: %w", tableName(p.Table), err)
	}
	names, err := catalog.ListTopics(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	var held []string
	for _, name := range names {
		if name == p.Topic {
			continue
		}
		q, err := catalog.ReadPlacement(ctx, store, name, nil)
		if err != nil {
			return nil, fmt.Errorf("rebuild: %w", err)
		}
		if q.Registered && q.Table == p.Table && (id == "" || q.Replaced(id)) {
			held = append(held, name)
		}
	}
	return held, nil
}
