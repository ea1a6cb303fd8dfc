package main

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

type topicStatus struct {
	Topic string `json:"topic"`
	// Table is the group table that holds the topic's events when it
	// shares one (Group names the group); absent for a topic's own table.
	Table string `json:"table,omitempty"`
	Group string `json:"group,omitempty"`
	// Version is the version of the table that holds the topic (its
	// group's table for a grouped topic); -1 when there is none.
	Version int64 `json:"version"`
	// TxnVersion is the relay's last committed source position of the
	// topic: its txn in the table (appId/topic in a group's table), as the
	// commit LSN of the source's current timeline it holds everything up
	// to (catalog.Positions.Through); position is the txn version itself.
	TxnVersion string `json:"txnLsn,omitempty"`
	position   int64
	// Files and Records are the topic's active files and rows, by the
	// files' stats. In a group's table Files counts the files whose stats
	// may hold the topic, Records the rows of those that hold it alone,
	// and SharedRecords the rows, of every topic, of those it shares with
	// other topics of its group: its rows number between Records and
	// Records+SharedRecords (as in `relay topics`).
	Files         int   `json:"files"`
	Records       int64 `json:"records"`
	SharedRecords int64 `json:"sharedRecords,omitempty"`
	// Problem is set when the table is missing, unreadable or changed
	// incompatibly, or the topic is held (the slot is then held there).
	Problem string `json:"problem,omitempty"`
}

// groupStatus is one group table as `relay status` reads it once for all
// of its topics.
type groupStatus struct {
	Group   string `json:"group"`
	Table   string `json:"table"`
	Version int64  `json:"version"` // -1 when there is no table
	Files   int    `json:"files"`
	Records int64  `json:"records"`
	Topics  int    `json:"topics"` // registered topics placed in it
	Problem string `json:"problem,omitempty"`
}

// tableSnap is one table's latest snapshot, read once.
type tableSnap struct {
	snap *delta.Snapshot // nil with err
	err  error
}

// statusTables reads each table once, whatever the number of topics it
// holds.
type statusTables struct {
	store storage.Store
	read  map[string]tableSnap
}

func (s *statusTables) get(ctx context.Context, table string) tableSnap {
	if ts, ok := s.read[table]; ok {
		return ts
	}
	snap, err := delta.LoadSnapshot(ctx, storage.Sub(s.store, table), -1)
	s.read[table] = tableSnap{snap, err}
	return s.read[table]
}

