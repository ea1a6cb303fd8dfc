package bootstrap

import (
	"context"
	"fmt"

	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/storage"
)

// RecoverWarning is what an operator must know after a recovery.
const RecoverWarning = "events deleted from the outbox while the slot was missing or invalidated cannot be recovered; " +
	"`relay reconcile` shows them"

// Recover re-creates a missing or invalidated (wal_status = 'lost') slot:
// it drops the invalid slot, creates a new one with an exported snapshot,
// copies what the outbox still holds into the topics, skipping every event
// a topic already holds (by event_id), commits each topic once and rewrites
// the marker. The relay then streams from the new consistent point
// (`relay run`). A healthy slot of a bootstrapped relay is refused: there
// is nothing to recover, and dropping it would lose nothing but time.
func Recover(ctx context.Context, cfg Config, store storage.Store, opts Options) (Result, error) {
	cfg, slot, hasMarker, err := slotAndMarker(ctx, cfg, store, "recover")
	if err != nil {
		return Result{}, err
	}
	switch {
	case slot.Exists && slot.ActivePID != nil:
		return Result{}, fmt.Errorf("recover: replication slot %q is in use by process %d (a running relay?): stop it first", cfg.Slot, *slot.ActivePID)
	case slot.Exists && slot.WALStatus != "lost" && hasMarker:
		return Result{}, fmt.Errorf("recover: replication slot %q is healthy (wal_status=%s): nothing to recover; run `relay run`", cfg.Slot, slot.WALStatus)
	}
	log := opts.withDefaults().Log
	switch {
	case slot.Exists:
		log.Warn("recover: replication slot is invalidated; dropping it and re-reading the outbox", "slot", cfg.Slot, "wal_status", slot.WALStatus)
	case hasMarker:
		log.Warn("recover: replication slot is missing; re-reading the outbox", "slot", cfg.Slot)
	}
	return Snapshot(ctx, cfg, store, opts)
}

// First runs a first-start bootstrap ahead of `relay run`. A relay that is
// already bootstrapped (its slot and marker exist) is refused.
func First(ctx context.Context, cfg Config, store storage.Store, opts Options) (Result, error) {
	cfg, slot, hasMarker, err := slotAndMarker(ctx, cfg, store, "bootstrap")
	if err != nil {
		return Result{}, err
	}
	switch {
	case hasMarker && slot.Exists:
		return Result{}, fmt.Errorf("bootstrap: relay %s is already bootstrapped (slot %q and marker exist): run `relay run`", cfg.AppID, cfg.Slot)
	case hasMarker:
		return Result{}, fmt.Errorf("bootstrap: slot %q is missing but store %s holds this relay's events: run `relay bootstrap --recover`", cfg.Slot, store)
	}
	return Snapshot(ctx, cfg, store, opts)
}

// slotAndMarker identifies the source and reads its slot and whether the
// store holds its marker. A connection error or a refusal is returned as
// it is (one line for the operator); others are prefixed with what.
func slotAndMarker(ctx context.Context, cfg Config, store storage.Store, what string) (Config, pgsource.Slot, bool, error) {
	cfg = cfg.withDefaults()
	sql, err := pgsource.Connect(ctx, cfg.Source)
	if err != nil {
		return cfg, pgsource.Slot{}, false, err
	}
	defer sql.Close(context.WithoutCancel(ctx))
	cfg, id, err := identifyOn(ctx, sql, cfg, store)
	if err != nil {
		return cfg, pgsource.Slot{}, false, err
	}
	slot, err := pgsource.ReadSlot(ctx, sql, cfg.Slot)
	if err != nil {
		return cfg, slot, false, fmt.Errorf("%s: %w", what, err)
	}
	return cfg, slot, id.Marker != nil, nil
}
