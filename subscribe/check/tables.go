package check

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
)

// tableState is what one look at a table's log gives, shared by the
// groups of every topic it holds (a group's table holds several).
type tableState struct {
	tbl       storage.Store
	snap      *delta.Snapshot
	view      *subscribe.LogView
	retention time.Duration
	atVersion map[int64]*delta.Snapshot // snapshots at groups' positions
	err       error
}

// topicState is one topic in its table (catalog.Placement).
type topicState struct {
	*tableState
	place catalog.Placement
	// For a grouped topic, newestOfTopic's memory: the newest version
	// found that may hold the topic's events (-1: none found yet), and
	// the lowest version read back from the newest without finding one.
	found, scanned int64
	reads          int
}

func loadTopic(ctx context.Context, store storage.Store, name string, groups []catalog.Group, tables map[string]*tableState) *topicState {
	p, err := catalog.ReadPlacement(ctx, store, name, groups)
	if err != nil {
		return &topicState{tableState: &tableState{err: fmt.Errorf("topic %q: %w", name, err)}, place: catalog.Placement{Topic: name, Table: name}}
	}
	t, ok := tables[p.Table]
	if !ok {
		t = loadTable(ctx, storage.Sub(store, p.Table))
		if t.err != nil && p.Shared() {
			t.err = fmt.Errorf("table %s of group %q: %w", p.Table, p.Group(), t.err)
		}
		tables[p.Table] = t
	}
	ts := &topicState{tableState: t, place: p, found: -1}
	if t.err != nil {
		ts.tableState = &tableState{err: fmt.Errorf("topic %q: %w", name, t.err)}
	} else {
		ts.scanned = t.snap.Version + 1
	}
	return ts
}

func loadTable(ctx context.Context, tbl storage.Store) *tableState {
	t := &tableState{tbl: tbl, atVersion: map[int64]*delta.Snapshot{}}
	if t.snap, t.err = delta.LoadSnapshot(ctx, tbl, -1); t.err != nil {
		return t
	}
	if t.view, t.err = subscribe.ListLog(ctx, tbl, 0); t.err != nil {
		return t
	}
	t.retention = 30 * 24 * time.Hour
	if v, ok := t.snap.Metadata.Configuration["delta.logRetentionDuration"]; ok {
		if d, err := delta.ParseInterval(v); err == nil {
			t.retention = d
		}
	}
	return t
}

// versionTime is the commit timestamp of version v, when the log holds it.
func (t *tableState) versionTime(ctx context.Context, v int64) (time.Time, bool, error) {
	obj, ok := t.view.Commits[v]
	if !ok {
		return time.Time{}, false, nil
	}
	tv, err := subscribe.VersionTime(ctx, t.tbl, v, obj.ModTime)
	if errors.Is(err, storage.ErrNotFound) {
		return time.Time{}, false, nil
	}
	return tv, err == nil, err
}

// txnsRead returns the txns of the table as a group at position pos has
// read it: those of the snapshot at pos-1 (none before version 0). ok is
// false when retention passed the position: what the group read is gone
// with the log. One snapshot load per distinct position.
func (t *tableState) txnsRead(ctx context.Context, pos int64) (map[string]delta.Txn, bool, error) {
	switch v := pos - 1; {
	case v >= t.snap.Version:
		return t.snap.Txns, true, nil
	case v < 0:
		return map[string]delta.Txn{}, true, nil
	case t.view != nil && v < t.view.First:
		return nil, false, nil
	}
	snap, ok := t.atVersion[pos-1]
	if !ok {
		var err error
		if snap, err = delta.LoadSnapshot(ctx, t.tbl, pos-1); err != nil {
			return nil, false, fmt.Errorf("sources at the group's position (version %d): %w", pos-1, err)
		}
		t.atVersion[pos-1] = snap
	}
	return snap.Txns, true, nil
}

// source returns the relay appId whose progress in the topic a txn of
// the topic's table records: the txn's appId in a topic's own table,
// "<appId>/<topic>" in a group's (catalog.TxnAppID); ok=false for another
// topic's txn.
func (ts *topicState) source(txnApp string) (string, bool) {
	if !ts.place.Shared() {
		return txnApp, true
	}
	return strings.CutSuffix(txnApp, "/"+ts.place.Topic)
}

// maxScan bounds the commits newestOfTopic reads back per topic.
const maxScan = 256

// newestOfTopic returns the newest version at or after pos of the group
// table that may hold the grouped topic's events (-1: none). When the
// topic's txns (every source's position in it) are what the group read,
// no commit of the topic's events followed: -1, nothing read. Otherwise
// the commits are read back from the newest, at most maxScan of them for
// the topic (all its groups together); past that, the table's newest
// version stands in (an upper bound of the lag).
func (ts *topicState) newestOfTopic(ctx context.Context, pos int64) (int64, error) {
	if pos > ts.snap.Version {
		return -1, nil
	}
	if read, ok, err := ts.txnsRead(ctx, pos); err != nil || (ok && ts.readAll(read)) {
		return -1, err
	}
	if ts.found >= 0 { // found searching down from the newest version
		if ts.found >= pos {
			return ts.found, nil
		}
		return -1, nil
	}
	for v := ts.scanned - 1; v >= pos; v-- {
		if _, listed := ts.view.Commits[v]; !listed || ts.reads >= maxScan {
			return ts.snap.Version, nil
		}
		ts.reads++
		may, err := ts.mayHold(ctx, v)
		if err != nil {
			return 0, err
		}
		ts.scanned = v
		if may {
			ts.found = v
			return v, nil
		}
	}
	return -1, nil
}

// readAll reports whether every source's txn of the topic in the newest
// snapshot is the one in read.
func (ts *topicState) readAll(read map[string]delta.Txn) bool {
	for app, txn := range ts.snap.Txns {
		if _, ok := ts.source(app); ok && read[app].Version != txn.Version {
			return false
		}
	}
	return true
}

// mayHold reports whether version v adds a data file that may hold the
// topic's events.
func (ts *topicState) mayHold(ctx context.Context, v int64) (bool, error) {
	data, err := ts.tbl.Get(ctx, delta.CommitKey(v))
	if err != nil {
		return false, fmt.Errorf("read version %d: %w", v, err)
	}
	acts, err := delta.ParseCommit(data)
	if err != nil {
		return false, fmt.Errorf("parse version %d: %w", v, err)
	}
	for _, a := range acts {
		if a.Add != nil && a.Add.DataChange && topic.MayHold(a.Add.Stats, ts.place.Topic) {
			return true, nil
		}
	}
	return false, nil
}
