package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// A topic rebuild re-snapshots one topic while the relay keeps streaming
// the others. `relay rebuild` (package bootstrap) and the running relay
// talk through watermarks in the replication stream, written with
// pg_logical_emit_message(true, WatermarkPrefix, <Watermark JSON>), and two
// objects in the store:
//
//   - `_deltabus/rebuilds/<topic>.json` (RebuildRecord), written by the
//     rebuild command: the snapshot's files and its seam;
//   - `_deltabus/rebuilds/<topic>.relay.json` (RebuildState), written by the
//     relay: whether the topic is paused, and which watermarks are done.
//
// The sequence, with M the LSN of the "pause" watermark:
//
//  1. rebuild emits pause. The relay, reaching it, makes every event of the
//     topic before it durable, then drops the topic's events and holds the
//     slot's acknowledged position at M (so they can be re-read), and
//     records RebuildState{Paused}.
//  2. rebuild waits for that, then for every transaction in progress after
//     the watermark to end, and opens a snapshot S: every transaction that
//     committed before M is visible in S. It copies the topic's rows S sees,
//     skipping events the table already holds, and writes RebuildRecord with
//     R = max(M, the table's txn version + 1) and Q, the WAL insert position
//     after S was taken (no transaction committing at or after Q is visible
//     in S).
//  3. rebuild emits commit. The relay commits the snapshot files in one
//     commit with txn version R, records the watermark as resolved, and
//     rewinds: it starts a new session from the held position. Every topic
//     skips what it holds; the rebuilt topic takes transactions after R,
//     except those with commit LSN in [R, Q) whose xid S sees (their rows
//     came with the snapshot). No event is lost or doubled at the seam.
//
// An "abort" watermark (a failed rebuild, or `relay rebuild --abort`)
// resolves every pause before it: the relay rewinds and streams the topic
// again from the pause. A pause never resolved holds the slot: the relay
// warns every minute, naming both ways out.

// WatermarkPrefix is the logical message prefix of rebuild watermarks.
const WatermarkPrefix = "deltabus.rebuild"

// Watermark ops.
const (
	WatermarkPause  = "pause"
	WatermarkCommit = "commit"
	WatermarkAbort  = "abort"
)

// Watermark is the content of a rebuild logical message.
type Watermark struct {
	Op    string `json:"op"`
	ID    string `json:"id"` // rebuild id; "" in an abort means any
	Topic string `json:"topic"`
	AppID string `json:"appId"`
}

// RebuildRecord is what a rebuild hands the relay to commit.
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

// RebuildState is the relay's side of a topic's rebuilds.
type RebuildState struct {
	Topic string `json:"topic"`
	// Paused is the rebuild the topic waits for ("" = none), PausedAt its
	// pause watermark's LSN.
	Paused   string `json:"paused,omitempty"`
	PausedAt string `json:"pausedAt,omitempty"`
	// ResolvedThrough: pause watermarks at or below this LSN are done
	// (committed or aborted) and ignored when the stream is read again.
	ResolvedThrough string    `json:"resolvedThrough,omitempty"`
	Last            string    `json:"last,omitempty"` // what happened last, for operators
	Updated         time.Time `json:"updated"`
}

// RebuildRecordKey and RebuildStateKey are the store keys of a topic's
// rebuild objects.
func RebuildRecordKey(topic string) string { return registryPrefix + "rebuilds/" + topic + ".json" }
func RebuildStateKey(topic string) string {
	return registryPrefix + "rebuilds/" + topic + ".relay.json"
}

// ReadRebuildRecord returns the topic's rebuild record, ok=false if none.
func ReadRebuildRecord(ctx context.Context, store storage.Store, topic string) (RebuildRecord, bool, error) {
	var r RebuildRecord
	ok, err := readJSON(ctx, store, RebuildRecordKey(topic), &r)
	return r, ok, err
}

// ReadRebuildState returns the relay's rebuild state of a topic.
func ReadRebuildState(ctx context.Context, store storage.Store, topic string) (RebuildState, bool, error) {
	var s RebuildState
	ok, err := readJSON(ctx, store, RebuildStateKey(topic), &s)
	return s, ok, err
}

