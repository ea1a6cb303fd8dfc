package topicmeta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// Listing is every topic and every topic group of a store.
type Listing struct {
	Topics []Info      `json:"topics"`
	Groups []GroupInfo `json:"groups"`
}

// Load describes every registered topic (catalog.ListTopics) and every
// described one (a topic may be described before its first event), sorted.
func Load(ctx context.Context, store storage.Store) ([]Info, error) {
	l, err := LoadAll(ctx, store)
	return l.Topics, err
}

// LoadAll describes every registered or described topic and every topic
// group, sorted. Each table's log is read once: a group's table serves
// all of its topics.
func LoadAll(ctx context.Context, store storage.Store) (Listing, error) {
	names, err := catalog.ListTopics(ctx, store)
	if err != nil {
		return Listing{}, err
	}
	described, err := catalog.ListDescribed(ctx, store)
	if err != nil {
		return Listing{}, err
	}
	names = append(names, described...)
	sort.Strings(names)
	names = slices.Compact(names)
	groups, err := catalog.ListGroups(ctx, store)
	if err != nil {
		return Listing{}, err
	}
	ld, err := newLoader(ctx, store)
	if err != nil {
		return Listing{}, err
	}
	l := Listing{Topics: make([]Info, 0, len(names)), Groups: make([]GroupInfo, 0, len(groups))}
	members := map[string][]string{} // group table -> its registered topics
	for _, n := range names {
		in, p, err := ld.placed(ctx, n, groups)
		if err != nil {
			return l, err
		}
		if p.Shared() && p.Registered {
			members[p.Table] = append(members[p.Table], n)
		}
		l.Topics = append(l.Topics, in)
	}
	for _, g := range groups {
		gi, err := ld.group(ctx, g, members[catalog.GroupTable(g.Name)])
		if err != nil {
			return l, err
		}
		l.Groups = append(l.Groups, gi)
	}
	return l, nil
}

// LoadTopic describes one topic, registered or not (its table may not
// exist yet: Version -1).
func LoadTopic(ctx context.Context, store storage.Store, topic string) (Info, error) {
	if err := catalog.CheckName("topic", topic); err != nil {
		return Info{}, err
	}
	groups, err := catalog.ListGroups(ctx, store)
	if err != nil {
		return Info{}, err
	}
	ld, err := newLoader(ctx, store)
	if err != nil {
		return Info{}, err
	}
	in, _, err := ld.placed(ctx, topic, groups)
	return in, err
}

// LoadGroup describes topic group name and its registered topics, reading
// its table's log once; ok=false when there is no such group.
func LoadGroup(ctx context.Context, store storage.Store, name string) (gi GroupInfo, topics []Info, ok bool, err error) {
	g, ok, err := catalog.ReadGroup(ctx, store, name)
	if err != nil || !ok {
		return GroupInfo{}, nil, ok, err
	}
	names, err := catalog.ListTopics(ctx, store)
	if err != nil {
		return GroupInfo{}, nil, false, err
	}
	ld, err := newLoader(ctx, store)
	if err != nil {
		return GroupInfo{}, nil, false, err
	}
	table := catalog.GroupTable(name)
	var members []string
	for _, n := range names {
		if !g.Matches(n) { // only a topic its patterns match can be in it
			continue
		}
		p, err := catalog.ReadPlacement(ctx, store, n, nil)
		if err != nil {
			return GroupInfo{}, nil, false, err
		}
		if p.Table != table {
			continue
		}
		in, err := ld.topic(ctx, p)
		if err != nil {
			return GroupInfo{}, nil, false, err
		}
		members, topics = append(members, n), append(topics, in)
	}
	gi, err = ld.group(ctx, g, members)
	return gi, topics, true, err
}

// loader reads each table's log once, for all the topics it describes.
type loader struct {
	store   storage.Store
	markers map[string]catalog.Marker
	tables  map[string]*loadedTable
}

type loadedTable struct {
	snap   *delta.Snapshot
	err    error
	shared *sharedIndex // built on first use, for a group's table
}

func newLoader(ctx context.Context, store storage.Store) (*loader, error) {
	ms, err := catalog.ListMarkers(ctx, store)
	if err != nil {
		return nil, err
	}
	markers := make(map[string]catalog.Marker, len(ms))
	for _, m := range ms {
		markers[m.AppID] = m
	}
	return &loader{store: store, markers: markers, tables: map[string]*loadedTable{}}, nil
}

// table returns the latest snapshot of table (its error kept, as a
// Problem of every topic in it); an error only when ctx ended.
func (ld *loader) table(ctx context.Context, table string) (*loadedTable, error) {
	if t, ok := ld.tables[table]; ok {
		return t, nil
	}
	snap, err := delta.LoadSnapshot(ctx, storage.Sub(ld.store, table), -1)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	t := &loadedTable{snap: snap, err: err}
	ld.tables[table] = t
	return t, nil
}

