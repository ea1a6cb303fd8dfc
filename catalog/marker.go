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
	// Timeline is the PostgreSQL timeline the relay's progress is made on
	// (0 in a marker of an earlier release: not known). A relay that finds
	// the source on another timeline reads its history before it goes on
	// (package doc, "Timelines").
	Timeline uint32 `json:"timeline,omitempty"`
	// Epochs are where the source's positions began anew (Positions).
	Epochs []Epoch `json:"epochs,omitempty"`
	// RecoveringSince is set while `relay bootstrap --recover` runs: the
	// slot it creates is not the relay's to stream from until the recovery
	// has committed and cleared it.
	RecoveringSince *time.Time `json:"recoveringSince,omitempty"`
}

// Positions returns the map from the source's commit LSNs to its
// positions.
func (m Marker) Positions() (Positions, error) {
	p, err := NewPositions(m.Epochs)
	if err != nil {
		return p, fmt.Errorf("relay marker %s: %w", m.AppID, err)
	}
	return p, nil
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

// Source is the source the marker belongs to.
func (m Marker) Source() Source {
	return Source{SystemID: m.SystemID, Database: m.Database, Slot: m.Slot}
}

// ListMarkers returns the markers of every relay that completed a first
// start in the store, one per source, by appId.
func ListMarkers(ctx context.Context, store storage.Store) ([]Marker, error) {
	dir := Prefix + "relays/"
	objs, err := store.List(ctx, dir, "")
	if err != nil {
		return nil, fmt.Errorf("list relay markers in %s: %w", store, err)
	}
	var out []Marker
	for _, o := range objs {
		kind, names, ok := Parse(o.Key)
		if !ok || kind != KindMarker {
			continue
		}
		m, found, err := ReadMarker(ctx, store, names[0])
		if err != nil {
			return nil, err
		}
		if found {
			out = append(out, m)
		}
	}
	return out, nil
}