// WriteRebuildRecord stores the rebuild's record (the last one wins).
func WriteRebuildRecord(ctx context.Context, store storage.Store, r RebuildRecord) error {
	return writeJSON(ctx, store, RebuildRecordKey(r.Topic), r)
}

func writeRebuildState(ctx context.Context, store storage.Store, s RebuildState) error {
	s.Updated = time.Now().UTC()
	return writeJSON(ctx, store, RebuildStateKey(s.Topic), s)
}

func readJSON(ctx context.Context, store storage.Store, key string, v any) (bool, error) {
	b, err := store.Get(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", key, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s is corrupt: %w", key, err)
	}
	return true, nil
}

func writeJSON(ctx context.Context, store storage.Store, key string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := store.Put(ctx, key, append(b, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

// lsnOrZero parses an LSN field; "" is 0.
func lsnOrZero(s string) (pglogrepl.LSN, error) {
	if s == "" {
		return 0, nil
	}
	return pglogrepl.ParseLSN(s)
}

// PGSnapshot is a parsed pg_current_snapshot(): which transactions were
// visible when it was taken.
type PGSnapshot struct {
	Xmin, Xmax uint64
	Xip        []uint64
}

// ParsePGSnapshot parses the text form "xmin:xmax:xip1,xip2,...".
func ParsePGSnapshot(s string) (PGSnapshot, error) {
	var p PGSnapshot
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return p, fmt.Errorf("snapshot %q: want xmin:xmax:xip", s)
	}
	var err error
	if p.Xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return p, fmt.Errorf("snapshot %q: xmin: %w", s, err)
	}
	if p.Xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return p, fmt.Errorf("snapshot %q: xmax: %w", s, err)
	}
	if parts[2] != "" {
		for _, x := range strings.Split(parts[2], ",") {
			v, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return p, fmt.Errorf("snapshot %q: xip: %w", s, err)
			}
			p.Xip = append(p.Xip, v)
		}
	}
	return p, nil
}

// Visible reports whether a committed transaction with this 32-bit xid (as
// pgoutput sends it) is visible in the snapshot. The xid must lie within
// 2^31 transactions of the snapshot, which holds for every transaction that
// commits near it.
func (p PGSnapshot) Visible(xid uint32) bool {
	if int32(xid-uint32(p.Xmax)) >= 0 {
		return false // started after the snapshot
	}
	if int32(xid-uint32(p.Xmin)) < 0 {
		return true // ended before the oldest transaction in progress
	}
	for _, x := range p.Xip {
		if uint32(x) == xid {
			return false
		}
	}
	return true
}

// seam drops, for a rebuilt topic, the streamed transactions whose rows its
// snapshot already holds.
type seam struct {
	from, to pglogrepl.LSN // [from, to): commit LSNs to check
	snap     PGSnapshot
}

// covers reports whether a row of a transaction came with the snapshot.
func (s *seam) covers(commitLSN pglogrepl.LSN, xid uint32) bool {
	return s != nil && commitLSN >= s.from && commitLSN < s.to && s.snap.Visible(xid)
}

// loadSeam returns the seam of the topic's last rebuild if the table's txn
// version says the rebuild is in and transactions after it may still need
// the check; nil otherwise.
func loadSeam(ctx context.Context, root storage.Store, name string, txnVersion int64) (*seam, error) {
	rec, ok, err := ReadRebuildRecord(ctx, root, name)
	if err != nil || !ok || txnVersion < rec.TxnVersion {
		return nil, err
	}
	to, err := pglogrepl.ParseLSN(rec.SeamEnd)
	if err != nil {
		return nil, fmt.Errorf("rebuild record of topic %q: seamEnd: %w", name, err)
	}
	if int64(to) <= txnVersion {
		return nil, nil
	}
	snap, err := ParsePGSnapshot(rec.Snapshot)
	if err != nil {
		return nil, fmt.Errorf("rebuild record of topic %q: %w", name, err)
	}
	return &seam{from: pglogrepl.LSN(rec.TxnVersion + 1), to: to, snap: snap}, nil
}
