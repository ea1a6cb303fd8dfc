package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/storage"
)

// RecoverWarning is what an operator must know after a recovery.
const RecoverWarning = "events deleted from the outbox while the slot was missing or invalidated cannot be recovered; " +
	"`relay reconcile` shows them"

// Recover re-creates a missing or invalidated (wal_status = 'lost') slot,
// or one the relay cannot stream from since a failover (created on the new
// timeline after the promotion): it records the recovery in the marker
// (RecoveringSince: until it finishes, no relay streams from the slot it
// makes), follows the source onto its current timeline (FollowTimeline:
// phantoms recorded, positions lifted above them), drops the old slot,
// creates a new one with an exported snapshot, copies what the outbox
// still holds into the topics, skipping every event a topic already holds
// (by event_id), commits each topic once and rewrites the marker. The
// relay then streams from the new consistent point (`relay run`). A slot
// the relay can stream from is refused: there is nothing to recover, and
// dropping it would lose nothing but time.
func Recover(ctx context.Context, cfg Config, store storage.Store, opts Options) (Result, error) {
	cfg, st, err := slotAndMarker(ctx, cfg, store, "recover")
	if err != nil {
		return Result{}, err
	}
	slot, m := st.slot, st.id.Marker
	if slot.Exists && slot.ActivePID != nil {
		return Result{}, fmt.Errorf("recover: replication slot %q is in use by process %d (a running relay?): stop it first", cfg.Slot, *slot.ActivePID)
	}
	log := opts.withDefaults().Log
	if m != nil {
		if err := beginRecovery(ctx, cfg, store, st, opts); err != nil {
			return Result{}, err
		}
	}
	switch {
	case slot.Exists && slot.WALStatus == "lost":
		log.Warn("recover: replication slot is invalidated; dropping it and re-reading the outbox", "slot", cfg.Slot, "wal_status", slot.WALStatus)
	case slot.Exists:
		log.Warn("recover: the replication slot cannot be streamed from; dropping it and re-reading the outbox", "slot", cfg.Slot)
	case m != nil:
		log.Warn("recover: replication slot is missing; re-reading the outbox", "slot", cfg.Slot)
	}
	return Snapshot(ctx, cfg, store, opts)
}

// beginRecovery refuses a slot the relay can stream from, then marks the
// recovery in the marker and follows the source's timeline.
func beginRecovery(ctx context.Context, cfg Config, store storage.Store, st slotState, opts Options) error {
	m := *st.id.Marker
	if st.slot.Exists && st.slot.WALStatus != "lost" && m.RecoveringSince == nil {
		followed, err := FollowTimeline(ctx, cfg, store, st.id, st.src, &st.slot.ConfirmedLSN, opts)
		if err != nil && !errors.Is(err, ErrSlotAfterFork) {
			return err
		}
		if err == nil {
			past, err := pastWALEnd(ctx, store, st.id.AppID, followed, st.slot.WALEnd)
			if err != nil {
				return fmt.Errorf("recover: %w", err)
			}
			if !past {
				return fmt.Errorf("recover: replication slot %q is healthy (wal_status=%s): nothing to recover; run `relay run`", cfg.Slot, st.slot.WALStatus)
			}
			// The topics hold positions past the source's WAL: a
			// database restored in place (its slot with it). The relay
			// refuses to stream; the recovery re-reads the outbox.
			m = followed
		}
	}
	now := time.Now().UTC()
	m.RecoveringSince = &now
	if err := catalog.WriteMarker(ctx, store, m); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	id := st.id
	id.Marker = &m
	_, err := FollowTimeline(ctx, cfg, store, id, st.src, nil, opts)
	return err
}

// First runs a first-start bootstrap ahead of `relay run`. A relay that is
// already bootstrapped (its slot and marker exist) is refused.
func First(ctx context.Context, cfg Config, store storage.Store, opts Options) (Result, error) {
	cfg, st, err := slotAndMarker(ctx, cfg, store, "bootstrap")
	if err != nil {
		return Result{}, err
	}
	switch m := st.id.Marker; {
	case m != nil && m.RecoveringSince != nil:
		return Result{}, fmt.Errorf("bootstrap: a `relay bootstrap --recover` begun at %s did not finish: run it again", m.RecoveringSince.Format(time.RFC3339))
	case m != nil && st.slot.Exists:
		return Result{}, fmt.Errorf("bootstrap: relay %s is already bootstrapped (slot %q and marker exist): run `relay run`", cfg.AppID, cfg.Slot)
	case m != nil:
		return Result{}, fmt.Errorf("bootstrap: slot %q is missing but store %s holds this relay's events: run `relay bootstrap --recover`", cfg.Slot, store)
	}
	return Snapshot(ctx, cfg, store, opts)
}

// slotState is what a command finds of its source: its identity in the
// store, what its server says of itself and its slot.
type slotState struct {
	id   catalog.Identity
	src  pgsource.Identity
	slot pgsource.Slot
}

// slotAndMarker identifies the source and reads its slot and its marker.
// A connection error or a refusal is returned as it is (one line for the
// operator); others are prefixed with what.
func slotAndMarker(ctx context.Context, cfg Config, store storage.Store, what string) (Config, slotState, error) {
	cfg = cfg.withDefaults()
	sql, err := pgsource.Connect(ctx, cfg.Source)
	if err != nil {
		return cfg, slotState{}, err
	}
	defer sql.Close(context.WithoutCancel(ctx))
	var st slotState
	if cfg, st.id, st.src, err = identifyOn(ctx, sql, cfg, store); err != nil {
		return cfg, st, err
	}
	if st.slot, err = pgsource.ReadSlot(ctx, sql, cfg.Slot); err != nil {
		return cfg, st, fmt.Errorf("%s: %w", what, err)
	}
	return cfg, st, nil
}

// pastWALEnd reports whether a table holds a position of the source past
// the source's WAL end (mapped by the marker's epochs): its LSNs went back
// without a timeline to say so, and streaming would skip its new
// transactions (the relay refuses to, naming the recovery).
func pastWALEnd(ctx context.Context, store storage.Store, appID string, m catalog.Marker, walEnd pglogrepl.LSN) (bool, error) {
	pos, err := m.Positions()
	if err != nil {
		return false, err
	}
	scan, err := scanSince(ctx, store, appID, pglogrepl.LSN(math.MaxInt64), nil)
	if err != nil {
		return false, err
	}
	return pos.Through(scan.highest) > int64(walEnd), nil
}
