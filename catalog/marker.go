package catalog

import (
	"context"
	"fmt"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// Marker is what a relay writes to its store once its first start (or a
// recovery) has committed the snapshot: a missing slot with a marker means
// the slot was lost, never a reason to start from "now"; a missing slot
// without one is a first start.
type Marker struct {
	AppID           string    `json:"appId"`
	Slot            string    `json:"slot"`
	Publication     string    `json:"publication"`
	SystemID        string    `json:"systemId"`
	Database        string    `json:"database"`
	ConsistentPoint string    `json:"consistentPoint"`
	CreatedAt       time.Time `json:"createdAt"`
}

// ReadMarker returns the relay's marker, ok=false when there is none.
func ReadMarker(ctx context.Context, store storage.Store, appID string) (Marker, bool, error) {
	var m Marker
	ok, err := readJSON(ctx, store, &m, KindMarker, appID)
	if err != nil {
		return m, false, fmt.Errorf("read relay marker: %w", err)
	}
	return m, ok, nil
}

// WriteMarker records that the relay's slot was created at its consistent
// point and the snapshot committed.
func WriteMarker(ctx context.Context, store storage.Store, m Marker) error {
	if err := writeJSON(ctx, store, m, KindMarker, m.AppID); err != nil {
		return fmt.Errorf("write relay marker: %w", err)
	}
	return nil
}

// AppID is the Delta txn appId (and marker name) of the relay on a slot:
// one per slot, stable across restarts.
func AppID(slot string) string { return "deltabus-" + slot }