// statusTopicNames lists the registered topics, and those held before
// their first commit (a contract hold: a state but no table yet).
func statusTopicNames(ctx context.Context, store storage.Store, appID string) ([]string, map[string]bool, error) {
	names, err := catalog.ListTopics(ctx, store)
	if err != nil {
		return nil, nil, err
	}
	states, err := catalog.StateTopics(ctx, store, appID)
	if err != nil {
		return nil, nil, err
	}
	registered := map[string]bool{}
	for _, n := range names {
		registered[n] = true
	}
	for _, n := range states {
		if !registered[n] {
			st, _, err := catalog.ReadRebuildState(ctx, store, appID, n)
			if err != nil {
				return nil, nil, err
			}
			if st.Paused == catalog.HoldContract || st.Paused == catalog.HoldDeadLetterRate {
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	return names, registered, nil
}

// topicStatuses reports each topic from the table that holds it (its
// own, or its group's, read once for all its topics) at the relay's txn
// appId of the topic there, and each group table.
func topicStatuses(ctx context.Context, store storage.Store, appID string) ([]topicStatus, []groupStatus, error) {
	names, registered, err := statusTopicNames(ctx, store, appID)
	if err != nil {
		return nil, nil, err
	}
	groups, err := catalog.ListGroups(ctx, store)
	if err != nil {
		return nil, nil, err
	}
	tables := &statusTables{store: store, read: map[string]tableSnap{}}
	var out []topicStatus
	placed := map[string]int{}
	for _, n := range names {
		p, err := catalog.ReadPlacement(ctx, store, n, groups)
		if err != nil {
			return nil, nil, err
		}
		ts := tableStatus(p, tables.get(ctx, p.Table), appID, registered[n])
		if p.Shared() && registered[n] {
			placed[p.Table]++
		}
		if err := holdStatus(ctx, store, appID, n, &ts); err != nil {
			return nil, nil, err
		}
		out = append(out, ts)
	}
	return out, groupStatuses(ctx, groups, tables, placed), nil
}

// tableStatus is a topic's line from the snapshot of the table p names.
func tableStatus(p catalog.Placement, t tableSnap, appID string, registered bool) topicStatus {
	n := p.Topic
	ts := topicStatus{Topic: n, Version: -1}
	what := "table"
	if p.Shared() {
		ts.Table, ts.Group = p.Table, p.Group()
		what = fmt.Sprintf("group %q table %s", p.Group(), p.Table)
	}
	switch {
	case errors.Is(t.err, delta.ErrNoTable) && !registered:
		// no table yet: its first events are held (holdStatus)
	case errors.Is(t.err, delta.ErrNoTable):
		ts.Problem = what + " missing: `relay rebuild --topic " + n + "` restores it from the outbox"
	case t.err != nil:
		ts.Problem = fmt.Sprintf("%s unreadable (%v): move it away, then `relay rebuild --topic %s`", what, t.err, n)
	case registered && p.Replaced(t.snap.Metadata.ID):
		ts.Version = t.snap.Version
		ts.Problem = fmt.Sprintf("%s was replaced (table id %s; the topic's events were written to table id %s): `relay rebuild --topic %s` restores it", what, t.snap.Metadata.ID, p.TableID, n)
	default:
		ts.Version = t.snap.Version
		if txn, ok := t.snap.Txns[p.TxnAppID(appID)]; ok {
			ts.TxnVersion, ts.position = lsnString(txn.Version), txn.Version
		}
		topicFiles(&ts, p, t.snap)
	}
	return ts
}

// topicFiles sets the topic's files and rows from the snapshot; in a
// group's table the files that may hold it, the rows of those that hold it
// alone, and the rows of those it shares.
func topicFiles(ts *topicStatus, p catalog.Placement, snap *delta.Snapshot) {
	if !p.Shared() {
		ts.Files, ts.Records = len(snap.Files), snap.StatsRecords()
		return
	}
	for _, a := range snap.Files {
		if !topic.MayHold(a.Stats, p.Topic) {
			continue
		}
		ts.Files++
		n, _ := delta.StatsNumRecords(a.Stats)
		if topic.OnlyTopic(a.Stats, p.Topic) {
			ts.Records += n
		} else {
			ts.SharedRecords += n
		}
	}
}

// holdStatus sets the problem of a topic the relay holds.
func holdStatus(ctx context.Context, store storage.Store, appID, n string, ts *topicStatus) error {
	st, _, err := catalog.ReadRebuildState(ctx, store, appID, n)
	if err != nil {
		return err
	}
	switch st.Paused {
	case "":
	case catalog.HoldContract:
		ts.Problem = fmt.Sprintf("held since %s (slot held there): %s; register a contract version that admits it, or `relay contract policy --topic %s --on-violation dead-letter`", st.PausedAt, st.Last, n)
	case catalog.HoldMissingTable, catalog.HoldIncompatibleTable:
		ts.Problem = fmt.Sprintf("held since %s (slot held there): %s; `relay rebuild --topic %s` restores it", st.PausedAt, st.Last, n)
	case catalog.HoldDeadLetterRate:
		ts.Problem = fmt.Sprintf("held since %s (slot held there): %s; fix the cause, then `relay deadletter release --topic %s`", st.PausedAt, st.Last, n)
	default:
		ts.Problem = fmt.Sprintf("paused for rebuild %s since %s (slot held there)", st.Paused, st.PausedAt)
	}
	return nil
}

// groupStatuses reports every group's table from the snapshots read for
// its topics (or read now, for a group none of whose topics is listed).
func groupStatuses(ctx context.Context, groups []catalog.Group, tables *statusTables, placed map[string]int) []groupStatus {
	var out []groupStatus
	for _, g := range groups {
		table := catalog.GroupTable(g.Name)
		gs := groupStatus{Group: g.Name, Table: table, Version: -1, Topics: placed[table]}
		switch t := tables.get(ctx, table); {
		case errors.Is(t.err, delta.ErrNoTable):
			if gs.Topics > 0 {
				gs.Problem = "table missing: its topics are held; `relay rebuild --topic T` restores each"
			}
		case t.err != nil:
			gs.Problem = fmt.Sprintf("table unreadable (%v)", t.err)
		default:
			gs.Version, gs.Files, gs.Records = t.snap.Version, len(t.snap.Files), t.snap.StatsRecords()
		}
		out = append(out, gs)
	}
	return out
}
