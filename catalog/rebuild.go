package catalog

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// RebuildRecord is what `relay rebuild` hands the relay to commit: the
// snapshot's files and its seam (see the package doc).
type RebuildRecord struct {
	ID    string `json:"id"`
	Topic string `json:"topic"`
	AppID string `json:"appId"`
	// TxnVersion (R) is the txn version of the snapshot commit: the
	// topic's transactions at or below it are in the table afterwards.
	TxnVersion int64 `json:"txnVersion"`
	// SeamEnd (Q): transactions with commit LSN in (TxnVersion, SeamEnd)
	// whose xid Snapshot sees are in the snapshot; none at or after it is.
	SeamEnd  string      `json:"seamEnd"`
	Snapshot string      `json:"snapshot"` // pg_current_snapshot() text: xmin:xmax:xip,...
	Adds     []delta.Add `json:"adds"`
	Rows     int64       `json:"rows"`    // rows of the topic the snapshot saw
	Added    int64       `json:"added"`   // events in Adds
	Present  int64       `json:"present"` // events the table already held
	Created  time.Time   `json:"created"`
}

// RebuildState is one relay's side of a topic's rebuilds and holds: each
// source holds, rebuilds and resolves a shared topic on its own.
type RebuildState struct {
	Topic string `json:"topic"`
	AppID string `json:"appId,omitempty"` // the relay whose state it is (empty in the legacy layout)
	// Paused is why the topic is held ("" = not held): a rebuild id, or one
	// of the Hold* reasons; PausedAt is the LSN the slot is held at.
	Paused   string `json:"paused,omitempty"`
	PausedAt string `json:"pausedAt,omitempty"`
	// ResolvedThrough: pause watermarks at or below this LSN are done
	// (committed or aborted) and ignored when the stream is read again.
	ResolvedThrough string `json:"resolvedThrough,omitempty"`
	// LastResolved is the id of the last rebuild resolved; its intent is
	// never honoured again.
	LastResolved string    `json:"lastResolved,omitempty"`
	Last         string    `json:"last,omitempty"` // what happened last, for operators
	Updated      time.Time `json:"updated"`
}

// Reasons a topic is held without a rebuild (RebuildState.Paused).
const (
	// HoldMissingTable: the registry lists the topic, its table is gone.
	HoldMissingTable = "missing-table"
	// HoldIncompatibleTable: another writer changed the topic's table in a
	// way the relay cannot append to (schema, protocol).
	HoldIncompatibleTable = "incompatible-table"
	// HoldContract: an event broke its contract (package contract) and the
	// topic's policy is to hold rather than dead-letter it; Last says why.
	// The hold lifts once the registry admits the event or the policy
	// changes.
	HoldContract = "contract-violation"
	// HoldDeadLetterRate: the topic's circuit breaker tripped (more of
	// its rows were refused in a window than the relay's --breaker-rate
	// allows), so the relay holds it, and _dead_letter with it, instead of
	// filling the dead-letter table; Last says the rate and the last
	// reason. Restored by every session, it lifts only when the operator
	// releases it (Release, `relay deadletter release`).
	HoldDeadLetterRate = "dead-letter-rate"
)

// PausedAtLSN and ResolvedLSN parse the state's positions ("" is 0).
func (s RebuildState) PausedAtLSN() pglogrepl.LSN { return parseLSN(s.PausedAt) }
func (s RebuildState) ResolvedLSN() pglogrepl.LSN { return parseLSN(s.ResolvedThrough) }

func parseLSN(s string) pglogrepl.LSN {
	l, _ := pglogrepl.ParseLSN(s)
	return l
}

// ReadRebuildRecord returns the topic's rebuild record of relay appID,
// ok=false if none.
func ReadRebuildRecord(ctx context.Context, store storage.Store, appID, topic string) (RebuildRecord, bool, error) {
	var r RebuildRecord
	ok, err := readJSON(ctx, store, &r, KindRebuildRecord, topic, appID)
	if err == nil && !ok && legacyLayout(appID) {
		ours := func() bool { return r.Topic == topic && (r.AppID == appID || r.AppID == "") }
		if ok, err = readLegacy(ctx, store, &r, topic+"/record.json", ours); !ok && err == nil {
			ok, err = readLegacy(ctx, store, &r, topic+".json", ours)
		}
	}
	return r, ok, err
}

