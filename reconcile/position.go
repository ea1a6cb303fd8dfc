package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/deltabus/deltabus/catalog"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/storage"
)

// ErrNoSlot is returned when the relay's slot does not exist.
var ErrNoSlot = errors.New("replication slot does not exist")

// confirmedLSN reads the slot's confirmed_flush_lsn (the relay's durable
// position, the same column relay.ReadSlot reports).
func confirmedLSN(ctx context.Context, conn *pgx.Conn, slot string) (pglogrepl.LSN, error) {
	var s *string
	err := conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("slot %q: %w", slot, ErrNoSlot)
	}
	if err != nil {
		return 0, fmt.Errorf("read slot %q: %w", slot, err)
	}
	if s == nil {
		return 0, nil
	}
	lsn, err := pglogrepl.ParseLSN(*s)
	if err != nil {
		return 0, fmt.Errorf("slot %q confirmed_flush_lsn %q: %w", slot, *s, err)
	}
	return lsn, nil
}

// flushWAL makes the WAL up to the current insert position durable, so
// that a sampled insert position becomes reachable by the walsender on an
// idle server: a transaction that takes an xid and commits synchronously
// flushes WAL up to its commit record, past every earlier record.
func flushWAL(ctx context.Context, conn *pgx.Conn) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = on`); err != nil {
			return fmt.Errorf("flush WAL: %w", err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
			return fmt.Errorf("flush WAL: %w", err)
		}
		return nil
	})
}

// waitDurable polls the slot until its confirmed position reaches target or
// wait elapses. It returns the last position read and whether it reached.
func waitDurable(ctx context.Context, conn *pgx.Conn, slot string, target pglogrepl.LSN, wait time.Duration) (pglogrepl.LSN, bool, error) {
	deadline := time.Now().Add(wait)
	if err := flushWAL(ctx, conn); err != nil {
		return 0, false, err
	}
	pause := 10 * time.Millisecond // short first: a live relay confirms within its status interval
	for {
		lsn, err := confirmedLSN(ctx, conn, slot)
		if err != nil {
			return 0, false, err
		}
		if lsn >= target {
			return lsn, true, nil
		}
		if time.Now().After(deadline) {
			return lsn, false, nil
		}
		select {
		case <-ctx.Done():
			return lsn, false, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
}

// registeredTopics lists the topics the relay registered in the store.
func registeredTopics(ctx context.Context, root storage.Store) ([]string, error) {
	return catalog.ListTopics(ctx, root)
}
