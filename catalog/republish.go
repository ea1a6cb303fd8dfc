package catalog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// republishSuffix ends the txn appId of events published outside the
// stream: "/_" + a word no topic name can be ("_" never starts one), so
// it is never a topic of a group table's appId/topic.
const republishSuffix = "/_republish"

// RepublishAppID is the appId under which events of source appID are
// published into a topic outside its relay's stream (package republish:
// dead letters redriven, gaps repaired). Its txn in a topic's table (or,
// in a group's, RepublishAppID/topic: Placement.TxnAppID) counts those
// commits: it is never a position, never compared with the relay's, and
// a table that holds it holds events of appID.
func RepublishAppID(appID string) string { return appID + republishSuffix }

// IsRepublishTxn reports whether a txn appId of a table is a republish
// counter (RepublishAppID), not a relay's position.
func IsRepublishTxn(txnAppID string) bool { return strings.Contains(txnAppID, republishSuffix) }

// RepublishRun is the record of one run that published events into their
// topics outside the stream: a dead-letter redrive or a reconcile repair.
// Its events, one row each with what became of them, are in the
// _republished table (package republish); the record is the summary that
// the operator's page, /api/status and `relay deadletter` show.
type RepublishRun struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"`  // "redrive" or "repair"
	Actor string `json:"actor"` // who ran it: --actor, else the OS user
	Host  string `json:"host,omitempty"`
	// Selection is what the run was asked for, as the operator wrote it
	// (the filters of a redrive, the range of a repair).
	Selection string    `json:"selection"`
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished,omitzero"`
	// State is "running" until the run ends ("done" or "failed"); a run
	// that stays "running" died: its commits stand, and a new run finds
	// their events present.
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// Events counts the events the run considered; Republished the ones it
	// committed, Present those their topics already held, Refused those
	// that still fail (each with its reason in _republished).
	Events      int             `json:"events"`
	Republished int             `json:"republished"`
	Present     int             `json:"present"`
	Refused     int             `json:"refused"`
	Topics      []RepublishedTo `json:"topics,omitempty"`
	// Reasons counts the refusals by reason (the first 20 reasons).
	Reasons map[string]int `json:"reasons,omitempty"`
}

// RepublishedTo is one topic of a run: its table's versions that hold the
// events the run committed there.
type RepublishedTo struct {
	Topic       string  `json:"topic"`
	Table       string  `json:"table"`
	Republished int     `json:"republished"`
	Present     int     `json:"present"`
	Refused     int     `json:"refused"`
	Versions    []int64 `json:"versions,omitempty"`
}

// NewRunID returns a run id that sorts by time: 16 hex digits of the UTC
// nanoseconds, then 16 random ones.
func NewRunID(now time.Time) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%016x", uint64(now.UnixNano())) + hex.EncodeToString(b[:])
}

// WriteRepublishRun stores (or replaces) a run's record.
func WriteRepublishRun(ctx context.Context, store storage.Store, r RepublishRun) error {
	if err := writeJSON(ctx, store, r, KindRepublish, r.ID); err != nil {
		return fmt.Errorf("write the record of run %s: %w", r.ID, err)
	}
	return nil
}

// ReadRepublishRun returns a run's record, ok=false if none.
func ReadRepublishRun(ctx context.Context, store storage.Store, id string) (RepublishRun, bool, error) {
	var r RepublishRun
	ok, err := readJSON(ctx, store, &r, KindRepublish, id)
	return r, ok, err
}

// ListRepublishRuns returns the newest n run records (all when n <= 0),
// newest first: their ids sort by time, so only n objects are read.
func ListRepublishRuns(ctx context.Context, store storage.Store, n int) ([]RepublishRun, error) {
	objs, err := store.List(ctx, Prefix+"republish/", "")
	if err != nil {
		return nil, fmt.Errorf("list republish runs in %s: %w", store, err)
	}
	var ids []string
	for _, o := range objs {
		if kind, names, ok := Parse(o.Key); ok && kind == KindRepublish {
			ids = append(ids, names[0])
		}
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	if n > 0 && len(ids) > n {
		ids = ids[:n]
	}
	out := make([]RepublishRun, 0, len(ids))
	for _, id := range ids {
		r, ok, err := ReadRepublishRun(ctx, store, id)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}
