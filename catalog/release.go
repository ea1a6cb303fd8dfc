package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// Release is the operator's word that a topic held by its circuit breaker
// (HoldDeadLetterRate) may stream again: `relay deadletter release` writes
// it beside the relay's state of the topic, the relay, polling while it
// holds the topic, lifts the hold it names and deletes it. Only who can
// write the store can write one, as for rebuild intents.
type Release struct {
	Topic string `json:"topic"`
	AppID string `json:"appId"`
	// HeldAt is the hold it releases (RebuildState.PausedAt): a release
	// written for an earlier hold does not lift a later one.
	HeldAt string `json:"heldAt"`
	// DisarmFor keeps the breaker of the topic off for that long after the
	// release (Go duration text; "" = armed at once): the operator chose to
	// let such events go to _dead_letter meanwhile.
	DisarmFor string    `json:"disarmFor,omitempty"`
	Actor     string    `json:"actor"`
	Created   time.Time `json:"created"`
}

// Disarm returns how long the breaker stays off after the release.
func (r Release) Disarm() time.Duration {
	d, err := time.ParseDuration(r.DisarmFor)
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// WriteRelease stores a release of the topic for relay r.AppID.
func WriteRelease(ctx context.Context, store storage.Store, r Release) error {
	if r.Created.IsZero() {
		r.Created = time.Now().UTC()
	}
	if err := writeJSON(ctx, store, r, KindRelease, r.Topic, r.AppID); err != nil {
		return fmt.Errorf("write the release of topic %q: %w", r.Topic, err)
	}
	return nil
}

// ReadRelease returns relay appID's release of a topic, ok=false if none.
func ReadRelease(ctx context.Context, store storage.Store, appID, topic string) (Release, bool, error) {
	var r Release
	ok, err := readJSON(ctx, store, &r, KindRelease, topic, appID)
	if ok && (r.Topic != topic || r.AppID != appID) {
		return Release{}, false, nil // not what its key says: ignored
	}
	return r, ok, err
}

// DeleteRelease removes a release once the relay acted on it.
func DeleteRelease(ctx context.Context, store storage.Store, appID, topic string) error {
	err := deleteObject(ctx, store, KindRelease, topic, appID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	return err
}