// WriteRebuildRecord stores the rebuild's record (the last one wins).
func WriteRebuildRecord(ctx context.Context, store storage.Store, r RebuildRecord) error {
	return writeJSON(ctx, store, r, KindRebuildRecord, r.Topic, r.AppID)
}

// ReadRebuildState returns relay appID's rebuild state of a topic (the
// zero state, ok=false, if none).
func ReadRebuildState(ctx context.Context, store storage.Store, appID, topic string) (RebuildState, bool, error) {
	var s RebuildState
	ok, err := readJSON(ctx, store, &s, KindRebuildState, topic, appID)
	if err == nil && !ok && legacyLayout(appID) {
		ours := func() bool { return s.Topic == topic }
		if ok, err = readLegacy(ctx, store, &s, topic+"/state.json", ours); !ok && err == nil {
			ok, err = readLegacy(ctx, store, &s, topic+".relay.json", ours)
		}
	}
	if !ok {
		s = RebuildState{Topic: topic}
	}
	s.AppID = appID
	return s, ok, err
}

// WriteRebuildState replaces the relay's rebuild state of a topic.
func WriteRebuildState(ctx context.Context, store storage.Store, s RebuildState) error {
	s.Updated = time.Now().UTC()
	return writeJSON(ctx, store, s, KindRebuildState, s.Topic, s.AppID)
}

// ListRebuildStates returns every relay's rebuild state of a topic (those
// of the legacy layout with an empty AppID).
func ListRebuildStates(ctx context.Context, store storage.Store, topic string) ([]RebuildState, error) {
	if err := CheckName("topic", topic); err != nil {
		return nil, err
	}
	objs, err := store.List(ctx, Prefix+"rebuilds/"+topic+"/", "")
	if err != nil {
		return nil, fmt.Errorf("list the rebuild states of topic %q: %w", topic, err)
	}
	var out []RebuildState
	for _, o := range objs {
		k := o.Key
		kind, names, ok := Parse(k)
		legacy := k == Prefix+"rebuilds/"+topic+"/state.json"
		if !legacy && (!ok || kind != KindRebuildState || names[0] != topic) {
			continue
		}
		var s RebuildState
		if found, err := readKey(ctx, store, k, &s); err != nil || !found || s.Topic != topic {
			continue // gone meanwhile, or not a state of this topic
		}
		if !legacy {
			s.AppID = names[1]
		}
		out = append(out, s)
	}
	return out, nil
}

// LegacyLayout reports whether relay appID may have objects at the
// per-topic keys of the releases before source identity, and rows without
// a source column value: only appIds that are not of the per-source form,
// since those releases wrote no other.
func LegacyLayout(appID string) bool { return legacyLayout(appID) }

func legacyLayout(appID string) bool {
	_, _, perSource := SourceOfAppID(appID)
	return !perSource
}

// readLegacy reads an object of an older store layout at
// rebuilds/<name>: rebuilds/<topic>/record.json and .../state.json before
// source identity, and before those rebuilds/<topic>.json and
// rebuilds/<topic>.relay.json (where topic "a.relay"'s record and topic
// "a"'s state shared a key). It is used only when the current key is
// absent, and only if ours says the object is the one asked for.
func readLegacy(ctx context.Context, store storage.Store, v any, name string, ours func() bool) (bool, error) {
	ok, err := readKey(ctx, store, Prefix+"rebuilds/"+name, v)
	if err != nil || !ok {
		return false, nil // a legacy object that does not parse is not ours to report
	}
	return ours(), nil
}

// StateTopics returns the topics relay appID has a rebuild state of, in
// key order: a topic held before its first commit (a contract hold) has a
// state but no table yet. Stray objects are left out.
func StateTopics(ctx context.Context, store storage.Store, appID string) ([]string, error) {
	objs, err := store.List(ctx, Prefix+"rebuilds/", "")
	if err != nil {
		return nil, fmt.Errorf("list rebuild states in %s: %w", store, err)
	}
	var out []string
	for _, o := range objs {
		if kind, names, ok := Parse(o.Key); ok && kind == KindRebuildState && names[1] == appID {
			out = append(out, names[0])
		}
	}
	return out, nil
}
