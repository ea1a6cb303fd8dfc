package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/storage"
)

// Marker is the small object a relay writes to its store when it creates
// its slot: `_deltabus/relays/<appId>.json`. A missing slot with a marker
// means the slot was lost (never a reason to start from "now"); a missing
// slot without one is a first start.
type Marker struct {
	AppID           string    `json:"appId"`
	Slot            string    `json:"slot"`
	Publication     string    `json:"publication"`
	SystemID        string    `json:"systemId"`
	Database        string    `json:"database"`
	ConsistentPoint string    `json:"consistentPoint"`
	CreatedAt       time.Time `json:"createdAt"`
}

// MarkerKey is where a relay's marker lives in the store.
func MarkerKey(appID string) string { return registryPrefix + "relays/" + appID + ".json" }

// ReadMarker returns the relay's marker, or ok=false if there is none.
func ReadMarker(ctx context.Context, store storage.Store, appID string) (Marker, bool, error) {
	var m Marker
	b, err := store.Get(ctx, MarkerKey(appID))
	if errors.Is(err, storage.ErrNotFound) {
		return m, false, nil
	}
	if err != nil {
		return m, false, fmt.Errorf("read relay marker: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, false, fmt.Errorf("relay marker %s is corrupt: %w", MarkerKey(appID), err)
	}
	return m, true, nil
}

// WriteMarker records that the relay's slot was created at consistentPoint.
func WriteMarker(ctx context.Context, store storage.Store, m Marker) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := store.Put(ctx, MarkerKey(m.AppID), append(b, '\n')); err != nil {
		return fmt.Errorf("write relay marker: %w", err)
	}
	return nil
}

// firstStart handles a missing slot. With a marker in the store the slot was
// lost: refuse and name the recovery. Otherwise create the slot with an
// exported snapshot, copy the outbox rows that snapshot sees (bootstrap) and
// stream from the slot's consistent point.
func (r *Relay) firstStart(ctx context.Context, sql *pgx.Conn) (pglogrepl.LSN, error) {
	_, found, err := ReadMarker(ctx, r.store, r.cfg.AppID)
	if err != nil {
		return 0, err
	}
	if found {
		return 0, userErr(nil, "replication slot %q does not exist but store %s already holds this relay's events: the slot was dropped or lost, so events may be missing; run `relay bootstrap --recover` to re-read the outbox into the topics and resume", r.cfg.Slot, r.store)
	}
	if r.Bootstrap == nil {
		return 0, errors.New("first start needs a bootstrap function")
	}
	r.log.Info("first start: creating replication slot and copying existing outbox rows", "slot", r.cfg.Slot)
	lsn, err := r.Bootstrap(ctx, r.cfg, r.store)
	if err != nil {
		return 0, fmt.Errorf("first start: %w", err)
	}
	return lsn, nil
}
