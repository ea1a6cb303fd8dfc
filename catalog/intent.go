package catalog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// Intent is what `relay rebuild` writes to the store before it emits a
// watermark: the relay honours a watermark only if the intent it names
// exists, belongs to this relay and allows the watermark's op. Anyone who
// can connect to the database can emit a logical message; only who can
// write the store can write an intent.
type Intent struct {
	ID      string    `json:"id"`
	Topic   string    `json:"topic"`
	AppID   string    `json:"appId"`
	Kind    string    `json:"kind"` // IntentRebuild or IntentAbort
	Created time.Time `json:"created"`
}

// Intent kinds.
const (
	// IntentRebuild allows the rebuild's pause, its commit, and an abort of
	// its own pause.
	IntentRebuild = "rebuild"
	// IntentAbort allows an abort of whatever rebuild the topic waits for.
	IntentAbort = "abort"
)

// Allows reports whether the intent authorises a watermark.
func (in Intent) Allows(wm Watermark) bool {
	if in.ID != wm.ID || in.Topic != wm.Topic || in.AppID != wm.AppID {
		return false
	}
	switch in.Kind {
	case IntentRebuild:
		return wm.Op == WatermarkPause || wm.Op == WatermarkCommit || wm.Op == WatermarkAbort
	case IntentAbort:
		return wm.Op == WatermarkAbort
	}
	return false
}

// NewID returns a random 128-bit id in hex: rebuild and intent ids are not
// guessable, so a watermark cannot name an intent its author did not see.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// WriteIntent stores an intent; it must be durable before its watermark is
// emitted.
func WriteIntent(ctx context.Context, store storage.Store, in Intent) error {
	if in.Created.IsZero() {
		in.Created = time.Now().UTC()
	}
	if err := writeJSON(ctx, store, in, KindIntent, in.Topic, in.AppID, in.ID); err != nil {
		return fmt.Errorf("write rebuild intent: %w", err)
	}
	return nil
}

// ReadIntent returns relay appID's intent a watermark names, ok=false if
// none (or if the watermark's names are not valid catalog names).
func ReadIntent(ctx context.Context, store storage.Store, topic, appID, id string) (Intent, bool, error) {
	var in Intent
	if CheckName("topic", topic) != nil || CheckName("relay", appID) != nil || CheckID(id) != nil {
		return in, false, nil
	}
	ok, err := readJSON(ctx, store, &in, KindIntent, topic, appID, id)
	if err == nil && !ok && legacyLayout(appID) {
		ok, err = readLegacy(ctx, store, &in, topic+"/intents/"+id+".json", func() bool { return in.AppID == appID && in.Topic == topic })
	}
	return in, ok, err
}

// DeleteIntent removes an intent once its rebuild is resolved (and its
// copy in the legacy layout, if any).
func DeleteIntent(ctx context.Context, store storage.Store, topic, appID, id string) error {
	if legacyLayout(appID) && CheckName("topic", topic) == nil && CheckID(id) == nil {
		if err := store.Delete(ctx, Prefix+"rebuilds/"+topic+"/intents/"+id+".json"); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("delete legacy intent %s: %w", id, err)
		}
	}
	return deleteObject(ctx, store, KindIntent, topic, appID, id)
}
