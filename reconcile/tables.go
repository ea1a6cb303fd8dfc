package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// splitBudget bounds the occurred_at columns of a group table's mixed
// files kept in memory, split by topic, between the topics of one run (8
// bytes per row): each mixed file is then fetched and decoded once for
// all its topics, not once per topic.
const splitBudget = 128 << 20

// tableLog is one table's log side, read once per run and shared by the
// topics it holds: a topic's own table, or a group's (catalog.Group).
type tableLog struct {
	name  string // folder under the store root
	store storage.Store
	err   error           // the table could not be read
	snap  *delta.Snapshot // nil when there is no table
	adds  []delta.Add     // the snapshot's active files, by path
	files []*logFile      // adds[i] checked against storage
	// split holds, per mixed file (rows of several topics), the
	// occurred_at column of each topic's rows that the run checks.
	split      map[*logFile]map[string][]int64
	splitBytes int64
}

// placement says where a topic's log is. The store's groups are listed
// once a run.
func (c *checker) placement(ctx context.Context, name string) (catalog.Placement, error) {
	if c.groups == nil {
		gs, err := catalog.ListGroups(ctx, c.root)
		if err != nil {
			return catalog.Placement{}, fmt.Errorf("topic %q: %w", name, err)
		}
		c.groups = append([]catalog.Group{}, gs...) // non-nil: listed
	}
	return catalog.ReadPlacement(ctx, c.root, name, c.groups)
}

// loadLog loads a topic's log from the table that holds it; a name that
// cannot be a topic has no table (its rows went to the dead-letter topic).
func (c *checker) loadLog(ctx context.Context, name string) (*topicLog, error) {
	if outbox.ValidTopic(name) != nil && name != outbox.DeadLetterTopic {
		return &topicLog{topic: name, version: -1, cache: map[*logFile][]int64{}}, nil
	}
	p, err := c.placement(ctx, name)
	if err != nil {
		return nil, err
	}
	tb := c.table(ctx, p.Table)
	if tb.err != nil {
		return nil, fmt.Errorf("load log of topic %q: %w", name, tb.err)
	}
	tl := &topicLog{ours: c.ours, topic: name, table: tb, shared: p.Shared(), store: tb.store, version: -1, cache: map[*logFile][]int64{}}
	if tb.snap == nil {
		return tl, nil
	}
	if id := tb.snap.Metadata.ID; p.Replaced(id) {
		return nil, fmt.Errorf("topic %q: its events were written to group %q's table with id %s, but %s is now table id %s (deleted and created again): its history is missing; `relay rebuild --topic %s` restores it",
			name, p.Group(), p.TableID, p.Table, id, name)
	}
	tl.version = tb.snap.Version
	for i, f := range tb.files {
		if !tl.shared || topic.MayHold(tb.adds[i].Stats, name) {
			tl.files = append(tl.files, f)
		}
	}
	return tl, nil
}

// table returns the table's log side, read on first use: its snapshot,
// and every active file checked to exist in storage with the size its add
// records.
func (c *checker) table(ctx context.Context, name string) *tableLog {
	if tb, ok := c.tables[name]; ok {
		return tb
	}
	if c.tables == nil {
		c.tables = map[string]*tableLog{}
	}
	tb := &tableLog{name: name, store: storage.Sub(c.root, name), split: map[*logFile]map[string][]int64{}}
	tb.err = tb.load(ctx)
	c.tables[name] = tb
	return tb
}

func (tb *tableLog) load(ctx context.Context) error {
	snap, err := delta.LoadSnapshot(ctx, tb.store, -1)
	if errors.Is(err, delta.ErrNoTable) {
		return nil
	}
	if err != nil {
		return err
	}
	objs, err := tb.store.List(ctx, "", "")
	if err != nil {
		return fmt.Errorf("list data files of %s: %w", tb.name, err)
	}
	sizes := make(map[string]int64, len(objs))
	for _, o := range objs {
		if !strings.HasPrefix(o.Key, delta.LogDir) {
			sizes[o.Key] = o.Size
		}
	}
	tb.snap = snap
	for _, add := range snap.Files {
		tb.adds = append(tb.adds, add)
	}
	sort.Slice(tb.adds, func(i, j int) bool { return tb.adds[i].Path < tb.adds[j].Path })
	tb.files = make([]*logFile, len(tb.adds))
	for i, add := range tb.adds {
		tb.files[i] = newLogFile(add, sizes)
	}
	return nil
}

// occurred returns the occurred_at column of tl's rows in the mixed file
// f of a group's table. The file is fetched and decoded once, its rows
// split by topic for every topic of the run, and kept within splitBudget.
func (tb *tableLog) occurred(ctx context.Context, tl *topicLog, f *logFile) ([]int64, error) {
	if byTopic, ok := tb.split[f]; ok {
		return byTopic[tl.topic], nil
	}
	cols, err := tl.readFile(ctx, f, false, true, tl.isOurs)
	if err != nil {
		return nil, err
	}
	byTopic := map[string][]int64{}
	for i, v := range cols.occurred {
		byTopic[cols.topics[i]] = append(byTopic[cols.topics[i]], v)
	}
	if n := int64(len(cols.occurred)) * 8; tb.splitBytes+n <= splitBudget {
		tb.split[f] = byTopic
		tb.splitBytes += n
	}
	return byTopic[tl.topic], nil
}