// placed describes topic where its registry entry (or, unregistered, the
// groups) place it. A registry entry it cannot read is the Info's
// Problem.
func (ld *loader) placed(ctx context.Context, topic string, groups []catalog.Group) (Info, catalog.Placement, error) {
	p, err := catalog.ReadPlacement(ctx, ld.store, topic, groups)
	if err != nil {
		if ctx.Err() != nil {
			return Info{}, p, ctx.Err()
		}
		in := Info{Topic: topic, Table: topic, Location: storage.Sub(ld.store, topic).String(), Version: -1, Problem: err.Error()}
		return in, catalog.Placement{Topic: topic, Table: topic}, nil
	}
	in, err := ld.topic(ctx, p)
	return in, p, err
}

// topic returns an error only when ctx ended; a table that is missing or
// unreadable is the Info's Problem.
func (ld *loader) topic(ctx context.Context, p catalog.Placement) (Info, error) {
	in := Info{Topic: p.Topic, Table: p.Table, Group: p.Group(), Location: storage.Sub(ld.store, p.Table).String(), Version: -1}
	meta, ok, err := catalog.ReadTopicMeta(ctx, ld.store, p.Topic)
	switch {
	case err != nil:
		in.Problem = err.Error()
	case ok:
		in.Owner, in.Description, in.Described = meta.Owner, meta.Description, meta.Updated
	}
	if p.Shared() && !p.Registered {
		in.Problem = join(in.Problem, fmt.Sprintf("no event yet (its first goes to group %s's table)", in.Group))
	} else if err := ld.fromTable(ctx, &in, p); err != nil {
		return in, err
	}
	for _, pr := range registered() {
		if err := pr.Describe(ctx, ld.store, &in); err != nil {
			if ctx.Err() != nil {
				return in, ctx.Err()
			}
			in.Problem = join(in.Problem, err.Error())
		}
	}
	return in, nil
}

// fromTable fills what the topic's table says of it.
func (ld *loader) fromTable(ctx context.Context, in *Info, p catalog.Placement) error {
	t, err := ld.table(ctx, p.Table)
	if err != nil {
		return err
	}
	switch {
	case errors.Is(t.err, delta.ErrNoTable) && p.Shared():
		in.Problem = join(in.Problem, fmt.Sprintf("its group's table %s is missing: its events are gone", p.Table))
	case errors.Is(t.err, delta.ErrNoTable):
		in.Problem = join(in.Problem, "no table yet")
	case t.err != nil:
		in.Problem = join(in.Problem, fmt.Sprintf("table unreadable: %v", t.err))
	case p.Shared():
		tableFields(in, t.snap)
		sharedFields(in, t, ld)
		if p.Replaced(t.snap.Metadata.ID) {
			in.Problem = join(in.Problem, fmt.Sprintf("its group's table %s was created again (id %s) after its events were written (id %s): they are missing", p.Table, t.snap.Metadata.ID, p.TableID))
		}
	default:
		tableFields(in, t.snap)
		in.Records, in.LastCommit = t.snap.StatsRecords(), t.snap.CommitTime
		in.Sources = []Source{}
		for app, txn := range t.snap.Txns {
			if !catalog.IsRepublishTxn(app) { // a redrive's or repair's counter, no source's position
				in.Sources = append(in.Sources, ld.source(app, txn))
			}
		}
		sortSources(in.Sources)
	}
	return nil
}

// tableFields fills what is the table's, whoever shares it.
func tableFields(in *Info, snap *delta.Snapshot) {
	in.Version = snap.Version
	in.schemaString, in.tableDescription = snap.Metadata.SchemaString, snap.Metadata.Description
	in.LogRetention, in.FileRetention = retention(snap)
	in.Columns = columns(snap.Metadata.SchemaString)
}

func retention(snap *delta.Snapshot) (logs, files string) {
	cfg := snap.Metadata.Configuration
	logs, files = cfg[delta.PropLogRetention], cfg[delta.PropDeletedFileRetention]
	if logs == "" {
		logs = "interval 30 days (default)"
	}
	if files == "" {
		files = "interval 7 days (default)"
	}
	return logs, files
}

func columns(schemaString string) []Column {
	s, err := delta.ParseSchema(schemaString)
	if err != nil {
		return nil
	}
	out := make([]Column, 0, len(s.Fields))
	for _, f := range s.Fields {
		c, _ := f.Metadata["comment"].(string)
		out = append(out, Column{Name: f.Name, Type: delta.TypeString(f.Type), Nullable: f.Nullable, Comment: c})
	}
	return out
}

// source is the relay appID, at its txn, with its marker.
func (ld *loader) source(appID string, txn delta.Txn) Source {
	s := Source{AppID: appID, TxnLSN: lsnString(txn.Version)}
	if m, ok := ld.markers[appID]; ok {
		s.Slot, s.Database, s.SystemID = m.Slot, m.Database, m.SystemID
	}
	return s
}

func sortSources(ss []Source) {
	sort.Slice(ss, func(i, j int) bool { return ss[i].AppID < ss[j].AppID })
}
