package deltasink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
)

// groupsTTL is how long the sink trusts its reading of the store's
// groups when it places a new topic: a group created since is seen by the
// next topic placed after that. Two relays that place a topic differently
// meanwhile are told apart by the registry (catalog.Register).
const groupsTTL = 5 * time.Second

// groupReuse: Open reuses a group table's handle read whole less than
// this long ago (the topics of a group are opened one after another when
// a session starts), and checks its latest commit instead.
const groupReuse = 5 * time.Second

// groupCache is the sink's reading of the store's groups.
type groupCache struct {
	mu     sync.Mutex
	groups []catalog.Group
	at     time.Time
}

// list returns the groups, read again once groupsTTL old.
func (c *groupCache) list(ctx context.Context, s *Sink) ([]catalog.Group, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < groupsTTL {
		return c.groups, nil
	}
	gs, err := catalog.ListGroups(ctx, s.root)
	if err != nil {
		return nil, err
	}
	c.groups, c.at = gs, time.Now()
	return gs, nil
}

// locate finds where the topic lives and remembers it for Append and
// Commit.
func (s *Sink) locate(ctx context.Context, name string) (catalog.Placement, error) {
	p, err := catalog.ReadPlacement(ctx, s.root, name, nil)
	if err != nil {
		return p, err
	}
	if !p.Registered {
		groups, err := s.groups.list(ctx, s)
		if err != nil {
			return p, err
		}
		if g, ok := catalog.MatchGroup(groups, name); ok {
			p.Table = catalog.GroupTable(g.Name)
		}
	}
	s.remember(p)
	return p, nil
}

// remember keeps where a grouped topic lives for Append and Commit. A
// topic with its own table is not kept: place's answer for a topic it
// does not know is its own table (no entry per topic for the common
// case, which a batch of 10,000 new topics would hold all at once).
func (s *Sink) remember(p catalog.Placement) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.Shared() {
		s.places[p.Topic] = p
	} else {
		delete(s.places, p.Topic)
	}
}

// place returns where Open saw the topic; a topic not opened, or with its
// own table, has its own table.
func (s *Sink) place(name string) catalog.Placement {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.places[name]; ok {
		return p
	}
	return catalog.Placement{Topic: name, Table: name}
}

// openGrouped reads a grouped topic's state from its group's table.
func (s *Sink) openGrouped(ctx context.Context, p catalog.Placement) (sink.Topic, error) {
	t := sink.Topic{Name: p.Topic, Table: p.Table, Position: -1}
	tbl, err := s.groupHandle(ctx, p.Table)
	switch {
	case errors.Is(err, delta.ErrNoTable):
		t.Status = sink.New
		if p.Registered {
			t.Status, t.Reason = sink.Missing, fmt.Sprintf("the catalog registers the topic in group %q but the group's table %s is gone", p.Group(), p.Table)
		}
	case errors.Is(err, delta.ErrBrokenLog):
		t.Status, t.Reason = sink.Missing, err.Error()
	case errors.Is(err, delta.ErrUnsupportedProtocol):
		t.Status, t.Reason = s.notOursGrouped(ctx, p, err.Error())
	case err != nil:
		return t, fmt.Errorf("open topic %q in group table %s: %w", p.Topic, p.Table, err)
	default:
		id := tbl.Metadata().ID
		if p.Replaced(id) {
			t.Status, t.Reason = sink.Missing, fmt.Sprintf("the group table %s was replaced (table id %s; the topic's events were written to table id %s)", p.Table, id, p.TableID)
			return t, nil
		}
		if v, ok := tbl.TxnVersion(p.TxnAppID(s.opts.AppID)); ok {
			t.Position = v
		}
		lost, err := s.claims.check(ctx, p.Table, p.Topic, id, tbl.Version(), t.Position)
		if err != nil {
			return t, fmt.Errorf("open topic %q in group table %s: %w", p.Topic, p.Table, err)
		}
		if lost != "" {
			t.Status, t.Reason = sink.Missing, lost
			return t, nil
		}
		if _, err := topic.CheckOrUpgrade(ctx, tbl, false); errors.Is(err, topic.ErrForeignSchema) {
			t.Status, t.Reason = sink.Foreign, err.Error()
			if t.Position >= 0 {
				t.Status = sink.Incompatible
			}
			s.forget(p.Table)
		} else if err != nil {
			return t, fmt.Errorf("open topic %q in group table %s: %w", p.Topic, p.Table, err)
		}
	}
	return t, nil
}

// groupHandle returns the group table's handle, up to date: the one the
// sink keeps, checked if it was read whole less than groupReuse ago and
// read again in place otherwise, or the table read afresh (and kept) when
// the sink keeps none or that check or reading fails. Other topics of the
// group may be committing through the kept handle while a topic new to
// the session is opened: a second handle would miss their commits and
// take them, at its next commit, for another writer with the relay's
// identity. Check and Refresh wait for a commit in flight (the handle's
// lock).
func (s *Sink) groupHandle(ctx context.Context, table string) (*delta.Table, error) {
	s.mu.Lock()
	tbl, at := s.tables[table], s.opened[table]
	s.mu.Unlock()
	if tbl != nil {
		fresh := time.Since(at) < groupReuse
		if fresh && tbl.Check(ctx) == nil {
			return tbl, nil
		}
		if !fresh && tbl.Refresh(ctx) == nil {
			s.mu.Lock()
			s.opened[table] = time.Now()
			s.mu.Unlock()
			return tbl, nil
		}
	}
	s.forget(table)
	tbl, err := delta.OpenTable(ctx, s.sub(table), s.tableOpts())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.tables[table], s.opened[table] = tbl, time.Now()
	s.mu.Unlock()
	return tbl, nil
}

// notOursGrouped tells a group table this relay wrote the topic to from
// one it never wrote the topic to.
func (s *Sink) notOursGrouped(ctx context.Context, p catalog.Placement, reason string) (sink.Status, string) {
	snap, err := delta.LoadSnapshot(ctx, s.sub(p.Table), -1)
	if err == nil {
		if _, ok := snap.Txns[p.TxnAppID(s.opts.AppID)]; ok {
			return sink.Incompatible, reason
		}
	}
	return sink.Foreign, reason
}

// registerGrouped registers the topics of a group commit not registered
// yet, with the group table's id, before the commit that holds their first
// rows: a registered grouped topic always had a table. A topic registered
// with another table id (its group's table was replaced) is committed only
// once the operator resolved its hold (`relay rebuild --abort`: start it
// afresh), and is then registered anew with this table's id.
func (s *Sink) registerGrouped(ctx context.Context, tbl *delta.Table, table string, topics map[string]int) error {
	id := tbl.Metadata().ID
	for name := range topics {
		p := s.place(name)
		p.Table = table
		if err := s.registerIn(ctx, p, id); err != nil {
			return err
		}
	}
	return nil
}

// registerIn registers the grouped topic of p in p.Table, whose table id
// is id, unless its entry says so already: put-if-absent when it is not
// registered (catalog.Register tells a concurrent placement elsewhere),
// replaced when it names another id (the table was created again, and
// the operator restores the topic into it: a rebuild, or an abort of its
// hold).
func (s *Sink) registerIn(ctx context.Context, p catalog.Placement, id string) error {
	if p.Registered && p.TableID == id {
		return nil
	}
	register := catalog.Register
	if p.Registered {
		register = catalog.Reregister
	}
	p.TableID, p.Registered = id, true
	if err := register(ctx, s.root, p); err != nil {
		return err
	}
	s.remember(p)
	return nil
}
