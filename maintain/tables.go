package maintain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/txlog"
)

// target is one table a run maintains: a topic's own, or a group's shared
// by its topics (catalog.Placement).
type target struct {
	table  string
	group  string   // the group whose table it is; "" for a topic's own
	topics []string // the registered topics it holds (a topic's own: that topic)
	// unplaced: no registered topic names the table; it is maintained
	// only if it exists (a group whose table no topic was placed in yet).
	unplaced bool
	err      error // reading where its topic lives failed
}

// report starts the table's report.
func (t target) report() TableReport {
	tr := TableReport{Table: t.table, Group: t.group, Earliest: -1}
	if t.group == "" {
		tr.Topic = t.table
	} else {
		tr.Topics = t.topics
	}
	return tr
}

// targets returns the tables a run maintains, each once, in name order:
// the tables of every registered topic (a group's table once, however
// many topics it holds) and of every group, or, when opts name topics or
// groups, only theirs (a grouped topic's table is its group's).
func targets(ctx context.Context, root storage.Store, opts Options) ([]target, error) {
	names, err := catalog.ListTopics(ctx, root)
	if err != nil {
		return nil, err
	}
	groups, err := catalog.ListGroups(ctx, root)
	if err != nil {
		return nil, err
	}
	byTable := map[string]*target{}
	get := func(table string) *target {
		t := byTable[table]
		if t == nil {
			t = &target{table: table, unplaced: true}
			if g, ok := catalog.GroupOfTable(table); ok {
				t.group = g
			}
			byTable[table] = t
		}
		return t
	}
	placed := map[string]string{} // registered topic -> its table
	for _, name := range names {
		p, err := catalog.ReadPlacement(ctx, root, name, nil)
		if err != nil {
			get(name).err = fmt.Errorf("read where topic %q lives: %w", name, err)
			continue
		}
		t := get(p.Table)
		t.topics, t.unplaced = append(t.topics, name), false
		placed[name] = p.Table
	}
	for _, g := range groups {
		get(catalog.GroupTable(g.Name))
	}
	get(txlog.Table) // the transaction records, maintained when they exist
	for _, t := range byTable {
		if t.group == "" && len(t.topics) == 0 && t.table != txlog.Table {
			t.topics = []string{t.table} // a topic whose entry did not read
		}
	}
	if len(opts.Topics) > 0 || len(opts.Groups) > 0 {
		var err error
		if byTable, err = selected(ctx, root, opts, groups, placed, get); err != nil {
			return nil, err
		}
	}
	out := make([]target, 0, len(byTable))
	for _, t := range byTable {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b target) int { return strings.Compare(a.table, b.table) })
	return out, nil
}

// selected returns the tables of the topics and groups opts name: a
// topic's table is where it is registered, or, not registered yet, where
// it would be placed (its group's when a group matches it).
func selected(ctx context.Context, root storage.Store, opts Options, groups []catalog.Group, placed map[string]string,
	get func(string) *target) (map[string]*target, error) {
	out := map[string]*target{}
	for _, name := range opts.Topics {
		table, ok := placed[name]
		if !ok {
			p, err := catalog.ReadPlacement(ctx, root, name, groups)
			if err != nil {
				return nil, err
			}
			table = p.Table
		}
		t := get(table)
		if t.group == "" && len(t.topics) == 0 {
			t.topics = []string{name}
		}
		t.unplaced = false // named: reported even without a table
		out[table] = t
	}
	for _, g := range opts.Groups {
		t := get(catalog.GroupTable(g))
		t.unplaced = false
		out[t.table] = t
	}
	return out, nil
}

// held returns why maintenance leaves the table alone: one of its topics
// is held by a relay (a rebuild, a missing or incompatible table), "" when
// none is. A group's table is its topics' together: it waits for all of
// their holds to be lifted.
func held(ctx context.Context, root storage.Store, t target) (string, error) {
	for _, name := range t.topics {
		states, err := catalog.ListRebuildStates(ctx, root, name)
		if err != nil {
			return "", err
		}
		for _, st := range states {
			if st.Paused == "" {
				continue
			}
			if t.group != "" {
				return fmt.Sprintf("topic %s of group %s held by relay %s (%s): maintenance of the group's table waits until the hold is lifted",
					name, t.group, st.AppID, st.Paused), nil
			}
			return "held by relay " + st.AppID + " (" + st.Paused + "): maintenance waits until the hold is lifted", nil
		}
	}
	return "", nil
}

// inFlightSince returns the earliest time from which unreferenced files
// of the table may belong to a live lease: leases name topics, and a
// group's table holds the files of each of its topics.
func inFlightSince(leases []catalog.Lease, t target, now time.Time) (since time.Time, ok bool) {
	for _, name := range append([]string{t.table}, t.topics...) {
		if s, found := catalog.InFlightSince(leases, name, now); found && (!ok || s.Before(since)) {
			since, ok = s, true
		}
	}
	return since, ok
}
